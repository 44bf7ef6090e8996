"""A self-signed certificate for a test's TLS (roostd's remote hub), made by openssl."""

from __future__ import annotations

import subprocess
from pathlib import Path

OPENSSL_CERT = "openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 1"


def make_cert(where: Path, name: str) -> tuple[str, str]:
    """The certificate's and its key's paths, in `where`, for the common name `name`."""
    cert, key = where / f"{name}.pem", where / f"{name}.key"
    subprocess.run(
        [*OPENSSL_CERT.split(), "-keyout", str(key), "-out", str(cert), "-subj", f"/CN={name}"],
        check=True,
        capture_output=True,
        timeout=60,
    )
    return str(cert), str(key)
