"""single_step_tool_use_with_argument_comparison over HTTP (one real server with the shipped comparator
settings), plus the comparison in-process for the other settings."""

import json
import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from nemo_gym.testing import (
    StartedServer,
    check_environment_config,
    function_call_item,
    message_item,
    post_json,
    read_jsonl,
    response_with,
    run_resources_server,
)
from resources_servers.single_step_tool_use_with_argument_comparison.argument_comparison import (
    Action,
    StepRewardCategory,
    ToolCallComparatorConfig,
    grade_action,
    string_similarity,
)

NAME = "single_step_tool_use_with_argument_comparison"
FOLDER = Path(__file__).resolve().parents[1]
ROWS = read_jsonl(FOLDER / "data" / "example.jsonl")
ROLLOUTS = read_jsonl(FOLDER / "data" / "example_rollouts.jsonl")
SHIPPED = yaml.safe_load((FOLDER / "configs" / f"{NAME}.yaml").read_text())[NAME]["resources_servers"][NAME]
DEADLINE_S = 1.0
TICKET = ROWS[2]  # create_ticket(customer_id, category, summary, priority)
TICKET_ARGUMENTS = json.loads(TICKET["expected_action"]["arguments"])
GREETING = ROWS[1]  # expects a chat message
Category = StepRewardCategory
WORD_COUNT = ToolCallComparatorConfig()
DIFFLIB_STRICT = ToolCallComparatorConfig(string_similarity="difflib")


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StartedServer]:
    workdir = tmp_path_factory.mktemp(NAME)
    inner = {**SHIPPED, "grading_timeout_s": DEADLINE_S}
    with run_resources_server(
        NAME, workdir, **{k: v for k, v in inner.items() if k != "entrypoint"}
    ) as started:
        yield started


async def verify(server: StartedServer, row: dict, *items: dict, **changes: Any) -> dict:
    body = {**row, **changes, "response": response_with(*items)}
    status, answer = await post_json(server.url + "/verify", body)
    assert status == 200, answer
    return answer


def ticket_call(**changes: Any) -> dict:
    return function_call_item("create_ticket", {**TICKET_ARGUMENTS, **changes})


async def test_the_expected_call_earns_1_whatever_the_key_order(server):
    reordered = dict(reversed(list(TICKET_ARGUMENTS.items())))
    answer = await verify(server, TICKET, function_call_item("create_ticket", reordered))
    assert (answer["reward"], answer["category"], answer["name_match"]) == (
        1.0,
        Category.EXPECTED_TOOL_CALL,
        True,
    )
    assert answer["argument_scores"] == dict.fromkeys(TICKET_ARGUMENTS, 1.0)


async def test_strings_match_ignoring_case_and_whitespace(server):
    answer = await verify(server, TICKET, ticket_call(summary="  CHARGED twice for\nthe March   invoice "))
    assert answer["reward"] == 1.0


async def test_a_close_string_earns_the_mean_argument_score(server):
    answer = await verify(server, TICKET, ticket_call(summary="Charged twice for the March invoices"))
    ratio = 2 * 35 / (35 + 36)
    assert answer["argument_scores"]["summary"] == pytest.approx(ratio)
    assert (
        answer["reward"] == pytest.approx((3 + ratio) / 4) and answer["category"] == Category.CLOSE_TOOL_CALL
    )


@pytest.mark.parametrize(
    ("changes", "category"),
    [
        ({"summary": "Router is broken"}, Category.ARGUMENT_VALUE_DIFFERENT),
        ({"priority": "low"}, Category.ARGUMENT_VALUE_DIFFERENT),
        ({"priority": 3}, Category.ARGUMENT_VALUE_TYPE_DIFFERENT),
        ({"category": ["billing"]}, Category.ARGUMENT_VALUE_TYPE_DIFFERENT),
        ({"notes": "x"}, Category.ARGUMENT_OBJECT_KEYS_DIFFERENT),
    ],
)
async def test_a_wrong_argument_earns_0_with_its_category(server, changes, category):
    answer = await verify(server, TICKET, ticket_call(**changes))
    assert (answer["reward"], answer["category"], answer["name_match"]) == (0.0, category, True)


async def test_a_missing_argument_scores_0_and_extra_ones_are_listed(server):
    arguments = {key: value for key, value in TICKET_ARGUMENTS.items() if key != "priority"} | {
        "urgent": True
    }
    answer = await verify(server, TICKET, function_call_item("create_ticket", arguments))
    assert answer["category"] == Category.ARGUMENT_OBJECT_KEYS_DIFFERENT and answer["reward"] == 0.0
    assert answer["argument_scores"]["priority"] == 0.0 and answer["argument_scores"]["urgent"] == 0.0


@pytest.mark.parametrize("arguments", ["{not json", "[1, 2]", '"text"', ""])
async def test_arguments_that_are_not_a_json_object_earn_0(server, arguments):
    answer = await verify(server, TICKET, function_call_item("create_ticket", arguments))
    assert (answer["reward"], answer["category"]) == (0.0, Category.ARGUMENTS_DECODE_ERROR)


async def test_the_first_function_call_is_the_action(server):
    first_wrong = await verify(
        server, TICKET, function_call_item("lookup_customer", {"email": "x"}), ticket_call()
    )
    assert (first_wrong["category"], first_wrong["name_match"]) == (Category.UNEXPECTED_TOOL, False)
    message_then_call = await verify(server, TICKET, message_item("Opening a ticket."), ticket_call())
    assert message_then_call["reward"] == 1.0, "a call anywhere outranks a message"


@pytest.mark.parametrize(
    ("row", "items", "reward", "category"),
    [
        (
            GREETING,
            [message_item("Sure, first let me verify you.")],
            1.0,
            Category.EXPECTED_CHAT_MESSAGE_FOUND,
        ),
        (GREETING, [function_call_item("get_balance", {})], 0.0, Category.NO_EXPECTED_CHAT_MESSAGE),
        (TICKET, [message_item("I'll open a ticket.")], 0.0, Category.NO_EXPECTED_TOOL_CALL),
        (TICKET, [], 0.0, Category.NO_ACTION_FOUND),
        (TICKET, [message_item("  ")], 0.0, Category.NO_ACTION_FOUND),
        (
            GREETING,
            [{"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": "hm"}]}],
            0.0,
            Category.NO_ACTION_FOUND,
        ),
    ],
)
async def test_messages_and_missing_actions(server, row, items, reward, category):
    answer = await verify(server, row, *items)
    assert (answer["reward"], answer["category"], answer["name_match"]) == (reward, category, None)
    assert answer["argument_scores"] == {}


async def test_row_fields_are_echoed_and_cannot_forge_results(server):
    answer = await verify(server, TICKET, message_item("no"), reward=1.0, category="x", trace="t-1")
    assert (answer["reward"], answer["category"], answer["trace"], answer["id"]) == (
        0.0,
        Category.NO_EXPECTED_TOOL_CALL,
        "t-1",
        TICKET["id"],
    )
    assert answer["expected_action"] == TICKET["expected_action"]


@pytest.mark.parametrize(
    "expected_action",
    [
        {"type": "function_call", "name": "f", "arguments": "[1]"},
        {"type": "function_call", "name": "f", "arguments": "{oops"},
        {"type": "function_call", "name": "f"},
        {"type": "function_call_batch", "calls": []},
        {"type": "message"},
        None,
    ],
)
async def test_a_bad_expected_action_is_a_422_naming_it(server, expected_action):
    body = {**TICKET, "expected_action": expected_action, "response": response_with(message_item("hi"))}
    status, answer = await post_json(server.url + "/verify", body)
    assert status == 422 and all(
        error["loc"][:2] == ["body", "expected_action"] for error in answer["detail"]
    )


async def test_a_comparison_past_its_deadline_earns_0_and_the_server_keeps_answering(server):
    rng = random.Random(7)
    long_expected = "".join(rng.choice("abcdefgh ") for _ in range(60_000))
    long_actual = "".join(rng.choice("abcdefgh ") for _ in range(60_000))
    answer = await verify(
        server,
        TICKET,
        ticket_call(summary=long_actual),
        expected_action={
            **TICKET["expected_action"],
            "arguments": json.dumps({**TICKET_ARGUMENTS, "summary": long_expected}),
        },
    )
    assert (answer["reward"], answer["category"]) == (0.0, Category.ARGUMENT_VALUE_DIFFERENT)
    assert "exceeded" in server.log()
    assert (await verify(server, TICKET, ticket_call()))["reward"] == 1.0


async def test_aggregate_metrics_report_pass_at_k_and_category_shares(server):
    results = [
        await verify(server, TICKET, ticket_call()),
        await verify(server, TICKET, ticket_call(priority="low")),
    ]
    rollouts = [{**result, "_ng_task_index": 0, "_ng_rollout_index": i} for i, result in enumerate(results)]
    status, body = await post_json(server.url + "/aggregate_metrics", {"verify_responses": rollouts})
    assert status == 200, body
    assert body["key_metrics"]["pass@2/accuracy"] == 100.0
    assert body["agent_metrics"]["category/EXPECTED_TOOL_CALL"] == 0.5
    assert body["agent_metrics"]["category/ARGUMENT_VALUE_DIFFERENT"] == 0.5


@pytest.mark.parametrize("index", range(len(ROLLOUTS)))
async def test_recorded_rollouts_verify_to_their_recorded_result(server, index):
    rollout = ROLLOUTS[index]
    status, body = await post_json(server.url + "/verify", rollout)
    assert status == 200, body
    fields = ("reward", "category", "name_match", "argument_scores", "expected_action", "id")
    assert {key: body[key] for key in fields} == {key: rollout[key] for key in fields}


def test_recorded_rollouts_mix_exact_close_and_wrong_steps():
    assert [round(rollout["reward"], 2) for rollout in ROLLOUTS] == [1.0, 0.0, 0.97, 0.0, 1.0]


def test_config_declares_the_environment_and_a_one_step_agent():
    _, resources, agent = check_environment_config(FOLDER, NAME, "agent")
    assert resources.model_extra["tool_call_comparator_config"]["string_similarity"] == "difflib"
    assert agent["max_steps"] == 1


def test_an_unknown_comparator_key_stops_the_server_at_startup(tmp_path):
    inner = {"domain": "agent", "tool_call_comparator_config": {"allow_superset": True}}
    with pytest.raises(RuntimeError, match="allow_superset"):
        with run_resources_server(NAME, tmp_path, **inner):
            pass


EXPECTED = Action("function_call", "create_ticket", json.dumps(TICKET_ARGUMENTS))


def grade(config: ToolCallComparatorConfig, **changes: Any) -> Any:
    actual = Action("function_call", "create_ticket", json.dumps({**TICKET_ARGUMENTS, **changes}))
    return grade_action(EXPECTED, actual, config)


def test_word_count_is_nemo_gyms_measure_shared_words_over_all_words():
    assert string_similarity("a b c d", "a b x y", WORD_COUNT) == (0.5, True), (
        "2 / 8 ≥ 0.1; score is twice that"
    )
    assert string_similarity("a b", "x y", WORD_COUNT) == (0.0, False)
    assert string_similarity("Paris", "paris ", WORD_COUNT) == (1.0, True), "normalized first"
    assert string_similarity("Paris", "Lyon", WORD_COUNT) == (0.0, False), "one-word strings must be equal"
    close = ToolCallComparatorConfig(word_count_similarity_threshold=0.3)
    assert string_similarity("a b c d", "a b x y", close) == (0.5, False)


def test_without_partial_credit_a_close_call_earns_1_as_in_nemo_gym():
    result = grade(WORD_COUNT, summary="Customer was charged twice for the March invoice")
    assert (result.reward, result.category) == (1.0, Category.EXPECTED_TOOL_CALL)
    assert result.argument_scores["summary"] < 1.0
    strict = grade(DIFFLIB_STRICT, summary="Charged twice for the March invoices")
    assert (strict.reward, strict.category) == (1.0, Category.EXPECTED_TOOL_CALL)


@pytest.mark.parametrize(
    ("expected", "actual", "reward"),
    [
        (3, 3.0, 1.0),
        (0.1 + 0.2, 0.3, 1.0),
        (3, 3.01, 0.0),
        (True, 1, 0.0),
        (None, None, 1.0),
        (None, "", 0.0),
        ([1, "a b"], [1, "A  B"], 1.0),
        ([1, 2], [2, 1], 0.0),
        ({"x": {"y": [True]}}, {"x": {"y": [True]}}, 1.0),
        ({"x": {"y": [True]}}, {"x": {"z": [True]}}, 0.0),
    ],
)
def test_non_string_values_compare_exactly_numbers_within_the_tolerance(expected, actual, reward):
    expected_action = Action("function_call", "f", json.dumps({"v": expected}))
    result = grade_action(
        expected_action, Action("function_call", "f", json.dumps({"v": actual})), WORD_COUNT
    )
    assert result.reward == reward


def test_deeply_nested_arguments_are_a_mismatch_not_a_crash():
    deep = json.dumps({"v": json.loads("[" * 900 + "]" * 900)})
    result = grade_action(Action("function_call", "f", deep), Action("function_call", "f", deep), WORD_COUNT)
    assert result.category in (Category.EXPECTED_TOOL_CALL, Category.ARGUMENT_VALUE_DIFFERENT)
