"""The gymnasium base over HTTP: one real server (tests/fixtures/gymnasium_env.py) whose episodes follow
the plan written in the row; the episode store's idle limit is checked in-process with a fake clock."""

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from nemo_gym.envkit.gymnasium_server import (
    EnvSession,
    EpisodeStore,
    extract_text,
    model_turns,
    replay_episode,
)
from nemo_gym.http.errors import GymError
from nemo_gym.openai_utils import NeMoGymResponse
from nemo_gym.testing import function_call_item, message_item, post_json, response_with, session_id_in_cookie
from tests.helpers import StartedServer, instance_config, run_server

FIXTURE = Path(__file__).resolve().parents[2] / "fixtures" / "gymnasium_env.py"
MAX_EPISODES = 2
PROMPT = {"input": [{"role": "user", "content": "play"}]}
REASONING = {"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": "hmm"}]}


def start_env(workdir: Path, **inner: Any):
    config_file = workdir / f"env-{len(list(workdir.iterdir()))}.yaml"
    config_file.write_bytes(orjson.dumps({"env": instance_config("resources_servers", "planned", **inner)}))
    env = {"NEMO_GYM_CONFIG_FILE": str(config_file), "NEMO_GYM_CONFIG_PATH": "env"}
    return run_server([str(FIXTURE)], workdir, env)


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("gymnasium_base")


@pytest.fixture(scope="module")
def env(workdir: Path) -> Iterator[StartedServer]:
    with start_env(workdir, domain="other", max_episodes=MAX_EPISODES) as server:
        yield server


class Session(EnvSession):
    def __init__(self, server: StartedServer) -> None:
        super().__init__(server.url)

    async def step_with(self, row: dict, *items: dict) -> tuple[int, Any]:
        """(status, body) of a step whose reply holds `items`."""
        return await self.post("/step", {**row, "response": response_with(*items)})


def row(*plan: dict, **fields: Any) -> dict:
    return {"responses_create_params": PROMPT, "plan": list(plan), **fields}


async def test_an_episode_runs_its_plan_and_ends_on_terminated(env):
    task = row(
        {"observation": "next?", "reward": 0.5},
        {"observation": "done", "reward": 1.0, "terminated": True},
        reset_observation="start",
        level=3,
    )
    session = Session(env)
    assert (await session.reset(task)).model_dump() == {
        "observation": "start",
        "info": {"metadata_keys": ["level", "plan", "reset_observation"]},
    }
    status, first = await session.step_with(task, message_item("hello"))
    assert status == 200, first
    assert first["observation"] == "next?" and first["reward"] == 0.5
    assert (first["terminated"], first["truncated"]) == (False, False)
    assert first["info"]["heard"] == "hello" and first["info"]["step"] == 0
    assert first["info"]["metadata_keys"] == ["level", "plan", "reset_observation"], "row extras only"
    status, last = await session.step_with(task, message_item("bye"))
    assert (status, last["terminated"], last["reward"], last["info"]["step"]) == (200, True, 1.0, 1)
    status, after = await session.step_with(task, message_item("more"))
    assert status == 409 and after["error"]["type"] == "no_active_episode"
    assert "POST /reset first" in after["error"]["message"]


async def test_a_truncated_step_ends_the_episode_too(env):
    task = row({"observation": "out of time", "truncated": True})
    session = Session(env)
    await session.reset(task)
    status, answer = await session.step_with(task, message_item("x"))
    assert (status, answer["truncated"], answer["terminated"]) == (200, True, False)
    assert (await session.step_with(task, message_item("x")))[0] == 409


async def test_a_step_without_reset_or_without_the_cookie_is_a_409(env):
    status, answer = await Session(env).step_with(row(), message_item("x"))
    assert status == 409 and answer["error"]["type"] == "no_active_episode"
    session = Session(env)
    await session.reset(row())
    status, _ = await post_json(env.url + "/step", {**row(), "response": response_with(message_item("x"))})
    assert status == 409, "a client that drops the cookie is a new session"


async def test_reset_starts_the_episode_over(env):
    task = row({"observation": "a"}, {"observation": "b"})
    session = Session(env)
    await session.reset(task)
    assert (await session.step_with(task, message_item("x")))[1]["observation"] == "a"
    await session.reset(task)
    assert (await session.step_with(task, message_item("x")))[1]["observation"] == "a"


async def test_close_session_ends_the_episode_and_the_id_stays_closed(env):
    task = row({"observation": "a"}, {"observation": "b"})
    session = Session(env)
    await session.reset(task)
    [cookie] = session.cookies.values()
    session_id = session_id_in_cookie(cookie)
    closing = {"resources_session_id": session_id, "episode_id": {"rollout_id": "r-1"}}
    for _ in range(2):  # closing again answers the same
        assert await post_json(env.url + "/close_session", closing) == (
            200,
            {"resources_session_id": session_id},
        )
    status, answer = await session.step_with(task, message_item("x"))
    assert status == 409 and answer["error"]["type"] == "no_active_episode"
    status, answer = await session.post("/reset", task)
    assert status == 409 and answer["error"]["type"] == "session_closed"


async def test_sessions_keep_their_own_episodes(env):
    first, second = Session(env), Session(env)
    task_one, task_two = (
        row({"observation": "one-1"}, {"observation": "one-2"}),
        row({"observation": "two-1"}),
    )
    await first.reset(task_one)
    await second.reset(task_two)
    assert (await first.step_with(task_one, message_item("x")))[1]["observation"] == "one-1"
    assert (await second.step_with(task_two, message_item("x")))[1]["observation"] == "two-1"
    assert (await first.step_with(task_one, message_item("x")))[1]["observation"] == "one-2"


async def test_beyond_max_episodes_the_least_recently_used_is_dropped(env):
    sessions = [Session(env) for _ in range(MAX_EPISODES + 1)]
    for session in sessions:
        await session.reset(row())
    assert (await sessions[0].step_with(row(), message_item("x")))[0] == 409
    for session in sessions[1:]:
        assert (await session.step_with(row(), message_item("x")))[0] == 200


async def test_tool_calls_are_answered_in_info_tool_outputs(env):
    session = Session(env)
    await session.reset(row())
    status, answer = await session.step_with(
        row(), REASONING, function_call_item("look", {"at": "door"}, "c7")
    )
    assert status == 200
    assert answer["info"]["tool_outputs"] == [{"call_id": "c7", "output": 'look {"at":"door"}'}]
    assert answer["info"]["heard"] == ""


async def test_a_failed_reset_leaves_no_episode(env):
    session = Session(env)
    await session.reset(row())
    status, answer = await session.post("/reset", row(plan="not a list"))
    assert status == 422 and answer["error"]["type"] == "invalid_task"
    assert "plan" in answer["error"]["message"]
    assert (await session.step_with(row(), message_item("x")))[0] == 409
    with pytest.raises(GymError) as refused:
        await replay_episode(env.url, row(plan="not a list"), response_with(message_item("x")))
    assert refused.value.status == 422


@pytest.mark.parametrize(
    ("path", "body", "field"),
    [
        ("/reset", {"plan": []}, "responses_create_params"),
        ("/step", row(), "response"),
        ("/step", {**row(), "response": {"output": "nope"}}, "response"),
        ("/reset", {"responses_create_params": {"input": "x", "bogus": 1}}, "responses_create_params"),
    ],
)
async def test_bad_bodies_are_422s_naming_the_field(env, path, body, field):
    status, answer = await post_json(env.url + path, body)
    assert status == 422 and any(error["loc"][:2] == ["body", field] for error in answer["detail"]), answer


@pytest.mark.parametrize("path", ["/verify", "/seed_session"])
async def test_the_verify_protocol_routes_are_not_served(env, path):
    status, _ = await post_json(env.url + path, row())
    assert status == 404


async def test_aggregate_metrics_profile_the_episode_results(env):
    results = [
        {"reward": 1.0, "terminated": True, "truncated": False, "_ng_task_index": 0, "_ng_rollout_index": 0},
        {"reward": 0.0, "terminated": False, "truncated": True, "_ng_task_index": 0, "_ng_rollout_index": 1},
    ]
    status, body = await post_json(env.url + "/aggregate_metrics", {"verify_responses": results})
    assert status == 200, body
    assert body["key_metrics"]["mean/reward"] == 0.5 and body["key_metrics"]["mean/truncated"] == 0.5


def test_more_than_one_worker_is_refused_at_startup(workdir):
    with pytest.raises(RuntimeError, match="num_workers"):
        with start_env(workdir, domain="other", num_workers=2):
            pass


def test_an_idle_episode_expires_and_an_active_one_does_not():
    now = [0.0]
    store = EpisodeStore(max_episodes=10, ttl_s=60, clock=lambda: now[0])
    store.start("idle")["n"] = 1
    store.start("busy")["n"] = 2
    for _ in range(3):
        now[0] += 40
        assert store.get("busy") == {"n": 2}, "each use restarts the idle clock"
    assert store.get("idle") is None and len(store) == 1


def test_extract_text_is_what_the_assistant_said():
    response = NeMoGymResponse.model_validate(
        response_with(REASONING, message_item("Hit "), function_call_item("f", {}), message_item("me"))
    )
    assert extract_text(response) == "Hit me"


def test_model_turns_split_a_rollout_at_what_the_agent_added():
    a, b, c = message_item("a"), function_call_item("f", {}), message_item("c")
    user = {"role": "user", "content": "obs", "type": "message"}
    output = [
        REASONING,
        a,
        user,
        b,
        {"type": "function_call_output", "call_id": "c1", "output": "o"},
        c,
        user,
    ]
    assert model_turns(output) == [[REASONING, a], [b], [c]]


async def test_replaying_a_recorded_rollout_steps_once_per_model_reply(env):
    task = row({"observation": "again"}, {"reward": 1.0, "terminated": True}, reset_observation="go")
    user = {"role": "user", "content": "again", "type": "message"}
    recorded = response_with(message_item("first"), user, message_item("second"))
    reset, steps = await replay_episode(env.url, task, recorded)
    assert reset.observation == "go"
    assert [(step.info["heard"], step.observation, step.reward) for step in steps] == [
        ("first", "again", 0.0),
        ("second", None, 1.0),
    ]
    assert steps[-1].terminated


def test_the_compatibility_package_exports_the_core_names():
    import nemo_gym.envkit.gymnasium_server as core
    import resources_servers.gymnasium as shim

    assert all(getattr(shim, name) is getattr(core, name) for name in shim.__all__)
