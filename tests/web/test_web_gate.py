"""`roost web`'s gate, every defence on its own (Starlette's TestClient, no roostd): each test
fails when its defence is taken out of roost/web/guard.py, devices.py or app.py.

roostd is replaced by a table of rows (`FakeHub`) and a recorder of requests (`calls`), so
a test also sees that a refused request never reached roostd.
"""

from __future__ import annotations

import json
import os
import stat
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from starlette.testclient import TestClient

from roost.web import bridge
from roost.web.app import create_app
from roost.web.devices import Store, csrf_token
from roost.web.guard import CSP, NOT_PAIRED, RateLimit, Settings

BASE = "http://127.0.0.1:8477"
ORIGIN = {"origin": BASE}
SECRET_NAME = "secret-job-name-7731"
JOB = "a1b2c3d4"


def row(**over: Any) -> dict[str, Any]:
    base = {
        "id": JOB,
        "name": SECRET_NAME,
        "kind": "pi",
        "state": "needs_input",
        "status": "",
        "summary": "the summary text",
        "question": "Which colour?",
        "dialog": False,
        "options": None,
        "cwd": "/tmp",
        "session": None,
        "parent": None,
        "agent": None,
        "parentSession": None,
        "rootSession": None,
        "worktree": None,
        "pending": {"replies": 0, "agent": 0},
        "usage": {"cost": 0.0123, "budget": 1.0},
        "created": "2026-12-01T10:00:00.000Z",
        "updated": "2026-12-01T10:00:00.000Z",
    }
    return {**base, **over}


class FakeHub(bridge.Hub):
    def __init__(self, rows: list[dict[str, Any]]) -> None:
        super().__init__()
        self.rows = {r["id"]: r for r in rows}
        self.connected = True

    def start(self) -> None:
        pass

    def stop(self) -> None:
        pass


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("ROOST_HOME", str(tmp_path / "rh"))
    return tmp_path / "rh"


@pytest.fixture
def calls(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, dict[str, Any]]]:
    """Every request the web would send roostd; `show` answers with `row()`."""
    seen: list[tuple[str, dict[str, Any]]] = []

    async def request(op: str, **args: Any) -> dict[str, Any]:
        if op == "inbox":  # the nav's count of what waits: a read every page makes
            return {"entries": []}
        seen.append((op, args))
        if op == "show":
            return {"job": row()}
        return {"id": JOB, "state": "running"}

    monkeypatch.setattr(bridge, "request", request)
    return seen


def make(home: Path, rows: list[dict[str, Any]] | None = None, **settings: Any) -> TestClient:
    s = Settings(hosts=frozenset({"127.0.0.1:8477", "localhost:8477"}), store=Store(), **settings)
    return TestClient(
        create_app(s, FakeHub(rows if rows is not None else [row()])), base_url=BASE, follow_redirects=False
    )


def paired(client: TestClient) -> str:
    """Pair `client` as a browser would; its CSRF token."""
    code = Store().new_code()
    answer = client.get(f"/pair?code={code}")
    assert answer.status_code == 303, answer.text
    page = client.get("/")
    assert page.status_code == 200
    token = csrf_token(client.cookies["roost_web"])
    assert 'method="post"' not in page.text or f'name="csrf" value="{token}"' in page.text
    return token


@pytest.fixture
def client(home: Path, calls: list[Any]) -> Iterator[TestClient]:
    with make(home) as c:
        yield c


ROUTES_GET = [
    "/",
    f"/job/{JOB}",
    "/live/tree",
    f"/live/job/{JOB}",
    "/static/app.js",
    "/static/style.css",
    "/static/manifest.webmanifest",
    "/nowhere",
]
ROUTES_POST = [
    "/run",
    f"/job/{JOB}/reply",
    f"/job/{JOB}/choice",
    f"/job/{JOB}/stop",
    f"/job/{JOB}/start",
    f"/job/{JOB}/rm",
    f"/job/{JOB}/budget",
]


# -- every request is authenticated ---------------------------------------------------------------
@pytest.mark.parametrize("path", ROUTES_GET)
def test_nothing_is_served_before_pairing(client: TestClient, path: str) -> None:
    answer = client.get(path)
    assert answer.status_code == 401
    assert SECRET_NAME not in answer.text and "needs_input" not in answer.text
    assert "roost web pair" in answer.text


@pytest.mark.parametrize("path", ROUTES_POST)
def test_no_action_runs_before_pairing(client: TestClient, calls: list[Any], path: str) -> None:
    answer = client.post(path, data={"text": "x", "csrf": "x"}, headers=ORIGIN)
    assert answer.status_code == 401
    assert calls == []


def test_a_forged_cookie_is_no_session(client: TestClient) -> None:
    client.cookies.set("roost_web", "A" * 43)
    assert client.get("/").status_code == 401


# -- pairing ----------------------------------------------------------------------------------------
def test_pairing_sets_a_strict_httponly_cookie_and_leaves_no_code_in_the_url(client: TestClient) -> None:
    code = Store().new_code()
    answer = client.get(f"/pair?code={code}")
    assert answer.status_code == 303
    assert answer.headers["location"] == "/"
    cookie = answer.headers["set-cookie"].lower()
    assert "httponly" in cookie and "samesite=strict" in cookie and "path=/" in cookie
    assert "secure" not in cookie  # plain HTTP on loopback: a Secure cookie would not come back
    page = client.get("/")
    assert page.status_code == 200 and SECRET_NAME in page.text


def test_a_pairing_code_works_once(home: Path, calls: list[Any]) -> None:
    code = Store().new_code()
    with make(home) as first, make(home) as second:
        assert first.get(f"/pair?code={code}").status_code == 303
        again = second.get(f"/pair?code={code}")
        assert again.status_code == 403 and "set-cookie" not in again.headers
        assert second.get("/").status_code == 401


def test_a_pairing_code_expires_after_five_minutes(
    client: TestClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    code = Store().new_code()
    real = time.time
    monkeypatch.setattr(time, "time", lambda: real() + 301)
    assert client.get(f"/pair?code={code}").status_code == 403
    monkeypatch.setattr(time, "time", real)
    assert client.get(f"/pair?code={code}").status_code == 403  # and it is gone


def test_under_tls_the_cookie_is_secure_and_host_bound(home: Path, calls: list[Any]) -> None:
    s = Settings(hosts=frozenset({"127.0.0.1:8477"}), store=Store(), tls=True)
    with TestClient(
        create_app(s, FakeHub([row()])), base_url="https://127.0.0.1:8477", follow_redirects=False
    ) as c:
        answer = c.get(f"/pair?code={Store().new_code()}")
        cookie = answer.headers["set-cookie"].lower()
        assert cookie.startswith("__host-roost_web=") and "; secure" in cookie
        assert "strict-transport-security" in answer.headers


def test_secrets_are_stored_hashed_in_0600_files(client: TestClient, home: Path) -> None:
    code = Store().new_code()
    answer = client.get(f"/pair?code={code}")
    token = answer.cookies.get("roost_web") or answer.headers["set-cookie"].split("=")[1].split(";")[0]
    Store().new_code()
    for name in ("devices.json", "pairing.json"):
        path = home / "web" / name
        assert stat.S_IMODE(path.stat().st_mode) == 0o600, name
        text = path.read_text()
        assert token not in text and code not in text
    assert stat.S_IMODE((home / "web").stat().st_mode) == 0o700
    assert json.loads((home / "web" / "devices.json").read_text())[0]["tokenHash"]


# -- devices ---------------------------------------------------------------------------------------
def test_a_revoked_device_is_out_at_once(client: TestClient) -> None:
    paired(client)
    [device] = Store().devices()
    assert Store().revoke(device.id) == [device.id]
    assert client.get("/").status_code == 401


def test_revoke_all(home: Path, calls: list[Any]) -> None:
    with make(home) as a, make(home) as b:
        paired(a), paired(b)
        assert len(Store().devices()) == 2
        assert len(Store().revoke(None)) == 2
        assert a.get("/").status_code == 401 and b.get("/").status_code == 401


# -- CSRF -------------------------------------------------------------------------------------------
@pytest.mark.parametrize("path", ROUTES_POST)
def test_every_action_needs_the_session_csrf_token(client: TestClient, calls: list[Any], path: str) -> None:
    paired(client)
    for form in ({"text": "hi"}, {"text": "hi", "csrf": "0" * 64}):
        answer = client.post(path, data=form, headers=ORIGIN)
        assert answer.status_code == 403, (path, answer.text)
    assert calls == []


def test_the_csrf_token_is_per_session(home: Path, calls: list[Any]) -> None:
    with make(home) as a, make(home) as b:
        token_a, token_b = paired(a), paired(b)
        assert token_a != token_b
        assert (
            b.post(f"/job/{JOB}/reply", data={"text": "hi", "csrf": token_a}, headers=ORIGIN).status_code
            == 403
        )
        assert calls == []


@pytest.mark.parametrize(
    "headers",
    [
        {"origin": "http://evil.example"},
        {"origin": "null"},
        {"origin": "http://127.0.0.1:9999"},
        {"referer": "http://evil.example/x"},
        {},
    ],
)
def test_an_action_from_another_origin_is_refused(
    client: TestClient, calls: list[Any], headers: dict[str, str]
) -> None:
    csrf = paired(client)
    answer = client.post(f"/job/{JOB}/reply", data={"text": "hi", "csrf": csrf}, headers=headers)
    assert answer.status_code == 403
    assert calls == []


def test_an_action_with_the_token_from_this_origin_runs(client: TestClient, calls: list[Any]) -> None:
    csrf = paired(client)
    answer = client.post(f"/job/{JOB}/reply", data={"text": "hi", "csrf": csrf}, headers=ORIGIN)
    assert answer.status_code == 303 and answer.headers["location"] == f"/job/{JOB}#latest"  # the new turn
    assert calls == [("reply", {"job": JOB, "text": "hi", "cause": "reply", "by": "roost web (testclient)"})]
    referer = client.post(f"/job/{JOB}/stop", data={"csrf": csrf}, headers={"referer": f"{BASE}/job/{JOB}"})
    assert referer.status_code == 303 and calls[-1] == ("stop", {"job": JOB})


# -- DNS rebinding ---------------------------------------------------------------------------------
@pytest.mark.parametrize("host", ["evil.example:8477", "127.0.0.1:8478", "attacker.127.0.0.1.nip.io:8477"])
def test_a_foreign_host_header_is_refused_even_with_a_session(client: TestClient, host: str) -> None:
    paired(client)
    answer = client.get("/", headers={"host": host})
    assert answer.status_code == 421
    assert SECRET_NAME not in answer.text


# -- headers ----------------------------------------------------------------------------------------
def test_security_headers_on_every_response(client: TestClient) -> None:
    answers = [client.get("/"), client.get("/", headers={"host": "evil:1"}), client.get("/pair?code=x")]
    paired(client)
    answers += [
        client.get("/"),
        client.get("/static/app.js"),
        client.get("/nowhere"),
        client.get(f"/job/{JOB}"),
    ]
    for answer in answers:
        h = answer.headers
        assert h["content-security-policy"] == CSP, answer.request.url
        assert h["x-content-type-options"] == "nosniff"
        assert h["x-frame-options"] == "DENY"
        assert h["cache-control"] == "no-store"
        assert h["referrer-policy"] == "same-origin"
    assert "'unsafe-inline'" not in CSP and "script-src 'self'" in CSP
    assert "frame-ancestors 'none'" in CSP


# -- read-only --------------------------------------------------------------------------------------
def test_read_only_serves_views_and_refuses_actions(home: Path, calls: list[Any]) -> None:
    with make(home, read_only=True) as c:
        csrf = paired(c)
        page = c.get(f"/job/{JOB}")
        assert page.status_code == 200 and 'method="post"' not in page.text  # GET forms: search
        assert 'method="post"' not in c.get("/").text  # the list's filter is a GET form
        for path in ROUTES_POST:
            assert c.post(path, data={"text": "hi", "csrf": csrf}, headers=ORIGIN).status_code == 403
        assert [op for op, _ in calls if op != "show"] == []


# -- rate limit -------------------------------------------------------------------------------------
def flooded(home: Path, address: str = "10.0.0.1") -> TestClient:
    """A client at `address` of a server whose failure limit is 10 a minute per address,
    answered 0.2 s late past it."""
    s = Settings(
        hosts=frozenset({"127.0.0.1:8477"}),
        store=Store(),
        limit=RateLimit(limit=10, window=60.0, penalty=0.2),
    )
    return TestClient(
        create_app(s, FakeHub([row()])), base_url=BASE, follow_redirects=False, client=(address, 40000)
    )


def client_at(app_client: TestClient, address: str) -> TestClient:
    """Another client (its own cookies) of the same server, at `address`."""
    return TestClient(app_client.app, base_url=BASE, follow_redirects=False, client=(address, 40001))


def test_bad_codes_are_limited_per_address(home: Path, calls: list[Any]) -> None:
    with flooded(home) as guesser:
        statuses = [guesser.get("/pair?code=guess").status_code for _ in range(10)]
        assert statuses == [403] * 10
        started = time.monotonic()
        late = guesser.get("/pair?code=guess")
        assert late.status_code == 429 and "too many failed attempts" in late.text
        assert "roost web pair" in late.text
        assert time.monotonic() - started >= 0.2  # answered late: a guesser is slowed
        # Another address is not: its bad code is an ordinary 403, at once.
        with client_at(guesser, "10.0.0.2") as other:
            assert other.get("/pair?code=guess").status_code == 403


def test_a_flood_of_bad_codes_locks_no_one_out(home: Path, calls: list[Any]) -> None:
    with flooded(home) as guesser:
        for _ in range(25):
            guesser.get("/pair?code=guess")
        # A valid code pairs from another address, and from the flooded one itself (on
        # loopback every client is 127.0.0.1: the owner shares the flooder's address).
        with client_at(guesser, "10.0.0.2") as owner:
            assert owner.get(f"/pair?code={Store().new_code()}").status_code == 303
            assert owner.get("/").status_code == 200
        with client_at(guesser, "10.0.0.1") as owner:
            assert owner.get(f"/pair?code={Store().new_code()}").status_code == 303
            assert owner.get("/").status_code == 200


def test_an_unknown_cookie_is_told_not_paired_and_how_to_pair(home: Path, calls: list[Any]) -> None:
    with flooded(home) as forger:
        forger.cookies.set("roost_web", "forged")
        answers = [forger.get("/") for _ in range(12)]
        assert [a.status_code for a in answers] == [401] * 12
        assert all(a.text == NOT_PAIRED for a in answers)  # never "too many failed attempts"
        assert "roost web pair" in NOT_PAIRED and "not paired" in NOT_PAIRED
        # The flood of forged cookies keeps no one from pairing, from the same address.
        with client_at(forger, "10.0.0.1") as owner:
            assert owner.get(f"/pair?code={Store().new_code()}").status_code == 303


def test_a_revoked_browser_is_told_not_paired(client: TestClient) -> None:
    paired(client)
    for _ in range(12):  # its reloads: failures, and still the same answer
        Store().revoke(None)
        answer = client.get("/")
        assert answer.status_code == 401 and answer.text == NOT_PAIRED


def test_the_rate_limit_is_per_address_and_its_window_passes() -> None:
    limit = RateLimit(limit=2, window=0.05, total=5)
    assert not limit.fail("a") and not limit.fail("a")
    assert limit.blocked("a") and limit.fail("a") and not limit.blocked("b")
    time.sleep(0.06)  # the window itself is what is tested
    assert not limit.blocked("a")
    for address in "bcdef":  # the global cap, far above one address's limit
        limit.fail(address)
    assert limit.blocked("g")


# -- escaping ---------------------------------------------------------------------------------------
XSS_NAME = "<script>alert('name')</script>"
XSS_QUESTION = "Pick <img src=x onerror=alert(1)> or <b>bold</b>?"
XSS_DIFF = "--- a/x\n+++ b/x\n+</pre><script>alert('diff')</script>"


def hostile_session(path: Path) -> None:
    entries = [
        {"type": "session", "id": "s", "cwd": "/tmp"},
        {
            "type": "message",
            "timestamp": "2026-12-01T10:00:00Z",
            "message": {"role": "user", "content": "<script>alert('user')</script>"},
        },
        {
            "type": "message",
            "timestamp": "2026-12-01T10:00:01Z",
            "message": {
                "role": "assistant",
                "content": [
                    {"type": "text", "text": "<iframe src=javascript:alert(1)>"},
                    {
                        "type": "toolCall",
                        "name": "<b>bash</b>",
                        "arguments": {"command": "</pre><script>x()</script>"},
                    },
                ],
            },
        },
        {
            "type": "message",
            "timestamp": "2026-12-01T10:00:02Z",
            "message": {"role": "toolResult", "toolName": "bash", "content": XSS_DIFF},
        },
        {
            "type": "custom_message",
            "customType": "pi-roost-agent-message",
            "timestamp": "2026-12-01T10:00:03Z",
            "content": "<svg onload=alert(1)>",
            "details": {"title": "<script>t()</script>", "seq": 1},
        },
    ]
    path.write_text("".join(json.dumps(e) + "\n" for e in entries))


def assert_inert(html: str) -> None:
    lowered = html.lower()
    for raw in (
        "<script>alert",
        "<script>x()",
        "<script>t()",
        "<img src=x",
        "<iframe",
        "<svg onload",
        "<b>bold",
        "<b>bash",
        "</pre><script>",
    ):
        assert raw not in lowered, raw
    assert lowered.count("<script") == 1  # app.js's own tag, nothing else


def test_agent_written_text_stays_inert(home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    session = tmp_path / "s.jsonl"
    hostile_session(session)
    hostile = row(
        name=XSS_NAME,
        question=XSS_QUESTION,
        summary=XSS_DIFF,
        session=str(session),
        dialog=True,
        options=["<script>o()</script>", "b"],
        cwd="</dd><script>c()</script>",
    )

    async def request(op: str, **args: Any) -> dict[str, Any]:
        return {"job": hostile}

    monkeypatch.setattr(bridge, "request", request)
    with make(home, rows=[hostile]) as c:
        paired(c)
        tree, job = c.get("/"), c.get(f"/job/{JOB}")
        assert tree.status_code == job.status_code == 200
        assert "&lt;script&gt;alert(&#39;name&#39;)&lt;/script&gt;" in tree.text
        assert "&lt;/pre&gt;&lt;script&gt;alert(&#39;diff&#39;)" in job.text
        for html in (tree.text, job.text):
            assert_inert(html)
        assert "&lt;script&gt;o()&lt;/script&gt;" in job.text  # a dialog's choice, escaped


def test_live_fragments_are_escaped_too(tmp_path: Path) -> None:
    from roost.pi.transcript import read_entries
    from roost.web.app import fragment
    from roost.web.entries import items
    from roost.web.pageparts import job_list

    session = tmp_path / "s.jsonl"
    hostile_session(session)
    hostile = row(name=XSS_NAME, question=XSS_QUESTION)
    parts = [
        fragment("_tree.html", groups=job_list({JOB: hostile}), connected=True),
        fragment("_head.html", row=hostile, csrf="c", read_only=False),
        fragment("_items.html", items=items(read_entries(session))),
    ]
    assert "&lt;script&gt;alert(&#39;name&#39;)" in parts[0]  # the row is there, escaped
    for html in parts:
        assert "<script" not in html.lower() and "<img" not in html.lower()


def test_the_session_files_of_the_web_are_private(home: Path) -> None:
    Store().write_server("http://127.0.0.1:8477")
    assert stat.S_IMODE((home / "web" / "server.json").stat().st_mode) == 0o600
    assert Store().running_url() == "http://127.0.0.1:8477"
    os.environ.get("ROOST_HOME")


def test_the_names_a_server_answers() -> None:
    from roost.web.serve import hosts_for

    assert hosts_for("127.0.0.1", 8477, ()) == {"127.0.0.1:8477", "localhost:8477", "[::1]:8477"}
    assert "127.0.0.1:8477" in hosts_for("0.0.0.0", 8477, ())
    tailnet = hosts_for("100.64.0.1", 8477, ("Box.ts.net",))
    assert tailnet == {"100.64.0.1:8477", "box.ts.net:8477"}  # no loopback name off loopback


def test_roostd_away_is_one_line_503(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from roost.wire.client import DaemonUnavailable

    async def request(op: str, **args: Any) -> dict[str, Any]:
        raise DaemonUnavailable("roostd is not running")

    monkeypatch.setattr(bridge, "request", request)
    with make(home) as c:
        paired(c)
        answer = c.get(f"/job/{JOB}")
        assert answer.status_code == 503 and "roostd is not answering" in answer.text
        assert answer.headers["content-security-policy"] == CSP
