"""grl_sokoban: the rules in-process (every example level is checked solvable by a breadth-first search), and
one real server process driven through /reset and /step; every recorded rollout is played through it again."""

from collections import deque
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from nemo_gym.config_types import validate_server_instance_config
from nemo_gym.envkit.gymnasium_server import EnvSession, replay_episode
from nemo_gym.global_config import install_root
from nemo_gym.testing import StartedServer, message_item, read_jsonl, response_with, run_resources_server
from resources_servers.grl_sokoban.sokoban import MOVES, Board, parse_moves

FOLDER = Path(__file__).resolve().parents[1]
ROWS = read_jsonl(FOLDER / "data" / "example.jsonl")
ROLLOUTS = read_jsonl(FOLDER / "data" / "example_rollouts.jsonl")
MAX_TURNS, MAX_MOVES = 10, 20  # the server's defaults
CORRIDOR = ["#####", "#@$.#", "#####"]
ROOM = ["######", "#    #", "# @$ #", "#  . #", "######"]  # solved by up, right, down


def board(level: list[str]) -> Board:
    return Board.parse(level)


def shortest_solution(level: list[str]) -> list[str] | None:
    start = board(level)
    seen = {(start.player, frozenset(start.boxes))}
    queue = deque([(start.player, frozenset(start.boxes), [])])
    while queue:
        player, boxes, path = queue.popleft()
        if boxes == start.goals:
            return path
        for move in MOVES:
            after = Board(start.rows, start.columns, start.walls, start.goals, set(boxes), player)
            if (
                after.move(move) != "blocked"
                and (state := (after.player, frozenset(after.boxes))) not in seen
            ):
                seen.add(state)
                queue.append((*state, [*path, move]))
    return None


@pytest.mark.parametrize("row", ROWS, ids=lambda row: str(row["level_id"]))
def test_every_example_level_can_be_solved_within_its_budget(row):
    solution = shortest_solution(row["level"])
    assert solution is not None and len(solution) <= row.get("max_turns", MAX_TURNS) * MAX_MOVES


@pytest.mark.parametrize(
    ("level", "problem"),
    [
        ([], "1 to 20 rows"),
        (["#" * 21], "at most 20"),
        (["#@$.x#"], "unknown symbols"),
        (["#@$.@#"], "exactly one player"),
        (["# $.#"], "exactly one player"),
        (["#@$$.#"], "as many goals as boxes"),
        (["#@ .#"], "as many goals as boxes"),
    ],
)
def test_unplayable_levels_are_refused_saying_why(level, problem):
    with pytest.raises(ValueError, match=problem):
        board(level)


def test_walking_pushing_and_blocked_moves():
    room = board(ROOM)
    assert room.move("left") == "moved" and room.player == (2, 1)
    assert room.move("left") == "blocked", "walls stop the player"
    assert [room.move("right"), room.move("right")] == ["moved", "pushed"]
    assert room.boxes == {(2, 4)} and room.move("right") == "blocked", "a box against a wall does not move"
    two = board(["#######", "#@$$ .#", "#    .#", "#######"])
    assert two.move("right") == "blocked", "nor does a box against a box"
    edge = board(["@$.", "   "])
    assert edge.move("up") == "blocked" and edge.move("left") == "blocked", "off the drawing is a wall"


def test_render_shows_goals_under_the_player_and_boxes():
    corridor = board(CORRIDOR)
    assert corridor.render() == CORRIDOR
    assert corridor.move("right") == "pushed" and corridor.solved()
    assert corridor.render() == ["#####", "# @*#", "#####"]
    on_goals = board(["#+$*#", "#   #  "])
    assert on_goals.render() == ["#+$*#", "#   #"], "trailing floor is not drawn"


@pytest.mark.parametrize(
    ("text", "moves", "problem"),
    [
        ("<action>up, Right;DOWN | left</action>", ["up", "right", "down", "left"], None),
        ("<action>up</action> then <action>down down</action>", ["down", "down"], None),
        ("<action>up, jump, left</action>", ["up"], "unknown move 'jump'"),
        ("I go up.", [], "no <action>"),
        ("<action> , </action>", [], "holds no move"),
        ("<action>" + "up " * 25 + "</action>", ["up"] * MAX_MOVES, "only the first 20"),
    ],
)
def test_moves_come_from_the_last_action_tag(text, moves, problem):
    parsed, found = parse_moves(text, MAX_MOVES)
    assert parsed == moves
    assert (found is None) if problem is None else (problem in found)


def test_a_pathological_reply_parses_in_linear_time():
    assert parse_moves("<action>" * 200_000 + "up " * 200_000, MAX_MOVES) == (
        [],
        "no <action>...</action> tag found",
    )


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StartedServer]:
    workdir = tmp_path_factory.mktemp("grl_sokoban")
    with run_resources_server(
        "grl_sokoban_resources_server", workdir, implementation="grl_sokoban", domain="games"
    ) as server:
        yield server


def task(level: list[str], **fields: object) -> dict:
    return {**ROWS[0], "level": level, **fields}


async def play(env: StartedServer, row: dict, *replies: str) -> list:
    session = EnvSession(env.url)
    await session.reset(row)
    return [await session.step(row, response_with(message_item(text))) for text in replies]


async def test_reset_shows_the_rules_the_budget_and_the_board(env):
    observation = (await EnvSession(env.url).reset(task(ROOM, max_turns=4))).observation
    assert "<action>" in observation and "4 turn(s) of at most 20 moves" in observation
    assert observation.endswith("\n\n" + "\n".join(ROOM))


async def test_solving_the_level_earns_1_and_ends_the_episode(env):
    first, last = await play(env, task(ROOM), "<action>up</action>", "<action>right, down, left</action>")
    assert (first.reward, first.terminated, first.truncated) == (0.0, False, False)
    assert "Boxes on goals: 0/1. Turns left: 9." in first.observation
    assert (last.reward, last.terminated, last.truncated) == (1.0, True, False)
    assert last.info == {"moves": ["right (moved)", "down (pushed)"], "problem": None, "solved": True}
    assert last.observation.endswith("#  @ #\n#  * #\n######"), "moves after the solving push are not played"


async def test_running_out_of_turns_truncates_with_0(env):
    steps = await play(env, task(ROOM, max_turns=2), "<action>left</action>", "<action>left</action>")
    assert [(step.reward, step.terminated, step.truncated) for step in steps] == [
        (0.0, False, False),
        (0.0, False, True),
    ]
    assert steps[1].info["moves"] == ["left (blocked)"]


async def test_an_unusable_reply_costs_a_turn_and_moves_nothing(env):
    (step,) = await play(env, task(ROOM), "I would go up, then right.")
    assert step.info == {"moves": [], "problem": "no <action>...</action> tag found", "solved": False}
    assert "Moves: none. Note: no <action>...</action> tag found." in step.observation
    assert "Turns left: 9" in step.observation and step.observation.endswith("\n".join(ROOM))


@pytest.mark.parametrize(
    ("fields", "problem"),
    [
        ({"level": ["#@$$.#"]}, "as many goals as boxes"),
        ({"level": "#@$.#"}, "level"),
        ({"level": None}, "level"),
        ({"max_turns": 0}, "max_turns"),
    ],
)
async def test_a_bad_task_is_refused_with_the_reason(env, fields, problem):
    status, body = await EnvSession(env.url).post("/reset", {**ROWS[0], **fields})
    assert status == 422 and problem in body["error"]["message"]


@pytest.mark.parametrize("rollout", ROLLOUTS, ids=lambda rollout: str(rollout["_ng_task_index"]))
async def test_recorded_rollouts_follow_the_rules(env, rollout):
    """Played again, each recorded reply gets the board that followed it in the recording, and the episode
    ends as recorded (solved in time, or out of turns)."""
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


def test_config_wires_the_agent_the_rows_name_to_the_environment():
    config = yaml.safe_load((FOLDER / "configs" / "grl_sokoban.yaml").read_text())
    instances = {name: validate_server_instance_config(name, block) for name, block in config.items()}
    resources = instances["grl_sokoban_resources_server"].get_inner_run_server_config()
    assert (resources.entrypoint, resources.domain) == ("app.py", "games")
    assert (resources.model_extra["max_turns"], resources.model_extra["max_moves_per_turn"]) == (
        MAX_TURNS,
        MAX_MOVES,
    )
    agent_name = ROWS[0]["agent_ref"]["name"]
    agent = config[agent_name]["responses_api_agents"]["gymnasium_agent"]
    assert (agent["resources_server"]["name"], agent["max_steps"]) == (
        "grl_sokoban_resources_server",
        MAX_TURNS,
    )
    (dataset,) = instances[agent_name].datasets
    assert (install_root() / dataset.jsonl_fpath).read_bytes() == (
        FOLDER / "data" / "example.jsonl"
    ).read_bytes()
