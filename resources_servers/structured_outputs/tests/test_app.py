"""structured_outputs over HTTP (one real server process), plus the pure extraction helpers in-process."""

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

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
from resources_servers.structured_outputs.grading import fenced_json_blocks, grade, strictified

FOLDER = Path(__file__).resolve().parents[1]
ROWS = read_jsonl(FOLDER / "data" / "example.jsonl")
ROLLOUTS = read_jsonl(FOLDER / "data" / "example_rollouts.jsonl")
DEADLINE_S = 1.5
MAX_CHARS = 100_000
PERSON = {
    "type": "object",
    "properties": {"name": {"type": "string"}, "age": {"type": "integer", "minimum": 0}},
}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StartedServer]:
    workdir = tmp_path_factory.mktemp("structured_outputs")
    with run_resources_server(
        "structured_outputs",
        workdir,
        domain="instruction_following",
        grading_timeout_s=DEADLINE_S,
        max_answer_chars=MAX_CHARS,
    ) as started:
        yield started


async def post_verify(
    server: StartedServer, *items: dict, schema: Any = PERSON, **row: Any
) -> tuple[int, Any]:
    schema_str = schema if isinstance(schema, str) else json.dumps(schema)
    body = {"responses_create_params": {"input": "Who?"}, "schema_str": schema_str, **row}
    return await post_json(server.url + "/verify", {**body, "response": response_with(*items)})


async def verify(server: StartedServer, *items: dict, **kwargs: Any) -> dict:
    status, answer = await post_verify(server, *items, **kwargs)
    assert status == 200, answer
    assert answer["reward"] == (1.0 if answer["schema_valid"] else 0.0)
    return answer


async def verify_text(server: StartedServer, text: str, **kwargs: Any) -> dict:
    return await verify(server, message_item(text), **kwargs)


async def test_json_that_validates_earns_1(server):
    answer = await verify_text(server, '{"name": "Ada", "age": 36}')
    assert answer["reward"] == 1.0 and answer["parsed_ok"] and answer["validation_error"] is None
    assert answer["schema_type"] == "json", "the default schema_type is echoed"


async def test_invalid_values_parse_but_do_not_validate(server):
    answer = await verify_text(server, '{"name": "Ada", "age": -1}')
    assert (answer["reward"], answer["parsed_ok"], answer["schema_valid"]) == (0.0, True, False)
    assert answer["validation_error"] == "$.age: -1 is less than the minimum of 0"


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ('{"name": "Ada"}', "'age' is a required property"),
        ('{"name": "Ada", "age": 36, "city": "London"}', "Additional properties are not allowed"),
    ],
)
async def test_schemas_are_made_strict_every_property_required_and_no_others(server, text, why):
    answer = await verify_text(server, text)
    assert answer["reward"] == 0.0 and why in answer["validation_error"]


@pytest.mark.parametrize(
    ("text", "reward"),
    [
        ('Here it is:\n```json\n{"name": "Ada", "age": 36}\n```\nDone.', 1.0),
        ('```\n{"name": "Ada", "age": 36}\n```', 1.0),
        ('```JSON \n{"name": "Ada", "age": 36}\n```', 1.0),
        ('```json\n{"name": "Ada"}\n```\nFixed:\n```json\n{"name": "Ada", "age": 36}\n```', 1.0),
        ('```json\n{"name": "Ada", "age": 36}\n```\nor\n```json\n{"name": "Ada"}\n```', 0.0),
        ('```python\n{"name": "Ada", "age": 36}\n```', 0.0),
        ('```json\n{"name": "Ada", "age": 36}', 0.0),
    ],
)
async def test_the_last_json_fence_is_the_answer_when_the_whole_text_is_not_json(server, text, reward):
    assert (await verify_text(server, text))["reward"] == reward


@pytest.mark.parametrize(
    ("text", "error_start"),
    [
        (
            '{"name": "Ada", "age": 36,}',
            "not JSON: Illegal trailing comma before end of object: line 1 column 26 (char 25)",
        ),
        (
            '{"name": "Ada", "age": [36, ]}',
            "not JSON: Illegal trailing comma before end of array: line 1 column 27 (char 26)",
        ),
        ("NaN", "not JSON: NaN is not a JSON value"),
        ('{"name": "Ada", "age": 1e400}', "not JSON: 1e400 is out of range for a number"),
        ('{"name": "Ada", "age": Infinity}', "not JSON: Infinity is not a JSON value"),
        ("[" * 65 + "]" * 65, "not JSON: nested deeper than 64 levels"),
        ("[" * 200_000, "answer has 200000 characters; the limit is 100000"),
        ("", "not JSON: "),
        ('```json\n{"name": \n```', "the ```json block is not JSON: "),
    ],
)
async def test_unparsable_answers_earn_0_with_a_one_line_reason(server, text, error_start):
    answer = await verify_text(server, text)
    assert (answer["reward"], answer["parsed_ok"], answer["schema_valid"]) == (0.0, False, False)
    assert answer["validation_error"].startswith(error_start) and "\n" not in answer["validation_error"]


async def test_the_answer_is_the_output_text_of_messages_only(server):
    joined = await verify(server, message_item('{"name": "Ada", '), message_item('"age": 36}'))
    assert joined["reward"] == 1.0, "the texts of all messages are joined"
    reasoning = {"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": "{}"}]}
    for items in ([], [reasoning], [function_call_item("submit", {"name": "Ada", "age": 36})]):
        answer = await verify(server, *items)
        assert answer["reward"] == 0.0 and not answer["parsed_ok"]


async def test_other_schema_keywords_and_drafts_apply(server):
    draft7 = {
        "$schema": "http://json-schema.org/draft-07/schema#",
        "type": "array",
        "items": [{"type": "string"}],
    }
    assert (await verify_text(server, '["a", 1]', schema=draft7))["reward"] == 1.0
    pattern = {"type": "string", "pattern": "^[A-Z]{3}-[0-9]{2}$"}
    assert (await verify_text(server, '"ABC-12"', schema=pattern))["reward"] == 1.0
    assert (await verify_text(server, '"abc-12"', schema=pattern))["reward"] == 0.0
    assert (await verify_text(server, "42", schema=True))["reward"] == 1.0


@pytest.mark.parametrize(
    ("schema", "problem"),
    [
        ("{not json", "schema_str: not JSON"),
        ("[1, 2]", "schema_str: a JSON Schema is an object or a boolean"),
        ({"$schema": 5}, "schema_str: $schema must be a string"),
        ({"type": "strin"}, "schema_str: not a valid JSON Schema"),
        ({"type": "string", "pattern": "("}, "schema_str: not a valid JSON Schema"),
        ({"$ref": "https://example.com/missing.json"}, "schema_str: cannot resolve a $ref"),
        ({"not": json.loads("[" * 70 + "]" * 70)}, "schema_str: nested deeper than 64 levels"),
    ],
)
async def test_a_row_whose_schema_is_unusable_is_a_422_naming_schema_str(server, schema, problem):
    status, answer = await post_verify(server, message_item('{"name": "Ada", "age": 36}'), schema=schema)
    assert status == 422 and answer["error"]["type"] == "invalid_row"
    assert answer["error"]["message"].startswith(problem)


@pytest.mark.parametrize(
    ("row", "field"),
    [({"schema_str": None}, "schema_str"), ({"schema_type": "yaml"}, "schema_type")],
)
async def test_a_bad_row_field_is_a_422_naming_it(server, row, field):
    status, answer = await post_verify(server, message_item("{}"), **row)
    assert status == 422 and field in json.dumps(answer["detail"])


async def test_rows_of_older_nemo_gym_name_the_schema_field_schema(server):
    body = {"responses_create_params": {"input": "Who?"}, "schema": json.dumps(PERSON), "schema_type": "json"}
    response = response_with(message_item('{"name": "Ada", "age": 36}'))
    status, answer = await post_json(server.url + "/verify", {**body, "response": response})
    assert status == 200 and answer["reward"] == 1.0 and answer["schema_str"] == body["schema"]


async def test_row_fields_are_echoed_and_cannot_forge_results(server):
    answer = await verify_text(server, "{}", schema_fields_count="2", reward=1.0, schema_valid=True)
    assert answer["schema_fields_count"] == "2"
    assert (answer["reward"], answer["schema_valid"]) == (0.0, False)


async def test_grading_past_its_deadline_earns_0_and_the_server_keeps_answering(server):
    """uniqueItems over objects is quadratic in jsonschema: 4000 items take far longer than the deadline."""
    schema = {"type": "array", "uniqueItems": True, "items": {"type": "object"}}
    slow = json.dumps([{"a": i} for i in range(4000)])
    answer = await verify_text(server, slow, schema=schema)
    assert answer["reward"] == 0.0 and answer["validation_error"] == f"grading exceeded {DEADLINE_S} s"
    assert "exceeded" in server.log()
    assert (await verify_text(server, '{"name": "Ada", "age": 36}'))["reward"] == 1.0


async def test_aggregate_metrics_report_pass_at_k(server):
    results = [
        await verify_text(server, '{"name": "Ada", "age": 36}'),
        await verify_text(server, "no JSON here"),
    ]
    rollouts = [{**result, "_ng_task_index": 0, "_ng_rollout_index": i} for i, result in enumerate(results)]
    status, body = await post_json(server.url + "/aggregate_metrics", {"verify_responses": rollouts})
    assert status == 200, body
    assert body["key_metrics"]["pass@2/accuracy"] == 100.0
    assert body["key_metrics"]["pass@1[avg-of-2]/accuracy"] == 50.0
    assert body["key_metrics"]["mean/parsed_ok"] == 0.5


@pytest.mark.parametrize("index", range(len(ROLLOUTS)))
async def test_recorded_rollouts_verify_to_their_recorded_result(server, index):
    rollout = ROLLOUTS[index]
    status, body = await post_json(server.url + "/verify", rollout)
    assert status == 200, body
    fields = ("reward", "parsed_ok", "schema_valid", "validation_error", "schema_str")
    assert {key: body[key] for key in fields} == {key: rollout[key] for key in fields}


def test_recorded_rollouts_mix_right_and_wrong_answers():
    assert sorted(rollout["reward"] for rollout in ROLLOUTS) == [0.0, 0.0, 1.0, 1.0, 1.0]
    assert [rollout["schema_str"] for rollout in ROLLOUTS] == [row["schema_str"] for row in ROWS]


def test_config_declares_the_environment_and_its_agent():
    _, resources, _ = check_environment_config(FOLDER, "structured_outputs", "instruction_following")
    assert resources.model_extra["strictify_schema"] is True


def test_fenced_blocks_are_closed_and_labelled_json_or_not_at_all():
    text = "a```json\n1```b```\n2```c```yaml\n3```d```json\n4"
    assert fenced_json_blocks(text) == ["1", "2"]
    assert fenced_json_blocks("```json 1```") == [], "the label line must end before the content"


def test_strictified_copies_and_applies_to_nested_object_schemas():
    schema = {"type": "object", "properties": {"inner": {"properties": {"x": {}}}}, "required": []}
    strict = strictified(schema)
    assert strict["required"] == ["inner"] and strict["additionalProperties"] is False
    assert strict["properties"]["inner"]["required"] == ["x"]
    assert schema["required"] == [] and "additionalProperties" not in schema, "the row's schema is untouched"


def test_without_strictify_only_the_schema_own_rules_apply():
    lenient = grade(json.dumps(PERSON), '{"name": "Ada", "extra": 1}', False, True, MAX_CHARS, 64)
    assert lenient.schema_valid
    assert not grade(
        json.dumps(PERSON), '{"name": "Ada", "extra": 1}', True, True, MAX_CHARS, 64
    ).schema_valid


def test_fences_can_be_turned_off():
    text = '```json\n{"name": "Ada", "age": 36}\n```'
    assert grade(json.dumps(PERSON), text, True, True, MAX_CHARS, 64).schema_valid
    assert not grade(json.dumps(PERSON), text, True, False, MAX_CHARS, 64).parsed_ok
