"""example_session_state_mgmt over HTTP: real server processes, the session cookie threaded by hand (the Gym
client keeps no cookie jar), as an agent does during a rollout."""

import asyncio
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from nemo_gym.http.client import get_response_json, request
from nemo_gym.testing import (
    VERIFY_FLAGS,
    StartedServer,
    check_environment_config,
    instance_config,
    read_jsonl,
    run_instance,
    run_resources_server,
    session_id_in_cookie,
)

FOLDER = Path(__file__).resolve().parents[1]
IMPLEMENTATION = "example_session_state_mgmt"
INSTANCE = "example_session_state_mgmt_resources_server"
SMALL_INSTANCE = "small_session_store"
SMALL_MAX_SESSIONS = 2
ROWS = read_jsonl(FOLDER / "data" / "example.jsonl")
ROLLOUTS = read_jsonl(FOLDER / "data" / "example_rollouts.jsonl")
A_RESPONSE = ROLLOUTS[0]["response"]


def cookie_name(instance: str) -> str:
    return f"SessionStateResourcesServer___{instance}"


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp(IMPLEMENTATION)


@pytest.fixture(scope="module")
def server(workdir: Path) -> Iterator[StartedServer]:
    with run_resources_server(INSTANCE, workdir, implementation=IMPLEMENTATION, domain="agent") as started:
        yield started


@pytest.fixture(scope="module")
def small_server(workdir: Path) -> Iterator[StartedServer]:
    """An instance whose store holds only two sessions, to watch the LRU eviction."""
    inner = {"domain": "agent", "max_sessions": SMALL_MAX_SESSIONS}
    with run_resources_server(SMALL_INSTANCE, workdir, implementation=IMPLEMENTATION, **inner) as started:
        yield started


class Session:
    """One rollout's view of a server: sends the session cookie it was last given, keeps the new one."""

    def __init__(self, server: StartedServer, instance: str = INSTANCE) -> None:
        self.url = server.url
        self.cookie_name = cookie_name(instance)
        self.cookie: str | None = None

    async def post(self, path: str, body: Any = None) -> tuple[int, Any]:
        cookies = {self.cookie_name: self.cookie} if self.cookie else None
        response = await request("POST", self.url + path, json=body, cookies=cookies)
        self.cookie = response.cookies[self.cookie_name].value
        return response.status, await get_response_json(response)

    async def seed(self, initial_count: int) -> None:
        assert await self.post("/seed_session", {**ROWS[0], "initial_count": initial_count}) == (200, {})

    async def increment(self, count: int) -> None:
        assert await self.post("/increment_counter", {"count": count}) == (200, {"success": True})

    async def count(self) -> int:
        status, body = await self.post("/get_counter_value")
        assert status == 200
        return body["count"]

    async def verify(self, expected_count: int) -> float:
        status, body = await self.post(
            "/verify", {**ROWS[0], "expected_count": expected_count, "response": A_RESPONSE}
        )
        assert status == 200, body
        return body["reward"]


def error_locations(body: dict) -> list[list]:
    return [error["loc"] for error in body["detail"]]


async def test_seeded_increments_are_read_back_and_verified_with_reward_1(server):
    session = Session(server)
    await session.seed(3)
    await session.increment(1)
    await session.increment(2)
    assert await session.count() == 6
    assert await session.verify(6) == 1.0


async def test_verify_answers_params_response_and_reward_without_expected_count(server):
    session = Session(server)
    await session.seed(0)
    status, body = await session.post("/verify", {**ROWS[0], "expected_count": 0, "response": A_RESPONSE})
    assert status == 200
    assert set(body) == {*VERIFY_FLAGS, "responses_create_params", "response", "reward"}
    assert body["reward"] == 1.0 and body["response"]["id"] == A_RESPONSE["id"]


async def test_a_wrong_expected_count_earns_0(server):
    session = Session(server)
    await session.seed(3)
    await session.increment(1)
    assert await session.verify(6) == 0.0


async def test_verify_without_the_cookie_is_an_unknown_session_and_earns_0(server):
    seeded = Session(server)
    await seeded.seed(5)
    stranger = Session(server)
    assert await stranger.verify(5) == 0.0
    assert await seeded.verify(5) == 1.0, "the stranger's verify must not touch the seeded session"


async def test_an_unseeded_session_counts_from_0_and_a_read_creates_no_state(server):
    reader = Session(server)
    assert await reader.count() == 0
    assert await reader.verify(0) == 0.0
    incrementer = Session(server)
    await incrementer.increment(4)
    assert await incrementer.count() == 4
    assert await incrementer.verify(4) == 1.0


async def test_a_second_seed_keeps_the_existing_counter(server):
    session = Session(server)
    await session.seed(3)
    await session.increment(2)
    await session.seed(100)
    assert await session.count() == 5


async def test_concurrent_sessions_stay_independent(server):
    async def rollout(initial_count: int, increments: list[int]) -> tuple[int, float]:
        session = Session(server)
        await session.seed(initial_count)
        for count in increments:
            await session.increment(count)
        final = await session.count()
        return final, await session.verify(initial_count + sum(increments))

    results = await asyncio.gather(rollout(0, [1, 1, 1]), rollout(10, [5, -2]), rollout(7, []))
    assert results == [(3, 1.0), (13, 1.0), (7, 1.0)]


async def test_verify_drops_the_session_state(server):
    session = Session(server)
    await session.seed(8)
    assert await session.verify(8) == 1.0
    assert await session.verify(8) == 0.0, "a verified session is unknown afterwards"
    assert await session.count() == 0
    await session.seed(1)
    assert await session.count() == 1, "a new seed on the same cookie starts afresh"


async def test_the_store_evicts_the_least_recently_used_session_past_its_cap(small_server):
    oldest, touched, newest = (Session(small_server, SMALL_INSTANCE) for _ in range(3))
    await oldest.seed(1)
    await touched.seed(2)
    await oldest.increment(10)  # now `touched` is the least recently used
    await newest.seed(3)
    assert await touched.verify(2) == 0.0
    assert (await oldest.verify(11), await newest.verify(3)) == (1.0, 1.0)
    assert f"max_sessions={SMALL_MAX_SESSIONS}" in small_server.log(), "the first eviction is logged"


async def test_the_cap_bounds_the_store_under_many_abandoned_sessions(small_server):
    for initial_count in range(SMALL_MAX_SESSIONS * 5):
        await Session(small_server, SMALL_INSTANCE).seed(initial_count)
    survivor = Session(small_server, SMALL_INSTANCE)
    await survivor.seed(42)
    assert await survivor.verify(42) == 1.0


def test_a_cap_below_1_is_refused_at_startup(workdir):
    config = {"bad_cap": instance_config("resources_servers", IMPLEMENTATION, domain="agent", max_sessions=0)}
    with pytest.raises(RuntimeError, match="max_sessions"):
        with run_instance(config, "bad_cap", workdir):
            pass


@pytest.mark.parametrize(
    ("path", "body", "field"),
    [
        ("/increment_counter", {}, "count"),
        ("/increment_counter", {"count": "lots"}, "count"),
        ("/seed_session", {"responses_create_params": {"input": "hi"}}, "initial_count"),
        (
            "/verify",
            {"responses_create_params": ROWS[0]["responses_create_params"], "response": A_RESPONSE},
            "expected_count",
        ),
        ("/verify", ROWS[0], "response"),
    ],
)
async def test_a_bad_body_is_a_422_naming_the_field(server, path, body, field):
    status, answer = await Session(server).post(path, body)
    assert status == 422
    assert ["body", field] in error_locations(answer)


@pytest.mark.parametrize("row", ROWS, ids=lambda row: f"initial_{row['initial_count']}")
def test_each_example_row_asks_for_the_count_it_expects(row):
    prompt = row["responses_create_params"]["input"][-1]["content"]
    additions = [int(number) for number in re.findall(r"add (-?\d+)", prompt)]
    assert additions and row["initial_count"] + sum(additions) == row["expected_count"]


@pytest.mark.parametrize("rollout", ROLLOUTS, ids=lambda rollout: rollout["response"]["id"][-8:])
async def test_recorded_rollouts_replay_to_their_tool_outputs_and_reward(server, rollout):
    """Each example row seeds and verifies against the server's models and its rollout reproduces."""
    prompt = rollout["responses_create_params"]["input"][-1]["content"]
    row = next(row for row in ROWS if row["responses_create_params"]["input"][-1]["content"] == prompt)
    session = Session(server)
    assert await session.post("/seed_session", row) == (200, {})
    output = rollout["response"]["output"]
    recorded = {item["call_id"]: item["output"] for item in output if item["type"] == "function_call_output"}
    for call in (item for item in output if item["type"] == "function_call"):
        status, body = await session.post(f"/{call['name']}", orjson.loads(call["arguments"]))
        assert status == 200 and body == orjson.loads(recorded[call["call_id"]])
    status, body = await session.post("/verify", {**row, "response": rollout["response"]})
    assert status == 200 and body["reward"] == rollout["reward"]


def test_config_declares_the_environment_its_agent_and_a_session_cap():
    _, resources, _ = check_environment_config(FOLDER, INSTANCE, "agent")
    assert resources.model_extra["max_sessions"] >= 1000


async def test_close_session_releases_the_counter_and_answers_alike_when_repeated(server):
    session = Session(server)
    await session.seed(3)
    await session.increment(2)
    assert session.cookie is not None
    close = {"resources_session_id": session_id_in_cookie(session.cookie), "episode_id": {"rollout_id": "r1"}}
    for _ in range(2):
        assert await session.post("/close_session", close) == (
            200,
            {"resources_session_id": close["resources_session_id"]},
        )
    assert await session.count() == 0
    status, body = await session.post("/close_session", {**close, "extra": 1})
    assert status == 422 and ["body", "extra"] in error_locations(body)
