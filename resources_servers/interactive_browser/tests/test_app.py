"""interactive_browser over HTTP: the server as a real process driving Debian's Chromium through Playwright.

The session cookie is threaded by hand (the Gym client keeps no cookie jar), as an agent does. Without
Playwright or Chromium every test that needs the browser skips with the reason; the refusal to start is
checked either way.
"""

from __future__ import annotations

import asyncio
import http.server
import socket
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from nemo_gym.http.client import get_response_json, request
from nemo_gym.testing import (
    StartedServer,
    check_environment_config,
    read_jsonl,
    response_with,
    run_resources_server,
    session_id_in_cookie,
)
from resources_servers.interactive_browser.browser import find_chromium, playwright_missing

FOLDER = Path(__file__).resolve().parents[1]
INSTANCE = "interactive_browser"
COOKIE_NAME = f"InteractiveBrowserResourcesServer___{INSTANCE}"
ROWS = read_jsonl(FOLDER / "data" / "example.jsonl")
HOURS, JOIN, CODE, RESERVE, CATALOG = ROWS

MISSING = playwright_missing() or (
    None if find_chromium() else "Chromium is not installed (make browser-tools)"
)
needs_browser = pytest.mark.skipif(MISSING is not None, reason=f"no browser: {MISSING}")


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp(INSTANCE)


@pytest.fixture(scope="module")
def server(workdir: Path) -> Iterator[StartedServer]:
    if MISSING is not None:
        pytest.skip(f"no browser: {MISSING}")
    with run_resources_server(INSTANCE, workdir, domain="agent") as started:
        yield started


@pytest.fixture(scope="module")
def tight_server(workdir: Path) -> Iterator[StartedServer]:
    """Short action deadline and room for two contexts only."""
    if MISSING is not None:
        pytest.skip(f"no browser: {MISSING}")
    with run_resources_server(
        INSTANCE, workdir, domain="agent", action_timeout_s=2, max_contexts=2
    ) as started:
        yield started


class Rollout:
    """One rollout's view of a server: sends the session cookie it was last given, keeps the new one."""

    def __init__(self, server: StartedServer) -> None:
        self.url = server.url
        self.cookie: str | None = None

    async def post(self, path: str, body: Any = None) -> tuple[int, Any]:
        cookies = {COOKIE_NAME: self.cookie} if self.cookie else None
        response = await request("POST", self.url + path, json=body, cookies=cookies)
        self.cookie = response.cookies[COOKIE_NAME].value
        return response.status, await get_response_json(response)

    async def seed(self, row: dict) -> None:
        assert await self.post("/seed_session", row) == (200, {})

    async def tool(self, name: str, **arguments: Any) -> dict:
        status, body = await self.post(f"/browser_{name}", arguments)
        assert status == 200, body
        return body

    async def act(self, name: str, **arguments: Any) -> str:
        """A tool call that must succeed; answers the observation it returns."""
        body = await self.tool(name, **arguments)
        assert body["error"] is None, body
        return body["observation"]

    async def verify(self, row: dict) -> dict:
        status, body = await self.post("/verify", {**row, "response": response_with()})
        assert status == 200, body
        return body


def element_id(observation: str, name: str) -> int:
    """The id the observation gives the element called `name`."""
    for line in observation.splitlines():
        if line.startswith("[") and line.split(": ", 1)[-1].split(" (value")[0] == name:
            return int(line[1 : line.index("]")])
    raise AssertionError(f"no element {name!r} in:\n{observation}")


def test_shipped_config_wires_the_environment_to_its_agent():
    config, _, agent = check_environment_config(FOLDER, INSTANCE, "agent")
    inner = config[INSTANCE]["resources_servers"][INSTANCE]
    assert inner["action_timeout_s"] > 0 and inner["max_contexts"] >= 1 and inner["chromium_path"] is None
    assert agent["max_steps"] >= 5


def test_a_missing_chromium_refuses_to_start_with_one_clear_line(workdir):
    with pytest.raises(RuntimeError) as failure:
        with run_resources_server(INSTANCE, workdir, domain="agent", chromium_path="/nonexistent/chromium"):
            pass
    lines = [line for line in str(failure.value).splitlines() if "interactive_browser needs" in line]
    assert len(lines) == 1, str(failure.value)
    assert ("/nonexistent/chromium" in lines[0]) or ("playwright" in lines[0])


@needs_browser
async def test_the_right_actions_earn_1(server):
    rollout = Rollout(server)
    await rollout.seed(JOIN)
    home = await rollout.act("observe")
    assert home.startswith("URL: site/index.html\nTitle: Harbor Street Library")
    join = await rollout.act("click", element_id=element_id(home, "Join"))
    assert "URL: site/join.html" in join
    typed = await rollout.act("type", element_id=element_id(join, "Full name"), text="Ada Byron")
    assert "(value: 'Ada Byron')" in typed
    joined = await rollout.act("click", element_id=element_id(typed, "Sign me up"))
    assert "Welcome aboard, Ada Byron!" in joined
    assert (await rollout.tool("finish", answer=""))["done"] is True
    answer = await rollout.verify(JOIN)
    assert (answer["reward"], answer["mask_sample"], answer["final_url"]) == (1.0, False, "site/join.html")


@needs_browser
async def test_a_reported_answer_is_compared_exactly(server):
    for reported, reward in (("TEAL-7", 1.0), ("TEAL-1", 0.0)):
        rollout = Rollout(server)
        await rollout.seed(CODE)
        hours = await rollout.act("navigate", url="site/hours.html")
        assert "Reading room door code: TEAL-7" in hours
        await rollout.tool("finish", answer=reported)
        assert (await rollout.verify(CODE))["reward"] == reward


@needs_browser
async def test_the_wrong_actions_earn_0(server):
    rollout = Rollout(server)
    await rollout.seed(RESERVE)
    catalog = await rollout.act("click", element_id=element_id(await rollout.act("observe"), "Catalog"))
    reserved = await rollout.act("click", element_id=element_id(catalog, "Reserve Lighthouse Keeping"))
    assert "Reserved: Lighthouse Keeping" in reserved
    answer = await rollout.verify(RESERVE)
    assert (answer["reward"], answer["mask_sample"]) == (0.0, False)

    rollout = Rollout(server)
    await rollout.seed(CATALOG)  # final_url is site/catalog.html; the rollout stays on the home page
    answer = await rollout.verify(CATALOG)
    assert (answer["reward"], answer["final_url"]) == (0.0, "site/index.html")


@needs_browser
async def test_a_final_url_given_in_the_folder_matches_the_page_reached(server):
    rollout = Rollout(server)
    await rollout.seed(CATALOG)
    await rollout.act("navigate", url="site/catalog.html")
    assert (await rollout.verify(CATALOG))["reward"] == 1.0


@needs_browser
@pytest.mark.parametrize(
    ("url", "reason"),
    [
        ("https://www.example.com/", "is not a local page"),
        ("http://10.1.2.3:8080/admin", "is not a local page"),
        ("file:///etc/passwd", "outside this environment's site folder"),
        ("data:text/html,Welcome aboard, Ada Byron!", "unsupported scheme 'data'"),
        ("javascript:alert(1)", "unsupported scheme 'javascript'"),
    ],
)
async def test_navigation_off_the_local_pages_is_refused_with_a_clear_error(server, url, reason):
    rollout = Rollout(server)
    await rollout.seed(JOIN)
    body = await rollout.tool("navigate", url=url)
    assert body["error"].startswith("navigation refused: ") and reason in body["error"], body
    assert "URL: site/index.html" in await rollout.act("observe"), "the page did not move"
    await rollout.verify(JOIN)


@needs_browser
async def test_a_page_request_to_a_host_not_allowed_is_aborted(server):
    """127.0.0.2 is on this machine but not an allowed host. The route guard and the host-resolver rule
    each block it alone (checked by disabling one, then both: only both gone lets the request through)."""
    with serve_html("outside", host="127.0.0.2") as (outside_url, outside_hits):
        script = (
            "const probe = (url, id) => fetch(url, {mode: 'no-cors'}).then(() => 'reached', () => 'blocked')"
            ".then((what) => document.getElementById(id).textContent = id + ' ' + what);"
            f"probe('{outside_url}', 'outside'); probe('/', 'own');"
        )
        page = f"<title>probe</title><p id=outside>waiting</p><p id=own>waiting</p><script>{script}</script>"
        with serve_html(page) as (url, _):
            rollout = Rollout(server)
            await rollout.seed(JOIN)
            await rollout.act("navigate", url=url)
            for _ in range(200):  # the fetches settle asynchronously; each observe is one round trip
                seen = await rollout.act("observe")
                if "waiting" not in seen:
                    break
            assert "outside blocked" in seen and "own reached" in seen, seen
            assert outside_hits == []
            await rollout.verify(JOIN)


@needs_browser
async def test_sessions_are_isolated(server):
    first, second = Rollout(server), Rollout(server)
    await asyncio.gather(first.seed(JOIN), second.seed(RESERVE))
    join = await first.act("click", element_id=3)
    await first.act("type", element_id=element_id(join, "Full name"), text="Ada Byron")
    catalog = await second.act("click", element_id=2)
    assert "URL: site/catalog.html" in catalog
    assert "URL: site/join.html" in (seen := await first.act("observe")) and "(value: 'Ada Byron')" in seen
    second_join = await second.act("navigate", url="site/join.html")
    assert "(value: '')" in second_join, "the other session's typing did not leak"
    await first.act("click", element_id=element_id(seen, "Sign me up"))
    first_answer, second_answer = await asyncio.gather(first.verify(JOIN), second.verify(JOIN))
    assert (first_answer["reward"], second_answer["reward"]) == (1.0, 0.0)


@needs_browser
@pytest.mark.parametrize(
    ("tool", "arguments", "field"),
    [
        ("click", {}, "element_id"),
        ("click", {"element_id": "third"}, "element_id"),
        ("type", {"element_id": 5}, "text"),
        ("navigate", {"url": 7}, "url"),
    ],
)
async def test_a_malformed_action_is_a_422_naming_the_field(server, tool, arguments, field):
    rollout = Rollout(server)
    await rollout.seed(JOIN)
    status, body = await rollout.post(f"/browser_{tool}", arguments)
    assert status == 422
    assert ["body", field] in [error["loc"] for error in body["detail"]]
    await rollout.verify(JOIN)


@needs_browser
async def test_an_unknown_element_or_unseeded_session_is_a_tool_error(server):
    rollout = Rollout(server)
    await rollout.seed(JOIN)
    body = await rollout.tool("click", element_id=99)
    assert "no element 99 on the page" in body["error"]
    body = await rollout.tool("type", element_id=1, text="x")  # a link is not an input
    assert body["error"].startswith("type failed")
    await rollout.verify(JOIN)
    body = await Rollout(server).tool("observe")
    assert "no open browser session" in body["error"]


@needs_browser
async def test_verify_without_a_session_is_masked_not_scored(server):
    rollout = Rollout(server)
    await rollout.seed(HOURS)
    assert (await rollout.verify(HOURS))["mask_sample"] is False
    again = await rollout.verify(HOURS)  # verify closed the context
    assert (again["reward"], again["mask_sample"], again["failure_kind"]) == (0.0, True, "session_lost")


@needs_browser
async def test_a_row_without_a_known_scoring_key_is_refused_at_seed(server):
    status, body = await Rollout(server).post(
        "/seed_session", {**HOURS, "verifier_metadata": {"url_has": "x"}}
    )
    assert status == 422 and "url_contains" in str(body)


@needs_browser
async def test_a_hanging_page_is_cut_off_by_the_action_deadline(tight_server):
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(8)  # accepts connections, never answers
    try:
        rollout = Rollout(tight_server)
        await rollout.seed(JOIN)
        body = await rollout.tool("navigate", url=f"http://127.0.0.1:{silent.getsockname()[1]}/")
        assert "2s action deadline" in body["error"], body
        await rollout.verify(JOIN)
    finally:
        silent.close()


@needs_browser
async def test_a_page_script_that_never_yields_is_cut_off(tight_server):
    page = '<title>busy</title><button onclick="while (true) {}">Freeze</button>'
    with serve_html(page) as (url, _):
        rollout = Rollout(tight_server)
        await rollout.seed(JOIN)
        await rollout.act("navigate", url=url)
        body = await rollout.tool("click", element_id=1)
        assert "action deadline" in body["error"], body
        answer = await rollout.verify(JOIN)  # the frozen page cannot be read: masked, not scored 0
        assert (answer["mask_sample"], answer["failure_kind"]) == (True, "verifier_error")


@needs_browser
async def test_a_seed_past_the_cap_closes_the_least_recently_used_session(tight_server):
    first, second, third = Rollout(tight_server), Rollout(tight_server), Rollout(tight_server)
    await first.seed(JOIN)
    await second.seed(JOIN)
    assert not (await first.tool("observe"))["error"]  # `second` is now the least recently used
    await third.seed(JOIN)
    assert "no open browser session" in (await second.tool("observe"))["error"]
    assert not (await first.tool("observe"))["error"]
    await first.verify(JOIN)
    await third.verify(JOIN)


@needs_browser
async def test_a_closed_session_frees_its_slot(tight_server):
    first, second = Rollout(tight_server), Rollout(tight_server)
    await first.seed(JOIN)
    close = {"resources_session_id": session_id_in_cookie(first.cookie), "episode_id": {"rollout_id": "r1"}}
    status, _ = await first.post("/close_session", close)
    assert status == 200
    assert "no open browser session" in (await first.tool("observe"))["error"]
    await second.seed(JOIN)
    await second.verify(JOIN)


@needs_browser
async def test_an_idle_session_is_closed(workdir):
    """The reaper closes a session nothing touched for `idle_timeout_s` (its log line is the signal)."""
    with run_resources_server(INSTANCE, workdir, domain="agent", idle_timeout_s=0.2) as started:
        idle = Rollout(started)
        await idle.seed(JOIN)
        for _ in range(1200):
            if "idle for over" in started.log():
                break
            await asyncio.sleep(0.05)
        assert "idle for over" in started.log()
        assert "no open browser session" in (await idle.tool("observe"))["error"]


class serve_html:
    """A one-page http server on a loopback address for the duration of a `with`: (url, paths requested)."""

    def __init__(self, html: str, host: str = "127.0.0.1") -> None:
        self.hits: list[str] = []
        body, hits = html.encode(), self.hits

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                hits.append(self.path)
                self.send_response(200)
                self.send_header("Content-Type", "text/html")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                pass

        self.httpd = http.server.ThreadingHTTPServer((host, 0), Handler)
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def __enter__(self) -> tuple[str, list[str]]:
        self.thread.start()
        host, port = self.httpd.server_address[:2]
        return f"http://{host}:{port}/", self.hits

    def __exit__(self, *exc: Any) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
