"""openair_congestion: the simulator, guardrail and reward in-process, then one real server process driven
through /reset, /step and /close_session; every recorded rollout is played through it again."""

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from nemo_gym.envkit.gymnasium_server import EnvSession, replay_episode
from nemo_gym.testing import (
    StartedServer,
    check_environment_config,
    function_call_item,
    message_item,
    read_jsonl,
    response_with,
    run_resources_server,
    session_id_in_cookie,
)
from resources_servers.openair_congestion.controls import ProtocolViolation, Rejected, apply, parse_call
from resources_servers.openair_congestion.reward import RewardWeights, breakdown
from resources_servers.openair_congestion.sim import Network, jain, water_fill

FOLDER = Path(__file__).resolve().parents[1]
ROWS = read_jsonl(FOLDER / "data" / "example.jsonl")
ROLLOUTS = read_jsonl(FOLDER / "data" / "example_rollouts.jsonl")
COOKIE = "OpenAirCongestionServer___openair_congestion"
HOG = dict(seed=11, regime="prb_exhaustion", difficulty=0.6, steps=4, capacity_mbps=60.0)


def episode_return(plan: list[tuple[str, dict]], steps: int = 4, **scenario) -> float:
    """The summed reward of playing `plan` (then noop) in-process."""
    network = Network.scenario(**{**HOG, "steps": steps, **scenario})
    before, total = network.start(), 0.0
    for turn in range(steps):
        name, args = plan[turn] if turn < len(plan) else ("noop", {})
        apply(network, name, parse_call(name, json.dumps(args)))
        after = network.advance()
        total += breakdown(
            before, after, action=name, rejected=False, weights=RewardWeights(), cell_capacity_mbps=60.0
        )["total"]
        before = after
    return total


def test_water_filling_shares_by_weight_under_caps():
    assert water_fill([1, 1, 1], [1, 1, 1]) == pytest.approx([1 / 3] * 3)
    assert water_fill([1, 1, 1], [0.1, 1, 1]) == pytest.approx([0.1, 0.45, 0.45]), (
        "what a capped UE leaves is shared"
    )
    assert water_fill([3, 1], [1, 1]) == pytest.approx([0.75, 0.25])
    assert sum(water_fill([1, 1], [0.2, 0.3])) == pytest.approx(0.5), "no UE gets more than it needs"
    assert (jain([1, 1, 1]), jain([1, 0, 0])) == (pytest.approx(1.0), pytest.approx(1 / 3))


def test_a_scenario_follows_from_its_row_alone():
    first, again = Network.scenario(**HOG), Network.scenario(**HOG)
    assert [first.advance() for _ in range(3)] == [again.advance() for _ in range(3)]
    assert Network.scenario(**{**HOG, "seed": 12}).start() != Network.scenario(**HOG).start()


@pytest.mark.parametrize(
    ("regime", "plan"),
    [
        ("prb_exhaustion", [("set_scheduler_policy", {"cell_id": 0, "policy": "PF"})]),
        ("interference", [("set_ul_power_control", {"cell_id": 0, "p0_dbm": -100, "alpha": 0.8})]),
        (
            "interference",
            [("set_mcs_bounds", {"cell_id": 0, "mcs_min": 0, "mcs_max": 20, "target_bler": 0.1})],
        ),
        ("prach_storm", [("set_handover_trigger", {"cell_id": 0, "a3_offset_db": 8, "ttt_ms": 640})]),
        ("qos_competition", [("set_qos_weights", {"cell_id": 0, "weights": {"1": 10}})]),
    ],
)
def test_the_fitting_control_earns_more_than_standing_pat(regime, plan):
    seed = {"qos_competition": 21, "interference": 12}.get(regime, 11)
    assert (
        episode_return(plan, regime=regime, seed=seed) > episode_return([], regime=regime, seed=seed) + 0.05
    )


@pytest.mark.parametrize(
    ("name", "arguments", "problem"),
    [
        ("reboot", "{}", "unknown tool 'reboot'"),
        ("noop", "{not json", "noop"),
        ("set_scheduler_policy", '{"cell_id": 0}', "policy: Field required"),
        ("set_scheduler_policy", '{"cell_id": "0", "policy": "PF"}', "cell_id"),
        ("noop", '{"extra": 1}', "extra: Extra inputs are not permitted"),
    ],
)
def test_an_ill_shaped_call_is_a_protocol_violation(name, arguments, problem):
    with pytest.raises(ProtocolViolation, match=problem):
        parse_call(name, arguments)


@pytest.mark.parametrize(
    ("name", "arguments", "problem"),
    [
        ("set_scheduler_policy", {"cell_id": 3, "policy": "PF"}, "cell 3 does not exist"),
        ("set_scheduler_policy", {"cell_id": 0, "policy": "EDF"}, "not one of PF"),
        ("set_prb_cap", {"cell_id": 0, "target": "ue", "target_id": 9, "max_prb": 200}, "no UE 9"),
        ("set_prb_cap", {"cell_id": 0, "target": "ue", "target_id": 2, "max_prb": 40}, "outside 91..273"),
        ("set_mcs_bounds", {"cell_id": 0, "mcs_min": 20, "mcs_max": 10, "target_bler": 0.1}, "mcs_max 10"),
        ("set_qos_weights", {"cell_id": 0, "weights": {"voice": 5}}, "not an integer 1..127"),
        ("set_qos_weights", {"cell_id": 0, "weights": {"1": 11}}, "outside 0..10"),
        ("set_admission_policy", {"cell_id": 0, "accept_threshold_pct": 80, "slice_reservation": {}}, "100"),
        ("set_handover_trigger", {"cell_id": 0, "a3_offset_db": 30, "ttt_ms": 640}, "outside -24..24"),
        ("set_handover_trigger", {"cell_id": 0, "a3_offset_db": 3, "ttt_ms": 300}, "ttt_ms 300"),
        ("set_ul_power_control", {"cell_id": 0, "p0_dbm": -90, "alpha": 0.75}, "alpha 0.75"),
    ],
)
def test_the_guardrail_rejects_unsafe_values(name, arguments, problem):
    with pytest.raises(Rejected, match=problem):
        apply(Network.scenario(**HOG), name, parse_call(name, json.dumps(arguments)))


def test_the_reward_is_the_sum_of_its_terms_and_a_rejection_earns_no_delta_credit():
    network = Network.scenario(**HOG)
    before = network.start()
    apply(
        network, "set_scheduler_policy", parse_call("set_scheduler_policy", '{"cell_id": 0, "policy": "PF"}')
    )
    after = network.advance()
    paid = breakdown(
        before, after, action="x", rejected=False, weights=RewardWeights(), cell_capacity_mbps=60.0
    )
    assert paid["total"] == pytest.approx(sum(paid["terms"].values()))
    assert paid["terms"]["delta_sla"] == 1.0 and paid["terms"]["reject"] == 0.0
    refused = breakdown(
        before, after, action="x", rejected=True, weights=RewardWeights(), cell_capacity_mbps=60.0
    )
    assert (refused["terms"]["delta_sla"], refused["terms"]["reject"]) == (0.0, -0.5)
    calm = breakdown(after, after, action="noop", rejected=False, weights=RewardWeights(w_prb_level=0, w_sla_level=0, w_buffer=0), cell_capacity_mbps=60.0)  # fmt: skip
    assert calm["total"] == 0.0, "a steady network with no congestion cost left scores 0"


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StartedServer]:
    workdir = tmp_path_factory.mktemp("openair_congestion")
    with run_resources_server("openair_congestion", workdir, domain="agent") as server:
        yield server


def call(name: str, arguments: dict, call_id: str = "c1") -> dict:
    return function_call_item(name, arguments, call_id)


async def play(env: StartedServer, row: dict, *replies: list[dict]) -> list:
    session = EnvSession(env.url)
    await session.reset(row)
    return [await session.step(row, response_with(*items)) for items in replies]


async def test_reset_shows_the_telemetry_without_the_scenario_labels(env):
    reset = await EnvSession(env.url).reset(ROWS[0])
    assert reset.observation.startswith("Step 0 of 4.") and "Cell 0: scheduler MaxCI" in reset.observation
    assert "UE 2 (5QI 8): offered 42.93 Mbps" in reset.observation and reset.info == {"steps": 4}
    assert "prb_exhaustion" not in reset.observation and "difficulty" not in reset.observation


async def test_an_accepted_control_persists_and_the_episode_truncates_at_max_steps(env):
    noop = [call("noop", {})]
    steps = await play(
        env, ROWS[0], [call("set_scheduler_policy", {"cell_id": 0, "policy": "PF"})], noop, noop, noop
    )
    assert [step.info["action_status"] for step in steps] == ["accepted"] * 4
    assert steps[0].info["tool_outputs"] == [{"call_id": "c1", "output": "accepted: cell 0 scheduler is PF"}]
    assert "scheduler PF" in steps[2].observation, "setpoints persist"
    assert [(step.terminated, step.truncated) for step in steps] == [(False, False)] * 3 + [(False, True)]
    assert steps[-1].observation is None
    assert steps[-1].info["episode_return"] == pytest.approx(sum(step.reward for step in steps))
    assert steps[-1].info["episode_return"] == pytest.approx(
        episode_return([("set_scheduler_policy", {"cell_id": 0, "policy": "PF"})])
    )


async def test_protocol_violations_play_noop_with_the_penalty_and_the_episode_goes_on(env):
    steps = await play(
        env, ROWS[0], [message_item("Let me think about it.")], [call("noop", {}, "a"), call("noop", {}, "b")]
    )
    for step in steps:
        assert (step.info["action_status"], step.info["action"], step.truncated) == (
            "protocol_violation",
            "noop",
            False,
        )
        assert step.info["reward_breakdown"]["terms"]["protocol"] == -1.0
        assert step.reward == pytest.approx(sum(step.info["reward_breakdown"]["terms"].values()))
    assert steps[0].info["tool_outputs"] == []
    assert [output["call_id"] for output in steps[1].info["tool_outputs"]] == ["a", "b"]
    assert "expected exactly one tool call, got 2" in steps[1].info["tool_outputs"][0]["output"]


async def test_a_rejected_call_costs_w_reject_and_changes_nothing(env):
    (step,) = await play(env, ROWS[0], [call("set_scheduler_policy", {"cell_id": 7, "policy": "PF"})])
    assert (
        step.info["action_status"] == "rejected" and step.info["reward_breakdown"]["terms"]["reject"] == -0.5
    )
    assert (
        "Last action rejected: cell 7 does not exist" in step.observation
        and "scheduler MaxCI" in step.observation
    )


@pytest.mark.parametrize(
    ("fields", "problem"),
    [
        ({"scenario_id": "meltdown"}, "scenario_id"),
        ({"scenario_id": None, "regime_mix": {"bursty": 0.5}}, "summing to 1"),
        ({"scenario_id": None, "regime_mix": {"solar_flare": 1.0}}, "unknown regimes"),
        ({"difficulty": 1.5}, "difficulty"),
        ({"seed": -1}, "seed"),
        ({"max_steps": 0}, "max_steps"),
        ({"tier": "live"}, "tier"),
    ],
)
async def test_a_bad_row_is_refused_with_the_field(env, fields, problem):
    status, body = await EnvSession(env.url).post("/reset", {**ROWS[0], **fields})
    assert status == 422 and problem in body["error"]["message"]


async def test_close_session_releases_the_episode_and_the_id_stays_closed(env):
    session = EnvSession(env.url)
    await session.reset(ROWS[0])
    session_id = session_id_in_cookie(session.cookies[COOKIE])
    close = {"resources_session_id": session_id, "episode_id": {"rollout_id": "r1"}}
    for _ in range(2):
        assert await session.post("/close_session", close) == (200, {"resources_session_id": session_id})
    assert (await session.post("/step", {**ROWS[0], "response": response_with(call("noop", {}))}))[0] == 409
    assert (await session.post("/reset", ROWS[0]))[0] == 409


@pytest.mark.parametrize("rollout", ROLLOUTS, ids=lambda rollout: str(rollout["_ng_task_index"]))
async def test_recorded_rollouts_follow_the_rules(env, rollout):
    row = ROWS[rollout["_ng_task_index"]]
    reset, steps = await replay_episode(env.url, row, rollout["response"])
    assert rollout["responses_create_params"]["input"][-1]["content"] == reset.observation
    shown = [item["content"] for item in rollout["response"]["output"] if item.get("role") == "user"]
    assert [step.observation for step in steps[:-1]] == shown
    assert sum(step.reward for step in steps) == pytest.approx(rollout["reward"])
    assert (steps[-1].truncated, steps[-1].info) == (rollout["truncated"], rollout["info"])


def test_config_wires_the_agent_the_rows_name_to_the_environment():
    _, resources, agent = check_environment_config(
        FOLDER,
        "openair_congestion",
        "agent",
        agent_instance="openair_congestion_gymnasium_agent",
        agent_implementation="gymnasium_agent",
    )
    extra = resources.model_extra
    assert (extra["backend"], extra["protocol_violation_penalty"], extra["agent_max_steps"]) == (
        "replay",
        -1.0,
        16,
    )
    assert agent["max_steps"] >= extra["agent_max_steps"] and all(row["max_steps"] <= 16 for row in ROWS)
