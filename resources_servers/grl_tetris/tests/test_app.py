"""grl_tetris: the rules in-process, then one real server process driven through /reset, /step and
/close_session; every recorded rollout is played through it again."""

from collections.abc import Iterator
from pathlib import Path

import pytest

from nemo_gym.envkit.gymnasium_server import EnvSession, replay_episode
from nemo_gym.testing import (
    StartedServer,
    check_environment_config,
    message_item,
    read_jsonl,
    response_with,
    run_resources_server,
    session_id_in_cookie,
)
from resources_servers.grl_tetris.tetris import SINGLE, SQUARE, TALL, WIDE, Tetris, parse_actions

FOLDER = Path(__file__).resolve().parents[1]
ROWS = read_jsonl(FOLDER / "data" / "example.jsonl")
ROLLOUTS = read_jsonl(FOLDER / "data" / "example_rollouts.jsonl")
COOKIE = "TetrisServer___grl_tetris_resources_server"
MAX_ACTIONS = 20


def game(width: int, height: int, pieces: list[tuple]) -> Tetris:
    """A game with a chosen piece sequence: (shape, column) pairs."""
    board = Tetris(width, height, [(shape, (column, 0)) for shape, column in pieces])
    board._spawn()
    return board


def test_the_piece_sequence_follows_from_the_seed_and_the_piece_set():
    first, again = Tetris.new(4, 4, 3, 11), Tetris.new(4, 4, 3, 11)
    assert first.queue == again.queue and first.render() == again.render()
    assert {shape for shape, _ in Tetris.new(6, 6, 3, 1).queue} == {TALL, WIDE, SQUARE}
    assert {shape for shape, _ in Tetris.new(6, 6, 0, 1).queue} == {SINGLE}
    assert all(column >= 1 for shape, (column, _) in Tetris.new(6, 6, 2, 3).queue if shape == WIDE)


def test_moves_lock_clear_and_score_as_in_grl():
    board = game(2, 3, [(SINGLE, 0), (SINGLE, 0), (SINGLE, 0)])
    assert board.move("left") == (-0.1, "blocked")
    assert board.move("down") == (-0.1, "moved")
    assert board.move("down") == (-0.1, "moved, locked"), "a piece that cannot go down settles"
    assert board.render() == ["X_", "__", "#_"]
    assert board.move("right") == (-0.1, "moved")
    assert [board.move("down"), board.move("down")] == [(-0.1, "moved"), (9.9, "moved, cleared 1 row(s)")]
    assert board.over and board.success and board.render() == ["__", "__", "__"]


def test_a_piece_settling_in_the_top_row_ends_the_game_without_success():
    board = game(2, 2, [(TALL, 0), (TALL, 0)])
    assert board.move("down") == (-0.1, "moved, locked, topped out")
    assert board.render() == ["#_", "#_"] and board.over and not board.success


@pytest.mark.parametrize(
    ("text", "moves", "problem"),
    [
        (
            "<action>Left</action> then <action>DOWN</action><action>2</action>",
            ["left", "down", "down"],
            None,
        ),
        ("<action>left</action><action>jump</action>", ["left"], "unknown move 'jump' skipped"),
        ("I would drop it.", [], "no <action>...</action> tag found"),
        ("<action>down</action>" * 25, ["down"] * MAX_ACTIONS, "only the first 20 moves"),
    ],
)
def test_every_action_tag_is_played_in_order(text, moves, problem):
    parsed, found = parse_actions(text, MAX_ACTIONS)
    assert parsed == moves
    assert (found is None) if problem is None else (problem in found)


def test_a_pathological_reply_parses_in_linear_time():
    assert parse_actions("<action>" * 200_000, MAX_ACTIONS) == ([], "no <action>...</action> tag found")


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StartedServer]:
    workdir = tmp_path_factory.mktemp("grl_tetris")
    with run_resources_server(
        "grl_tetris_resources_server", workdir, implementation="grl_tetris", domain="games"
    ) as server:
        yield server


def reply(text: str) -> dict:
    return response_with(message_item(text))


async def play(env: StartedServer, row: dict, *texts: str) -> list:
    session = EnvSession(env.url)
    await session.reset(row)
    return [await session.step(row, reply(text)) for text in texts]


async def test_reset_shows_the_rules_and_the_board_of_the_row(env):
    observation = (await EnvSession(env.url).reset({**ROWS[0], "max_turns": 3})).observation
    assert "3-wide, 3-tall board" in observation and "3 turn(s)" in observation
    assert observation.endswith("\n\nX__\n___\n___")
    sized = (await EnvSession(env.url).reset({**ROWS[3], "dim_board": [5, 2]})).observation
    assert "5-wide, 2-tall board" in sized and "10 turn(s)" in sized


async def test_clearing_a_row_earns_the_grl_score_and_ends_the_episode(env):
    steps = await play(
        env, ROWS[0], "<action>Down</action><action>Down</action>", "<action>Right</action>" + "<action>Down</action>" * 2,
        "<action>down</action><action>2</action><action>down</action>",
    )  # fmt: skip
    assert [(step.reward, step.terminated) for step in steps] == [(-0.2, False), (-0.3, False), (9.8, True)]
    assert steps[-1].info == {
        "moves": ["down (moved)", "down (moved, cleared 1 row(s))"],
        "problem": None,
        "success": True,
        "lines_cleared": 1,
        "total_reward": 9.3,
    }
    assert "Row cleared" in steps[-1].observation


async def test_a_topped_out_stack_ends_the_episode_without_success(env):
    steps = await play(env, ROWS[1], "<action>Down</action>" * 4, "<action>Down</action>" * 4)
    assert (steps[-1].terminated, steps[-1].info["success"]) == (True, False)
    assert sum(step.reward for step in steps) == pytest.approx(-0.6)
    assert "Game over" in steps[-1].observation


async def test_an_unusable_reply_costs_a_turn_and_the_last_turn_truncates(env):
    first, last = await play(env, ROWS[2], "I will drop it straight down.", "<action>down</action>")
    assert (first.reward, first.terminated, first.truncated) == (0.0, False, False)
    assert (
        first.info["problem"] == "no <action>...</action> tag found" and "Turns left: 1" in first.observation
    )
    assert (last.reward, last.terminated, last.truncated) == (-0.1, False, True)


@pytest.mark.parametrize(
    ("fields", "problem"),
    [
        ({"dim_x": 1}, "dim_x"),
        ({"dim_board": [4, 40], "dim_x": None, "dim_y": None}, "each side is 2 to 12"),
        ({"dim_board": [4, 4]}, "either as dim_board or as dim_x/dim_y"),
        ({"seed": "abc"}, "seed"),
        ({"max_turns": 0}, "max_turns"),
    ],
)
async def test_a_bad_row_is_refused_with_the_field(env, fields, problem):
    row = {key: value for key, value in {**ROWS[0], **fields}.items() if value is not None}
    status, body = await EnvSession(env.url).post("/reset", row)
    assert status == 422 and problem in body["error"]["message"]


async def test_close_session_releases_the_game_and_the_id_stays_closed(env):
    session = EnvSession(env.url)
    await session.reset(ROWS[0])
    session_id = session_id_in_cookie(session.cookies[COOKIE])
    close = {"resources_session_id": session_id, "episode_id": {"rollout_id": "r1"}}
    for _ in range(2):
        assert await session.post("/close_session", close) == (200, {"resources_session_id": session_id})
    assert (await session.post("/step", {**ROWS[0], "response": reply("<action>down</action>")}))[0] == 409
    assert (await session.post("/reset", ROWS[0]))[0] == 409
    assert (await session.post("/close_session", {"resources_session_id": session_id}))[0] == 422


@pytest.mark.parametrize("rollout", ROLLOUTS, ids=lambda rollout: str(rollout["_ng_task_index"]))
async def test_recorded_rollouts_follow_the_rules(env, rollout):
    row = ROWS[rollout["_ng_task_index"]]
    reset, steps = await replay_episode(env.url, row, rollout["response"])
    assert rollout["responses_create_params"]["input"][-1]["content"] == reset.observation
    shown = [item["content"] for item in rollout["response"]["output"] if item.get("role") == "user"]
    assert [step.observation for step in steps[:-1]] == shown
    assert sum(step.reward for step in steps) == pytest.approx(rollout["reward"])
    assert (steps[-1].terminated, steps[-1].truncated, steps[-1].info) == (
        rollout["terminated"],
        rollout["truncated"],
        rollout["info"],
    )


def test_config_wires_the_agent_the_rows_name_to_the_environment():
    _, resources, agent = check_environment_config(
        FOLDER,
        "grl_tetris_resources_server",
        "games",
        agent_instance="grl_tetris_gymnasium_agent",
        agent_implementation="gymnasium_agent",
    )
    extra = resources.model_extra
    assert extra["env_config"] == {"dim_x": 4, "dim_y": 4, "box_type": 3}
    assert (extra["max_turns"], extra["max_actions_per_turn"], agent["max_steps"]) == (10, MAX_ACTIONS, 10)
    assert {row["agent_ref"]["name"] for row in ROWS} == {"grl_tetris_gymnasium_agent"}
