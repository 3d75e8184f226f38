"""blackjack: the rules in-process, and one real server process driven through /reset and /step (seeded
rows make every deal known in advance); every recorded rollout is played through it again."""

import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from nemo_gym.config_types import validate_server_instance_config
from nemo_gym.envkit.gymnasium_server import EnvSession, EnvStepResponse, replay_episode
from nemo_gym.global_config import install_root
from nemo_gym.testing import (
    StartedServer,
    function_call_item,
    message_item,
    post_json,
    read_jsonl,
    response_with,
    run_resources_server,
)
from resources_servers.blackjack.game import hand_value, new_deck, outcome, parse_action, play_dealer

FOLDER = Path(__file__).resolve().parents[1]
ROWS = read_jsonl(FOLDER / "data" / "example.jsonl")
ROLLOUTS = read_jsonl(FOLDER / "data" / "example_rollouts.jsonl")
PROMPT = ROWS[0]["responses_create_params"]


@pytest.mark.parametrize(
    ("cards", "value"),
    [
        (["K", "Q"], 20),
        (["A", "K"], 21),
        (["A", "A"], 12),
        (["A", "5", "K"], 16),
        (["A", "A", "9"], 21),
        (["A", "A", "A", "A"], 14),
        (["K", "Q", "2"], 22),
        (["7", "A", "A", "K"], 19),
    ],
)
def test_hand_value_counts_faces_10_and_demotes_aces_while_over_21(cards, value):
    assert hand_value(cards) == value


@pytest.mark.parametrize(
    ("text", "action"),
    [
        ("<action>hit</action>", "hit"),
        ("I will <ACTION> Stand </Action> now", "stand"),
        ("<action>hit</action> no wait: <action>stand</action>", "stand"),
        ("<action>double</action>", None),
        ("hit me", None),
        ("<action>hit", None),
        ("<action><action>hit</action>", "hit"),
        ("", None),
    ],
)
def test_the_action_is_the_last_tag_and_only_hit_or_stand_parse(text, action):
    assert parse_action(text) == action


def test_a_pathological_reply_parses_in_linear_time():
    assert parse_action("<action>" * 200_000 + "x" * 200_000) is None


def test_the_dealer_draws_to_17_and_stands_on_soft_17():
    deck = ["9", "A", "2"]  # dealt from the end
    hand = ["3", "2"]
    play_dealer(hand, deck)
    assert hand == ["3", "2", "2", "A"] and hand_value(hand) == 18
    soft = ["A", "6"]
    play_dealer(soft, ["K"])
    assert soft == ["A", "6"]


@pytest.mark.parametrize(
    ("player", "dealer", "expected"),
    [
        (["K", "9"], ["K", "8"], ("win", 1.0)),
        (["K", "8"], ["K", "8"], ("draw", 0.0)),
        (["K", "7"], ["K", "8"], ("loss", -1.0)),
        (["K", "2"], ["K", "6", "9"], ("win", 1.0)),
        (["K", "6", "9"], ["K", "6", "9"], ("bust", -1.0)),
    ],
)
def test_outcome(player, dealer, expected):
    assert outcome(player, dealer) == expected


def test_a_seed_fixes_the_deck():
    assert new_deck(random.Random(5)) == new_deck(random.Random(5)) != new_deck(random.Random(6))
    assert sorted(new_deck(random.Random(1))) == sorted(["A", *map(str, range(2, 11)), "J", "Q", "K"] * 4)


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StartedServer]:
    with run_resources_server("blackjack", tmp_path_factory.mktemp("blackjack"), domain="games") as server:
        yield server


class Hand(EnvSession):
    """One episode with a seeded (or unseeded) deck."""

    def __init__(self, env: StartedServer, seed: Any) -> None:
        super().__init__(env.url)
        self.row = {"responses_create_params": PROMPT, "seed": seed}

    async def deal(self) -> str:
        return (await self.reset(self.row)).observation

    async def play(self, *items: dict) -> EnvStepResponse:
        return await self.step(self.row, response_with(*items))


async def test_reset_deals_from_the_seeded_deck(env):
    observation = await Hand(env, 20).deal()
    assert observation.startswith("Your hand: 8, 5 (value 13). The dealer shows J.")
    assert "<action>hit</action>" in observation and "<action>stand</action>" in observation
    assert await Hand(env, 20).deal() == observation


async def test_unseeded_deals_differ(env):
    deals = {await Hand(env, None).deal() for _ in range(8)}
    assert len(deals) > 1


async def test_hitting_draws_until_a_bust_ends_the_hand(env):
    hand = Hand(env, 20)  # 8, 5 against J, 10; the deck then gives 4, Q
    await hand.deal()
    drew = await hand.play(message_item("<action>hit</action>"))
    assert (drew.reward, drew.terminated) == (0.0, False)
    assert drew.observation.startswith("You drew 4. Your hand: 8, 5, 4 (value 17).")
    bust = await hand.play(message_item("<action>hit</action>"))
    assert (bust.reward, bust.terminated, bust.truncated) == (-1.0, True, False)
    assert bust.info == {
        "action": "hit",
        "parsed": True,
        "result": "bust",
        "player_hand": ["8", "5", "4", "Q"],
        "dealer_hand": ["J", "10"],
    }
    status, _ = await hand.post("/step", {**hand.row, "response": response_with(message_item("x"))})
    assert status == 409


@pytest.mark.parametrize(
    ("seed", "result", "reward", "dealer_hand"),
    [
        (7, "win", 1.0, ["K", "3", "4"]),  # 18 against 17
        (1, "draw", 0.0, ["10", "5", "4"]),  # 19 each
        (3, "loss", -1.0, ["9", "9"]),  # 13 against 18
        (22, "win", 1.0, ["2", "A", "3", "Q", "6"]),  # the dealer's ace drops to 1, then the dealer busts
    ],
)
async def test_standing_lets_the_dealer_draw_to_17_and_settles(env, seed, result, reward, dealer_hand):
    hand = Hand(env, seed)
    await hand.deal()
    settled = await hand.play(message_item("<action>stand</action>"))
    assert (settled.reward, settled.terminated) == (reward, True)
    assert (settled.info["result"], settled.info["dealer_hand"]) == (result, dealer_hand)


@pytest.mark.parametrize(
    "items",
    [
        (message_item("<action>double down</action>"),),
        (message_item("I'd like another card"),),
        (function_call_item("hit", {}),),
        (),
    ],
    ids=["unknown action", "no tag", "tool call only", "empty"],
)
async def test_a_reply_without_a_valid_action_stands(env, items):
    hand = Hand(env, 7)
    await hand.deal()
    settled = await hand.play(*items)
    assert settled.info["action"] == "stand" and settled.info["parsed"] is False
    assert (settled.info["result"], settled.reward) == ("win", 1.0)


async def test_sessions_play_their_own_decks(env):
    first, second = Hand(env, 20), Hand(env, 20)
    await first.deal()
    await second.deal()
    assert (await first.play(message_item("<action>hit</action>"))).observation.startswith("You drew 4.")
    assert (await second.play(message_item("<action>hit</action>"))).observation.startswith("You drew 4.")


@pytest.mark.parametrize("seed", ["abc", 1.5, [1]])
async def test_a_bad_seed_is_refused(env, seed):
    status, body = await Hand(env, seed).post("/reset", {"responses_create_params": PROMPT, "seed": seed})
    assert status == 422 and "seed" in body["error"]["message"]


@pytest.mark.parametrize("rollout", ROLLOUTS, ids=lambda rollout: str(rollout["_ng_task_index"]))
async def test_recorded_rollouts_follow_the_rules(env, rollout):
    """Played again from the row's seed, each recorded answer gets the observation that followed it in the
    recording, and the hand ends as recorded."""
    row = ROWS[rollout["_ng_task_index"]]
    reset, steps = await replay_episode(env.url, row, rollout["response"])
    assert rollout["responses_create_params"]["input"][-1]["content"] == reset.observation
    shown = [item["content"] for item in rollout["response"]["output"] if item.get("role") == "user"]
    assert [step.observation for step in steps[:-1]] == shown
    assert sum(step.reward for step in steps) == rollout["reward"]
    assert (steps[-1].terminated, steps[-1].truncated, steps[-1].info) == (
        rollout["terminated"],
        rollout["truncated"],
        rollout["info"],
    )


async def test_aggregate_metrics_add_the_share_of_each_result(env):
    status, body = await post_json(env.url + "/aggregate_metrics", {"verify_responses": ROLLOUTS})
    assert status == 200, body
    metrics = body["agent_metrics"]
    assert (metrics["rate/win"], metrics["rate/draw"], metrics["rate/loss"], metrics["rate/bust"]) == (
        40,
        20,
        20,
        20,
    )
    assert body["key_metrics"]["mean/reward"] == pytest.approx(0.0)
    odd = [{**ROLLOUTS[0], "info": "not a dict"}, {**ROLLOUTS[1], "info": None}]
    status, body = await post_json(env.url + "/aggregate_metrics", {"verify_responses": odd})
    assert status == 200 and body["agent_metrics"]["rate/win"] == 0, body
    failed = [{"_ng_task_index": 0, "_ng_rollout_index": 0, "_ng_failure_class": "timeout"}]
    status, body = await post_json(env.url + "/aggregate_metrics", {"verify_responses": failed})
    assert status == 200 and "rate/win" not in body["agent_metrics"], body


def test_config_wires_the_agent_the_rows_name_to_the_environment():
    config = yaml.safe_load((FOLDER / "configs" / "blackjack.yaml").read_text())
    instances = {name: validate_server_instance_config(name, block) for name, block in config.items()}
    resources = instances["blackjack"].get_inner_run_server_config()
    assert (resources.entrypoint, resources.domain) == ("app.py", "games")
    agent_name = ROWS[0]["agent_ref"]["name"]
    agent = config[agent_name]["responses_api_agents"]["gymnasium_agent"]
    assert (agent["resources_server"]["name"], agent["model_server"]["name"], agent["max_steps"]) == (
        "blackjack",
        "policy_model",
        5,
    )
    (dataset,) = instances[agent_name].datasets
    assert (install_root() / dataset.jsonl_fpath).read_bytes() == (
        FOLDER / "data" / "example.jsonl"
    ).read_bytes()
