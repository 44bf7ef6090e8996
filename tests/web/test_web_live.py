"""`roost web` as a user runs it, against a real roostd with the fake pi: the pairing link on
stdout, the first page, the job page with its question, answering it, live updates without
polling, `roost web pair|devices|revoke`, and the refused options."""

from __future__ import annotations

import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kit.lab import Lab
from kit.procs import wait_until
from kit.webserver import WebServer

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
def web(fake_pi_env: Lab) -> Iterator[WebServer]:
    with WebServer(fake_pi_env) as server:
        yield server


def test_the_pairing_link_is_alone_on_stdouts_first_line(web: WebServer) -> None:
    assert web.first_line.startswith(f"{web.url}/pair?code=")
    assert " " not in web.first_line


def test_a_job_asks_and_is_answered_from_the_browser(web: WebServer, fake_pi_env: Lab) -> None:
    lab = fake_pi_env
    job = lab.run_job("--name", "asker", "[[ask]] colours")
    lab.wait_state(job, "needs_input")
    http = web.paired()
    tree = http.get(web.url + "/").text
    assert "asker" in tree and "needs_input" in tree
    page = http.get(f"{web.url}/job/{job}").text
    question = lab.row(job)["question"]
    assert question and question.replace("'", "&#39;") in page
    assert 'action="/job/' + job + '/reply"' in page
    assert "[[ask]] colours" in page  # the transcript's user message

    answer = web.post(http, f"/job/{job}/reply", text="blue, please")
    assert answer.status_code == 200 and str(answer.url) == f"{web.url}/job/{job}#latest"
    assert lab.wait(job) in ("done", "needs_input")
    wait_until(
        lambda: "blue, please" in http.get(f"{web.url}/job/{job}").text, 30, "the reply in the transcript"
    )


def test_a_dialogs_choice_is_picked_by_its_number(web: WebServer, fake_pi_env: Lab) -> None:
    lab = fake_pi_env
    job = lab.run_job("[[dialog select red,green]]")
    lab.wait_state(job, "needs_input")
    wait_until(lambda: lab.row(job)["dialog"], 30, "the dialog open")
    http = web.paired()
    page = http.get(f"{web.url}/job/{job}").text
    assert 'name="choice" value="2">green</button>' in page
    web.post(http, f"/job/{job}/choice", choice="2")
    assert lab.wait(job) == "done"
    wait_until(
        lambda: "chose: green" in http.get(f"{web.url}/job/{job}").text, 30, "the answer in the transcript"
    )


def test_the_tree_is_live(web: WebServer, fake_pi_env: Lab) -> None:
    """A job run from the CLI appears on an open page, pushed through roostd's stream."""
    http = web.paired()
    seen: list[str] = []
    done = threading.Event()

    def read() -> None:
        for _name, data in web.live(http, "/live/tree"):
            seen.append(data.get("tree", ""))
            if "live-one" in seen[-1] and "done" in seen[-1]:
                done.set()
                return

    threading.Thread(target=read, daemon=True).start()
    job = fake_pi_env.run_job("--name", "live-one", "hello")
    assert done.wait(60), seen[-1:] or "no event"
    assert fake_pi_env.row(job)["state"] == "done"


def test_the_transcript_is_live(web: WebServer, fake_pi_env: Lab) -> None:
    lab = fake_pi_env
    job = lab.run_job("--name", "talker", "first words")
    assert lab.wait(job) == "done"
    http = web.paired()
    got: list[tuple[str, Any]] = []
    done = threading.Event()

    def read() -> None:
        for event in web.live(http, f"/live/job/{job}?items=2"):
            got.append(event)
            if "second words" in str(event[1]) and "echo: second words" in str(event[1]):
                done.set()
                return

    threading.Thread(target=read, daemon=True).start()
    lab.reply(job, "second words")
    assert done.wait(60), got


def test_roost_web_pair_prints_a_new_link_for_the_running_server(web: WebServer, fake_pi_env: Lab) -> None:
    link = fake_pi_env.roost_ok("web", "pair").strip()
    assert link.startswith(f"{web.url}/pair?code=") and link != web.first_line
    web.paired(link)
    devices = fake_pi_env.cli_json("web", "devices", "--json")
    assert len(devices) == 1 and set(devices[0]) == {"id", "name", "paired", "lastSeen"}


def test_devices_are_listed_and_revoked(web: WebServer, fake_pi_env: Lab) -> None:
    lab = fake_pi_env
    first, second = web.paired(), web.paired(lab.roost_ok("web", "pair").strip())
    devices = lab.cli_json("web", "devices", "--json")
    assert len(devices) == 2
    assert lab.roost_ok("web", "revoke", devices[0]["id"]).strip() == "revoked 1 device"
    assert first.get(web.url + "/").status_code == 401
    assert second.get(web.url + "/").status_code == 200
    assert lab.roost_ok("web", "revoke", "--all").strip() == "revoked 1 device"
    assert second.get(web.url + "/").status_code == 401
    refused = lab.roost("web", "revoke", "nosuch")
    assert refused.returncode == 2 and refused.stderr.count("\n") == 1


def test_pair_without_a_server_says_why(fake_pi_env: Lab) -> None:
    answer = fake_pi_env.roost("web", "pair")
    assert answer.returncode == 1 and answer.stdout == ""
    assert answer.stderr.strip() == (
        "roost: no `roost web` is running on this ROOST_HOME (start it with `roost web`)"
    )


@pytest.mark.parametrize("args", [("--bind", "0.0.0.0"), ("--bind", "192.0.2.1"), ("--bind", "::")])
def test_a_non_loopback_bind_needs_tls_or_insecure_http(roost_env: Lab, args: tuple[str, ...]) -> None:
    answer = roost_env.roost("web", *args, "--port", "1")
    assert answer.returncode == 1 and answer.stdout == ""
    lines = answer.stderr.strip().splitlines()
    assert len(lines) == 1 and "needs TLS" in lines[0] and "--insecure-http" in lines[0]


def test_insecure_http_warns(roost_env: Lab) -> None:
    with WebServer(roost_env, "--bind", "0.0.0.0", "--insecure-http") as server:
        assert server.first_line.startswith("http://127.0.0.1:")
        err = server.stop()
    assert "WARNING: serving plain HTTP on 0.0.0.0" in err


def test_an_agent_report_arrives_live_framed_as_an_agents(web: WebServer, fake_pi_env: Lab) -> None:
    """A child's report reaches its parent while the parent's page is open: it appears in
    the transcript as an agent item, not as the user's."""
    lab = fake_pi_env
    parent = lab.run_job("--name", "parent", "[[hold gate]]")
    wait_until(lambda: lab.row(parent)["session"], 30, "the parent's session")
    http = web.paired()
    got: list[str] = []
    done = threading.Event()

    def read() -> None:
        for _name, data in web.live(http, f"/live/job/{parent}"):
            got.append(str(data.get("transcript", "")))
            if "item-agent" in got[-1] and "CHILD-REPORT" in got[-1]:
                done.set()
                return

    threading.Thread(target=read, daemon=True).start()
    (lab.work / "gate").touch()
    lab.reply(parent, "[[spawn CHILD-REPORT please]]")
    assert done.wait(60), got[-3:]
    agent_item = next(g for g in got if "item-agent" in g)
    assert "item-user" not in agent_item.split("item-agent")[1].split("</li>")[0]


def test_run_a_job_stop_start_and_remove_it(web: WebServer, fake_pi_env: Lab) -> None:
    lab = fake_pi_env
    http = web.paired()
    ran = web.post(http, "/run", task="from the web", cwd=str(lab.work), name="webbed")
    job = lab.job_named("webbed")
    assert job is not None and str(ran.url) == f"{web.url}/job/{job['id']}", ran.url
    assert lab.wait(job["id"]) == "done"
    assert "webbed" in http.get(web.url + "/").text
    web.post(http, f"/job/{job['id']}/stop")
    assert lab.row(job["id"])["state"] == "stopped"
    web.post(http, f"/job/{job['id']}/start")
    assert lab.row(job["id"])["state"] in ("starting", "running", "done")
    refused = web.post(http, "/run", task="x", cwd="relative/dir")
    assert "the directory must be an absolute path" in refused.text
    asked = web.post(http, f"/job/{job['id']}/rm")  # without the confirmation: its page
    assert str(asked.url) == f"{web.url}/job/{job['id']}/rm" and lab.job_named("webbed") is not None
    assert "Remove webbed?" in asked.text
    removed = web.post(http, f"/job/{job['id']}/rm", confirm="yes")
    assert str(removed.url).startswith(web.url + "/?notice=") and lab.job_named("webbed") is None
    assert f"removed webbed ({job['id']})" in removed.text


def test_tls_off_loopback_serves_https_with_a_secure_host_cookie(roost_env: Lab, tmp_path: Path) -> None:
    """With --tls-cert/--tls-key a non-loopback bind is allowed (0.0.0.0 here: the test
    still connects on 127.0.0.1), and the cookie is Secure and host-bound."""
    cert, key = tmp_path / "c.pem", tmp_path / "k.pem"
    subprocess.run(
        [
            "openssl",
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            "1",
            "-subj",
            "/CN=127.0.0.1",
            "-keyout",
            str(key),
            "-out",
            str(cert),
        ],
        check=True,
        capture_output=True,
    )
    with WebServer(roost_env, "--bind", "0.0.0.0", "--tls-cert", str(cert), "--tls-key", str(key)) as web:
        assert web.first_line.startswith("https://127.0.0.1:")
        import httpx2

        client = httpx2.Client(verify=False)
        answer = client.get(web.first_line)
        assert answer.status_code == 303
        cookie = answer.headers["set-cookie"].lower()
        assert cookie.startswith("__host-roost_web=") and "; secure" in cookie
        assert "strict-transport-security" in answer.headers
        err = web.stop()
    assert "WARNING" not in err
