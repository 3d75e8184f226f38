"""wordle: the rules in-process, then one real server process driven through /reset, /step and
/close_session; every recorded rollout is played through it again."""

from collections.abc import Iterator
from pathlib import Path

import orjson
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
from resources_servers.wordle.game import Game, check_word, feedback, win_reward

FOLDER = Path(__file__).resolve().parents[1]
ROWS = read_jsonl(FOLDER / "data" / "example.jsonl")
ROLLOUTS = read_jsonl(FOLDER / "data" / "example_rollouts.jsonl")
COOKIE = "WordleServer___wordle"


@pytest.mark.parametrize(
    ("guess", "target", "marks"),
    [
        ("plant", "plant", "GGGGG"),
        ("speed", "abide", "__Y_Y"),  # the second e has no e left to match
        ("eerie", "ebbed", "GY___"),
        ("llama", "hello", "YY___"),
        ("crane", "ghost", "_____"),
    ],
)
def test_feedback_matches_each_target_letter_once_greens_first(guess, target, marks):
    assert feedback(guess, target) == marks


def test_win_reward_falls_with_the_turns_and_a_lucky_first_guess_counts_as_three():
    assert [round(win_reward(turns), 6) for turns in range(1, 7)] == [1.6, 1.8, 1.6, 1.4, 1.2, 1.0]


@pytest.mark.parametrize(
    ("word", "problem"),
    [("plant", None), ("cards", None), ("boxes", None), ("robed", None), ("owned", None), ("plan", "has 4"), ("pl4nt", "letters a-z"),
     ("qzxvj", "not in the word list")],
)  # fmt: skip
def test_a_guess_must_be_a_listed_word_of_the_right_length(word, problem):
    found = check_word(word, 5)
    assert found is None if problem is None else problem in found


def test_penalties_for_ignoring_feedback_lower_a_win_but_never_below_the_floor():
    game = Game(target="plant", max_turns=6)
    assert game.guess("slate")["feedback"] == "_GGY_"
    game.guess("slate")  # repeated, and uses the eliminated s and e again
    assert game.penalties == {"repeated_guess": -0.2, "eliminated_letter": -0.04}
    game.guess("moody")  # the greens l and a dropped, the yellow t left out, m/o/d/y are new letters
    assert game.penalties == {
        "repeated_guess": -0.2,
        "eliminated_letter": -0.04,
        "green_dropped": -0.1,
        "yellows_ignored": -0.03,
    }
    assert game.guess("plant")["won"] is True and game.reward() == pytest.approx(1.4 - 0.37)
    stubborn = Game(target="plant", max_turns=6)
    for _ in range(5):
        stubborn.guess("xylem")
    stubborn.guess("plant")
    assert stubborn.reward() == 0.1


def test_invalid_guesses_use_a_turn_and_a_lost_game_reveals_the_word():
    game = Game(target="ghost", max_turns=2)
    first = game.guess("gh")
    assert (first["valid"], first["turns_remaining"], game.penalties) == (False, 1, {"invalid_guess": -0.02})
    last = game.guess("crane")
    assert (last["game_over"], last["target_word"], game.outcome, game.reward()) == (
        True,
        "GHOST",
        "loss",
        0.0,
    )


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StartedServer]:
    with run_resources_server("wordle", tmp_path_factory.mktemp("wordle"), domain="games") as server:
        yield server


def guess(word: str, call_id: str = "c1") -> dict:
    return function_call_item("submit_guess", {"guess": word}, call_id)


def reply(*items: dict) -> dict:
    return response_with(*items)


def outputs(step) -> list[dict]:
    return [orjson.loads(output["output"]) for output in step.info["tool_outputs"]]


async def start(env: StartedServer, **fields: object) -> tuple[EnvSession, dict]:
    row = {**ROWS[0], **fields}
    session = EnvSession(env.url)
    await session.reset(row)
    return session, row


async def test_reset_states_the_length_and_the_guesses_without_the_word(env):
    reset = await EnvSession(env.url).reset({**ROWS[0], "custom_target": "ghost", "max_turns": 4})
    assert "5-letter word" in reset.observation and "4 guesses" in reset.observation
    assert "ghost" not in reset.observation.lower()


async def test_a_win_ends_the_episode_with_the_turn_scaled_reward(env):
    session, row = await start(env, custom_target="plant")
    first = await session.step(row, reply(guess("crane"), function_call_item("get_game_state", {}, "c2")))
    assert (first.reward, first.terminated, first.observation) == (0.0, False, None)
    marks, state = outputs(first)
    assert marks["feedback"] == "__GG_" and state["known_greens"] == {"3": "A", "4": "N"}
    assert [output["call_id"] for output in first.info["tool_outputs"]] == ["c1", "c2"]
    second = await session.step(row, reply(guess("plant")))
    assert (second.reward, second.terminated, second.truncated) == (1.8, True, False)
    assert second.info["game_outcome"] == "win" and second.info["won"] == 1.0
    assert second.info["turns_if_won"] == 2.0 and outputs(second)[0]["target_word"] == "PLANT"


async def test_running_out_of_guesses_is_a_loss_worth_0(env):
    session, row = await start(env, custom_target="ghost", max_turns=2)
    await session.step(row, reply(guess("crane")))
    last = await session.step(row, reply(guess("plant"), guess("ghost", "c2")))
    assert (last.reward, last.terminated, last.info["game_outcome"]) == (0.0, True, "loss")
    assert len(last.info["tool_outputs"]) == 1, "calls after the game ended are not played"


async def test_a_reply_without_a_tool_call_ends_an_incomplete_game_with_0(env):
    session, row = await start(env)
    step = await session.step(row, reply(message_item("I think the word is PLANT.")))
    assert (step.reward, step.terminated, step.info["game_outcome"]) == (0.0, True, "incomplete")
    status, body = await session.post("/step", {**row, "response": reply(guess("plant"))})
    assert status == 409, "the episode is over"


async def test_free_tools_use_no_turn_and_bad_calls_are_answered_not_raised(env):
    session, row = await start(env)
    step = await session.step(
        row,
        reply(
            function_call_item("check_word_validity", {"word": "Qzxvj"}, "c1"),
            function_call_item("check_word_validity", {"word": "slate"}, "c2"),
            function_call_item("submit_guess", "{not json", "c3"),
            function_call_item("submit_guess", {"word": "slate"}, "c4"),
            function_call_item("dance", {}, "c5"),
        ),
    )
    bad, good, broken, misnamed, unknown = outputs(step)
    assert (bad["valid"], good["valid"]) == (False, True) and "not in the word list" in bad["reason"]
    assert "bad arguments for submit_guess" in broken["error"] and "guess" in misnamed["error"]
    assert "unknown tool 'dance'" in unknown["error"]
    assert (step.terminated, step.info["turns_used"]) == (False, 0)


@pytest.mark.parametrize(
    ("fields", "problem"),
    [
        ({"custom_target": "qzxvj"}, "not in the word list"),
        ({"custom_target": "lamp"}, "has 4"),
        ({"custom_target": None}, "custom_target"),
        ({"max_turns": 0}, "max_turns"),
    ],
)
async def test_a_bad_row_is_refused_with_the_field(env, fields, problem):
    status, body = await EnvSession(env.url).post("/reset", {**ROWS[0], **fields})
    assert status == 422 and problem in body["error"]["message"]


async def test_close_session_releases_the_game_and_the_id_stays_closed(env):
    session, row = await start(env)
    close = {
        "resources_session_id": session_id_in_cookie(session.cookies[COOKIE]),
        "episode_id": {"rollout_id": "r1"},
    }
    for _ in range(2):
        assert await session.post("/close_session", close) == (
            200,
            {"resources_session_id": close["resources_session_id"]},
        )
    assert (await session.post("/step", {**row, "response": reply(guess("plant"))}))[0] == 409
    assert (await session.post("/reset", row))[0] == 409
    assert (await session.post("/close_session", {**close, "extra": 1}))[0] == 422


@pytest.mark.parametrize("rollout", ROLLOUTS, ids=lambda rollout: str(rollout["_ng_task_index"]))
async def test_recorded_rollouts_follow_the_rules(env, rollout):
    row = ROWS[rollout["_ng_task_index"]]
    reset, steps = await replay_episode(env.url, row, rollout["response"])
    assert rollout["responses_create_params"]["input"][-1]["content"] == reset.observation
    recorded = [
        item["output"] for item in rollout["response"]["output"] if item["type"] == "function_call_output"
    ]
    replayed = [output["output"] for step in steps[:-1] for output in step.info["tool_outputs"]]
    assert replayed == recorded
    assert sum(step.reward for step in steps) == rollout["reward"]
    assert (steps[-1].terminated, steps[-1].info) == (rollout["terminated"], rollout["info"])


def test_config_wires_the_agent_the_rows_name_to_the_environment():
    _, _, agent = check_environment_config(
        FOLDER,
        "wordle",
        "games",
        agent_instance="wordle_gymnasium_agent",
        agent_implementation="gymnasium_agent",
    )
    assert agent["max_steps"] == 18
    assert {row["agent_ref"]["name"] for row in ROWS} == {"wordle_gymnasium_agent"}
