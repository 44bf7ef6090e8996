"""`roost web` in a Lab, for tests and benchmarks: the server started as a user would (its
pairing link read from its stdout), a paired HTTP client, and the live stream read event by
event.

```python
with WebServer(lab) as web:
    http = web.paired()                  # an httpx2.Client with the device's cookie
    http.get(web.url + "/")
    for name, data in web.live(http, "/live/tree"):   # server-sent events, parsed
        ...
```
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import httpx2

from kit.lab import Lab


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class WebServer:
    """`roost web --port P [args]` with the lab's environment, until `stop()`."""

    def __init__(self, lab: Lab, *args: str, port: int | None = None) -> None:
        self.lab = lab
        self.port = port or free_port()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "roost.cli.main", "web", "--port", str(self.port), *args],
            env=dict(lab.env),
            cwd=lab.work,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        assert self.proc.stdout is not None
        self.first_line = self.proc.stdout.readline().strip()
        if not self.first_line:
            raise AssertionError(f"roost web printed no pairing link: {self.stop()}")
        self.url = self.first_line.split("/pair?", 1)[0]

    def paired(self, link: str | None = None) -> httpx2.Client:
        """A client paired with `link` (the first one by default), on the job list."""
        client = httpx2.Client(follow_redirects=True, timeout=30.0, verify=False)  # a test cert
        answer = client.get(link or self.first_line)
        assert answer.status_code == 200 and str(answer.url) == self.url + "/", answer.text
        return client

    def csrf(self, client: httpx2.Client) -> str:
        """The session's CSRF token, as its pages carry it."""
        page = client.get(self.url + "/new").text  # the new job's form carries it
        return page.split('name="csrf" value="', 1)[1].split('"', 1)[0]

    def post(self, client: httpx2.Client, path: str, **form: str) -> httpx2.Response:
        return client.post(
            self.url + path, data={"csrf": self.csrf(client), **form}, headers={"origin": self.url}
        )

    def live(self, client: httpx2.Client, path: str) -> Iterator[tuple[str, Any]]:
        """The server-sent events of `path`, as (event name, parsed data), forever."""
        with client.stream("GET", self.url + path, timeout=httpx2.Timeout(30.0, read=120.0)) as answer:
            assert answer.status_code == 200, answer.read()
            name, data = "message", []
            for line in answer.iter_lines():
                if line.startswith("event: "):
                    name = line[7:]
                elif line.startswith("data: "):
                    data.append(line[6:])
                elif not line and data:
                    yield name, json.loads("\n".join(data))
                    name, data = "message", []

    def stop(self) -> str:
        """Stop it (SIGTERM); its stderr."""
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        assert self.proc.stderr is not None
        return self.proc.stderr.read()

    def __enter__(self) -> WebServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
