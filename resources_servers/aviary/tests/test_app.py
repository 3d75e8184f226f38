"""aviary over HTTP: a real server process, episodes driven through the tool routes with the session cookie
threaded by hand, as simple_agent does during a rollout."""

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from nemo_gym.http.client import get_response_json, request
from nemo_gym.testing import StartedServer, read_jsonl, run_resources_server

FOLDER = Path(__file__).resolve().parents[1]
INSTANCE = "aviary"
COOKIE = f"AviaryResourcesServer___{INSTANCE}"
ROWS = read_jsonl(FOLDER / "data" / "example.jsonl")
ROLLOUTS = read_jsonl(FOLDER / "data" / "example_rollouts.jsonl")


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp(INSTANCE)


@pytest.fixture(scope="module")
def server(workdir: Path) -> Iterator[StartedServer]:
    with run_resources_server(INSTANCE, workdir, domain="math") as started:
        yield started


class Episode:
    """One rollout's session: keeps the cookie the server sets and sends it back."""

    def __init__(self, server: StartedServer) -> None:
        self.url = server.url
        self.cookie: str | None = None

    async def post(self, path: str, body: Any = None) -> tuple[int, Any]:
        cookies = {COOKIE: self.cookie} if self.cookie else None
        response = await request("POST", self.url + path, json=body, cookies=cookies)
        if COOKIE in response.cookies:
            self.cookie = response.cookies[COOKIE].value
        return response.status, await get_response_json(response)

    async def verify(self, row: dict) -> dict:
        status, body = await self.post("/verify", {**row, "response": ROLLOUTS[0]["response"]})
        assert status == 200, body
        return body


async def test_right_episode_earns_the_environment_reward(server: StartedServer) -> None:
    async def scenario() -> dict:
        episode = Episode(server)
        assert (await episode.post("/seed_session", ROWS[0]))[0] == 200
        assert await episode.post("/calculator", {"expr": "14*12-97"}) == (
            200,
            {"output": "71", "reward": 0.0, "done": False},
        )
        assert await episode.post("/submit_answer", {"answer": "71"}) == (
            200,
            {"output": "Correct.", "reward": 1.0, "done": True},
        )
        return await episode.verify(ROWS[0])

    graded = await scenario()
    assert (graded["reward"], graded["mask_sample"], graded["episode_done"], graded["steps"]) == (
        1.0,
        False,
        True,
        2,
    )


async def test_wrong_answer_earns_zero(server: StartedServer) -> None:
    async def scenario() -> dict:
        episode = Episode(server)
        await episode.post("/seed_session", ROWS[3])
        assert (await episode.post("/submit_answer", {"answer": "160"}))[1]["output"] == "Incorrect."
        return await episode.verify(ROWS[3])

    graded = await scenario()
    assert (graded["reward"], graded["mask_sample"], graded["episode_done"]) == (0.0, False, True)


async def test_malformed_calls_are_refused_with_the_reason(server: StartedServer) -> None:
    async def scenario() -> list[tuple[int, Any]]:
        episode = Episode(server)
        await episode.post("/seed_session", ROWS[1])
        answers = [
            await episode.post("/calculator", {"expression": "1+1"}),
            await episode.post("/calculator", {"expr": 7}),
            await episode.post("/calculator", [1, 2]),
            await episode.post("/no_such_tool", {}),
            await episode.post("/submit_answer", {"answer": "44"}),
            await episode.post("/submit_answer", {"answer": "44"}),
        ]
        graded = await episode.verify(ROWS[1])
        answers.append((graded["reward"], graded["steps"]))
        return answers

    missing, wrong_type, not_object, unknown, first, again, graded = await scenario()
    assert missing[0] == 422 and "missing required argument 'expr'" in missing[1]["detail"]
    assert "unknown argument 'expression'" in missing[1]["detail"]
    assert wrong_type[0] == 422 and "'expr' must be of type string" in wrong_type[1]["detail"]
    assert not_object[0] == 422 and "JSON object" in not_object[1]["detail"]
    assert unknown[0] == 404 and "calculator, submit_answer" in unknown[1]["detail"]
    assert first == (200, {"output": "Correct.", "reward": 1.0, "done": True})
    assert again[0] == 409 and "episode has ended" in again[1]["detail"]
    # Refused calls never reached the environment: one step, and the reward was paid once.
    assert graded == (1.0, 1)


async def test_sessions_are_isolated(server: StartedServer) -> None:
    async def scenario() -> tuple[dict, dict, tuple[int, Any]]:
        right, wrong, stranger = Episode(server), Episode(server), Episode(server)
        await right.post("/seed_session", ROWS[4])
        await wrong.post("/seed_session", ROWS[4])
        await asyncio.gather(
            right.post("/submit_answer", {"answer": "44"}), wrong.post("/submit_answer", {"answer": "45"})
        )
        unseeded = await stranger.post("/submit_answer", {"answer": "44"})
        return await right.verify(ROWS[4]), await wrong.verify(ROWS[4]), unseeded

    right, wrong, unseeded = await scenario()
    assert (right["reward"], wrong["reward"]) == (1.0, 0.0)
    assert unseeded[0] == 404 and "seed_session" in unseeded[1]["detail"]


async def test_lost_session_is_marked_not_zeroed(server: StartedServer) -> None:
    graded = await Episode(server).verify(ROWS[0])
    assert graded["mask_sample"] is True and graded["failure_kind"] == "session_lost"


def test_recorded_rollouts_mix_rewards() -> None:
    assert [r["reward"] for r in ROLLOUTS] == [1.0, 1.0, 1.0, 0.0, 1.0]


def test_unknown_env_class_is_a_one_line_error(workdir: Path) -> None:
    with pytest.raises(RuntimeError) as failed:
        with run_resources_server(INSTANCE, workdir, domain="math", env_class="no_such_pkg.NoEnv"):
            pass
    lines = [line for line in str(failed.value).splitlines() if "no_such_pkg.NoEnv" in line]
    assert lines, str(failed.value)
    assert "cannot be imported" in lines[0]
    assert "Traceback" not in str(failed.value)


async def test_a_step_past_its_deadline_is_refused_and_the_grade_marked(workdir: Path) -> None:
    inner = {"domain": "math", "env_class": "resources_servers.aviary.tests.hanging_env.HangingCalculatorEnv"}
    with run_resources_server(INSTANCE, workdir, step_timeout_s=0.2, **inner) as hanging:
        episode = Episode(hanging)
        await episode.post("/seed_session", ROWS[0])
        status, body = await episode.post("/submit_answer", {"answer": "71"})
        graded = await episode.verify(ROWS[0])
    assert status == 504 and "exceeded" in body["detail"]
    assert graded["mask_sample"] is True and graded["failure_kind"] == "verifier_error"
