"""example_multi_turn_gymnasium over HTTP: one real server process, driven through /reset and /step as the
gymnasium agent drives it, and every recorded rollout played through it again."""

from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from nemo_gym.config_types import validate_server_instance_config
from nemo_gym.envkit.gymnasium_server import EnvResetResponse, EnvSession, EnvStepResponse, replay_episode
from nemo_gym.global_config import install_root
from nemo_gym.testing import (
    StartedServer,
    function_call_item,
    message_item,
    read_jsonl,
    response_with,
    run_resources_server,
)

FOLDER = Path(__file__).resolve().parents[1]
ROWS = read_jsonl(FOLDER / "data" / "example.jsonl")
ROLLOUTS = read_jsonl(FOLDER / "data" / "example_rollouts.jsonl")
PARIS = ROWS[0]  # two follow-ups, expected_answer "Eiffel"


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StartedServer]:
    workdir = tmp_path_factory.mktemp("example_multi_turn_gymnasium")
    with run_resources_server("example_multi_turn_gymnasium", workdir, domain="knowledge") as server:
        yield server


async def start(env: StartedServer, row: dict) -> EnvSession:
    session = EnvSession(env.url)
    assert await session.reset(row) == EnvResetResponse(observation=None, info={})
    return session


async def test_the_follow_ups_come_one_per_step_then_the_answer_is_graded(env):
    session = await start(env, PARIS)
    first = await session.step(PARIS, response_with(message_item("Paris.")))
    assert first == EnvStepResponse(observation=PARIS["follow_ups"][0], reward=0.0, info={})
    second = await session.step(PARIS, response_with(message_item("About 2 million.")))
    assert (second.observation, second.terminated) == (PARIS["follow_ups"][1], False)
    last = await session.step(PARIS, response_with(message_item("The EIFFEL tower.")))
    assert (last.observation, last.reward, last.terminated, last.truncated) == (None, 1.0, True, False)
    status, _ = await session.post("/step", {**PARIS, "response": response_with(message_item("again"))})
    assert status == 409, "the episode ended with its graded answer"


@pytest.mark.parametrize(
    ("items", "reward"),
    [
        ((message_item("The Louvre."),), 0.0),
        ((message_item("Tour "), message_item("eiffel")), 1.0),
        ((function_call_item("search", {"q": "Eiffel"}),), 0.0),
        ((), 0.0),
    ],
    ids=["wrong", "split over messages", "tool call only", "empty"],
)
async def test_only_the_final_answer_text_is_graded(env, items, reward):
    row = {**PARIS, "follow_ups": []}
    answer = await (await start(env, row)).step(row, response_with(*items))
    assert (answer.reward, answer.terminated) == (reward, True)


async def test_an_earlier_answer_does_not_count(env):
    session = await start(env, PARIS)
    await session.step(PARIS, response_with(message_item("Eiffel")))
    await session.step(PARIS, response_with(message_item("Eiffel")))
    assert (await session.step(PARIS, response_with(message_item("The Louvre.")))).reward == 0.0


@pytest.mark.parametrize(
    ("row", "field"),
    [
        ({key: value for key, value in PARIS.items() if key != "expected_answer"}, "expected_answer"),
        ({**PARIS, "follow_ups": "not a list"}, "follow_ups"),
        ({**PARIS, "expected_answer": 6}, "expected_answer"),
    ],
)
async def test_a_row_without_the_task_fields_is_refused(env, row, field):
    status, body = await EnvSession(env.url).post("/reset", row)
    assert status == 422 and field in body["error"]["message"]


@pytest.mark.parametrize("rollout", ROLLOUTS, ids=lambda rollout: str(rollout["_ng_task_index"]))
async def test_recorded_rollouts_follow_the_rules(env, rollout):
    """Played through the environment again, each recorded answer gets the observation that followed it in
    the recording, and the episode ends with the recorded reward."""
    row = ROWS[rollout["_ng_task_index"]]
    reset, steps = await replay_episode(env.url, row, rollout["response"])
    assert (
        reset.observation is None
        and rollout["responses_create_params"]["input"][0]["content"]
        == (row["responses_create_params"]["input"][0]["content"])
    )
    shown = [item["content"] for item in rollout["response"]["output"] if item.get("role") == "user"]
    assert [step.observation for step in steps[:-1]] == shown == row["follow_ups"]
    assert sum(step.reward for step in steps) == rollout["reward"]
    assert (steps[-1].terminated, steps[-1].truncated) == (rollout["terminated"], rollout["truncated"])


@pytest.mark.parametrize(
    ("config_name", "agent_instance", "rows_file"),
    [
        ("example_multi_turn_gymnasium", "example_multi_turn_gymnasium_agent", "example.jsonl"),
        (
            "example_multi_turn_gymnasium_user_sim",
            "example_multi_turn_gymnasium_user_sim_agent",
            "example_user_sim.jsonl",
        ),
    ],
)
def test_configs_wire_the_agent_the_rows_name_to_the_environment(config_name, agent_instance, rows_file):
    config = yaml.safe_load((FOLDER / "configs" / f"{config_name}.yaml").read_text())
    instances = {name: validate_server_instance_config(name, block) for name, block in config.items()}
    resources = instances["example_multi_turn_gymnasium"].get_inner_run_server_config()
    assert (resources.entrypoint, resources.domain) == ("app.py", "knowledge")
    agent = config[agent_instance]["responses_api_agents"]["gymnasium_agent"]
    assert agent["resources_server"]["name"] == "example_multi_turn_gymnasium" and agent["max_steps"] == 5
    assert agent["model_server"]["name"] == "policy_model"
    (dataset,) = instances[agent_instance].datasets
    assert (install_root() / dataset.jsonl_fpath).read_bytes() == (FOLDER / "data" / rows_file).read_bytes()
    rows = read_jsonl(FOLDER / "data" / rows_file)
    assert {row["agent_ref"]["name"] for row in rows} == {agent_instance}
    assert [{**row, "agent_ref": None} for row in rows] == [{**row, "agent_ref": None} for row in ROWS]
    user_model = agent.get("user_model_server")
    assert (user_model and user_model["name"]) == ("policy_model" if "user_sim" in config_name else None)
