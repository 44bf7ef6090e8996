"""`python -m roost.fakellm --port N --script FILE.json [--log FILE]`.

Prints `fakellm listening on http://127.0.0.1:PORT/v1` once it accepts connections (useful
with `--port 0`), then serves until SIGINT or SIGTERM.
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading

from roost.fakellm.replies import Reply
from roost.fakellm.script import ScriptError, load_script
from roost.fakellm.server import FakeLLM, Rule


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m roost.fakellm", description=__doc__)
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=0, help="0 picks a free port (default)")
    ap.add_argument("--script", help="rules as JSON (see docs/pi-notes.md)")
    ap.add_argument("--log", help="append every request as a JSON line to this file")
    ap.add_argument("--model", default="fake-model", help="the model id /v1/models lists")
    args = ap.parse_args(argv)

    rules: list[Rule] = []
    default: Reply | None = None
    if args.script:
        try:
            rules, default = load_script(args.script)
        except ScriptError as e:
            print(f"fakellm: {e}", file=sys.stderr)
            return 2

    stop = threading.Event()

    def on_signal(signum: int, frame: object) -> None:
        stop.set()  # only note it; the main thread shuts the server down

    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)
    llm = FakeLLM(rules, default=default, host=args.host, port=args.port, model=args.model, log_path=args.log)
    try:
        llm.start()
    except OSError as e:
        print(f"fakellm: cannot listen on {args.host}:{args.port}: {e}", file=sys.stderr)
        return 1
    print(f"fakellm listening on {llm.base_url}", flush=True)
    try:
        stop.wait()
    finally:
        llm.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
