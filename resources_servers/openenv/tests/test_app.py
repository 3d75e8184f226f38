"""openenv over HTTP: a real server process, episodes driven through the `step` tool with the session cookie
threaded by hand, as simple_agent does during a rollout."""

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from nemo_gym.http.client import get_response_json, request
from nemo_gym.testing import StartedServer, read_jsonl, run_resources_server

FOLDER = Path(__file__).resolve().parents[1]
INSTANCE = "openenv"
COOKIE = f"OpenEnvResourcesServer___{INSTANCE}"
ROWS = read_jsonl(FOLDER / "data" / "example.jsonl")
ROLLOUTS = read_jsonl(FOLDER / "data" / "example_rollouts.jsonl")


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp(INSTANCE)


@pytest.fixture(scope="module")
def server(workdir: Path) -> Iterator[StartedServer]:
    with run_resources_server(INSTANCE, workdir, domain="agent") as started:
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
    episode = Episode(server)
    assert (await episode.post("/seed_session", ROWS[0]))[0] == 200  # secret 37 in 1..100
    status, low = await episode.post("/step", {"guess": 50})
    assert status == 200
    assert (low["message"], low["reward"], low["done"], low["guesses_left"]) == (
        "50 is too high: guess lower.",
        0.0,
        False,
        6,
    )
    status, right = await episode.post("/step", {"guess": 37})
    assert (status, right["reward"], right["done"]) == (200, 1.0, True)
    graded = await episode.verify(ROWS[0])
    assert (graded["reward"], graded["mask_sample"], graded["episode_done"], graded["steps"]) == (
        1.0,
        False,
        True,
        2,
    )


async def test_wrong_episode_earns_zero(server: StartedServer) -> None:
    episode = Episode(server)
    await episode.post("/seed_session", ROWS[3])  # secret 3 in 1..10, two guesses
    await episode.post("/step", {"guess": 5})
    status, last = await episode.post("/step", {"guess": 2})
    assert (status, last["done"]) == (200, True) and "the number was 3" in last["message"]
    graded = await episode.verify(ROWS[3])
    assert (graded["reward"], graded["mask_sample"], graded["episode_done"], graded["steps"]) == (
        0.0,
        False,
        True,
        2,
    )


async def test_malformed_actions_are_refused_with_the_field(server: StartedServer) -> None:
    episode = Episode(server)
    await episode.post("/seed_session", ROWS[1])  # secret 13 in 1..20
    missing = await episode.post("/step", {})
    wrong_type = await episode.post("/step", {"guess": "thirteen"})
    unknown = await episode.post("/step", {"guess": 13, "colour": "red"})
    not_object = await episode.post("/step", [13])
    first = await episode.post("/step", {"guess": 13})
    again = await episode.post("/step", {"guess": 13})
    graded = await episode.verify(ROWS[1])
    assert missing[0] == 422 and "field 'guess'" in missing[1]["detail"]
    assert wrong_type[0] == 422 and "field 'guess'" in wrong_type[1]["detail"]
    assert unknown[0] == 422 and "unknown action field 'colour'" in unknown[1]["detail"]
    assert not_object[0] == 422 and "JSON object" in not_object[1]["detail"]
    assert (first[0], first[1]["reward"]) == (200, 1.0)
    assert again[0] == 409 and "episode has ended" in again[1]["detail"]
    # Refused actions never reached the environment: one step, paid once.
    assert (graded["reward"], graded["steps"]) == (1.0, 1)


async def test_row_reset_kwargs_the_environment_refuses_are_a_422(server: StartedServer) -> None:
    status, body = await Episode(server).post("/seed_session", {**ROWS[0], "reset_kwargs": {"target": 500}})
    assert status == 422 and "reset_kwargs" in body["detail"]


async def test_sessions_are_isolated(server: StartedServer) -> None:
    right, wrong, stranger = Episode(server), Episode(server), Episode(server)
    await asyncio.gather(right.post("/seed_session", ROWS[4]), wrong.post("/seed_session", ROWS[4]))
    await asyncio.gather(right.post("/step", {"guess": 71}), wrong.post("/step", {"guess": 70}))
    unseeded = await stranger.post("/step", {"guess": 71})
    graded_right, graded_wrong = await right.verify(ROWS[4]), await wrong.verify(ROWS[4])
    assert (graded_right["reward"], graded_right["episode_done"]) == (1.0, True)
    assert (graded_wrong["reward"], graded_wrong["episode_done"], graded_wrong["steps"]) == (0.0, False, 1)
    assert unseeded[0] == 404 and "seed_session" in unseeded[1]["detail"]


async def test_verify_ends_the_session(server: StartedServer) -> None:
    episode = Episode(server)
    await episode.post("/seed_session", ROWS[2])
    await episode.verify(ROWS[2])
    status, body = await episode.post("/step", {"guess": 8})
    assert status == 404 and "seed_session" in body["detail"]


async def test_lost_session_is_marked_not_zeroed(server: StartedServer) -> None:
    graded = await Episode(server).verify(ROWS[0])
    assert graded["mask_sample"] is True and graded["failure_kind"] == "session_lost"


def test_recorded_rollouts_mix_rewards() -> None:
    assert [r["reward"] for r in ROLLOUTS] == [1.0, 1.0, 1.0, 0.0, 1.0]


@pytest.mark.parametrize(
    ("overrides", "expected"),
    [
        ({"env_class": "no_such_pkg.NoEnv"}, "env_class 'no_such_pkg.NoEnv' cannot be imported"),
        ({"action_class": "no_such_pkg.NoAction"}, "action_class 'no_such_pkg.NoAction' cannot be imported"),
        ({"is_mcp": True}, "is_mcp: MCP environments need openenv-core >= 0.2"),
    ],
)
def test_bad_config_is_a_one_line_start_up_error(workdir: Path, overrides: dict, expected: str) -> None:
    with pytest.raises(RuntimeError) as failed:
        with run_resources_server(INSTANCE, workdir, domain="agent", **overrides):
            pass
    assert any(expected in line for line in str(failed.value).splitlines()), str(failed.value)
    assert "Traceback" not in str(failed.value)


async def test_a_step_past_its_deadline_is_refused_and_the_grade_marked(workdir: Path) -> None:
    env_class = "resources_servers.openenv.tests.hanging_env.HangingGuessEnvironment"
    with run_resources_server(
        INSTANCE, workdir, domain="agent", env_class=env_class, step_timeout_s=0.2
    ) as hanging:
        episode = Episode(hanging)
        await episode.post("/seed_session", ROWS[0])
        status, body = await episode.post("/step", {"guess": 37})
        again = await episode.post("/step", {"guess": 37})
        graded = await episode.verify(ROWS[0])
    assert status == 504 and "exceeded step_timeout_s" in body["detail"]
    assert again[0] == 409
    assert graded["mask_sample"] is True and graded["failure_kind"] == "verifier_error"
    assert "step() exceeded" in graded["failure_reason"]
