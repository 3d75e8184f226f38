"""structeval over HTTP (one real server process), plus extraction and path lookup in-process."""

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from nemo_gym.testing import (
    StartedServer,
    check_environment_config,
    message_item,
    post_json,
    read_jsonl,
    response_with,
    run_resources_server,
)
from resources_servers.structeval.grading import extract_document, parse_xml, path_exists, path_tokens

FOLDER = Path(__file__).resolve().parents[1]
ROWS = read_jsonl(FOLDER / "data" / "example.jsonl")
ROLLOUTS = read_jsonl(FOLDER / "data" / "example_rollouts.jsonl")
DEADLINE_S = 1.5
MAX_CHARS = 1_000_000

DOCUMENTS = {
    "json": '{"order": {"id": 7, "items": [{"sku": "A1"}, {"sku": "B2"}]}}',
    "yaml": "order:\n  id: 7\n  items:\n    - sku: A1\n    - sku: B2\n",
    "toml": 'order.id = 7\n[[order.items]]\nsku = "A1"\n[[order.items]]\nsku = "B2"\n',
    "xml": '<order id="7"><items><item sku="A1"/><item sku="B2"/></items></order>',
}
ORDER_PATHS = ["order.id", "order.items[1].sku", "order.items.*.sku", "order.total"]
XML_PATHS = ["order.@id", "order.items.item[1].@sku", "order.items.item.*.sku", "order.total"]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StartedServer]:
    workdir = tmp_path_factory.mktemp("structeval")
    with run_resources_server(
        "structeval",
        workdir,
        domain="instruction_following",
        grading_timeout_s=DEADLINE_S,
        max_output_chars=MAX_CHARS,
    ) as started:
        yield started


async def post_verify(server: StartedServer, *items: dict, **row: Any) -> tuple[int, Any]:
    body = {"responses_create_params": {"input": "Write it."}, **row, "response": response_with(*items)}
    return await post_json(server.url + "/verify", body)


async def verify(server: StartedServer, text: str, output_type: str, paths: list[str], **row: Any) -> dict:
    status, answer = await post_verify(
        server, message_item(text), output_type=output_type, raw_output_metric=paths, **row
    )
    assert status == 200, answer
    return answer


@pytest.mark.parametrize("output_type", sorted(DOCUMENTS))
async def test_reward_weighs_validity_0_2_and_the_share_of_paths_found_0_8(server, output_type):
    paths = XML_PATHS if output_type == "xml" else ORDER_PATHS
    answer = await verify(server, DOCUMENTS[output_type], output_type, paths)
    assert (answer["render_score"], answer["key_validation_score"]) == (1.0, 0.75)
    assert answer["reward"] == 0.8, "round(0.2 + 0.8 * 0.75, 2)"
    assert answer["error_type"] is None


async def test_csv_paths_name_headers_or_walk_the_rows(server):
    text = "sku,qty\nA1,3\nB2,5\n"
    paths = ["csv::sku", "csv::qty", "csv::price", "csv_rows[1].qty"]
    answer = await verify(server, text, "csv", paths)
    assert (answer["key_validation_score"], answer["reward"]) == (0.75, 0.8)


async def test_without_paths_the_reward_is_validity_alone(server):
    assert (await verify(server, DOCUMENTS["yaml"], "yaml", []))["reward"] == 1.0
    assert (await verify(server, "order: [", "yaml", []))["reward"] == 0.0


@pytest.mark.parametrize(
    ("text", "output_type", "error"),
    [
        ('{"order": {"id": 7,}}', "json", "JSONDecodeError"),
        ("Sure, here you go!", "yaml", "the document is a str, not an object or array"),
        ("42", "json", "the document is a int, not an object or array"),
        ("{}", "json", "the document is empty"),
        ("a = 1\na = 2\n", "toml", "TOMLDecodeError"),
        ("<order><id>7</order>", "xml", "ParseError"),
        (
            '<!DOCTYPE l [<!ENTITY l "lol">]><order>&l;</order>',
            "xml",
            "DOCTYPE and ENTITY declarations are refused",
        ),
        ("sku,qty\nA1,3,extra\n", "csv", "row 2 has 3 fields; the header has 2"),
        ("sku,qty\n", "csv", "a header row and at least one data row"),
        ('sku,qty\n"A1,3\n', "csv", "Error"),
        ("a: &a [x]\nb: *missing\n", "yaml", "ComposerError"),
    ],
)
async def test_invalid_documents_render_0_and_earn_0(server, text, output_type, error):
    answer = await verify(server, text, output_type, ["order.id"])
    assert (answer["reward"], answer["render_score"], answer["key_validation_score"]) == (0.0, 0.0, 0.0)
    assert answer["error_type"] == "parse_error" and error in answer["error_message"]
    assert "\n" not in answer["error_message"]


async def test_billion_laughs_is_refused_before_any_expansion(server):
    entities = "".join(f'<!ENTITY l{i} "{f"&l{i - 1};" * 10}">' for i in range(1, 10))
    bomb = f'<?xml version="1.0"?><!DOCTYPE b [<!ENTITY l0 "lol">{entities}]><b>&l9;</b>'
    answer = await verify(server, bomb, "xml", ["b"])
    assert answer["reward"] == 0.0 and "refused" in answer["error_message"]


@pytest.mark.parametrize(
    ("text", "reward"),
    [
        (f"Here it is:\n```json\n{DOCUMENTS['json']}\n```\nThanks.", 0.8),
        (f"```\n{DOCUMENTS['json']}", 0.8),
        (f"<|BEGIN_CODE|>\n{DOCUMENTS['json']}\n<|END_CODE|>", 0.8),
        (f"<|BEGIN_CODE|>{DOCUMENTS['json']}", 0.8),
        (f"```json\n{DOCUMENTS['json']}\n```\n```json\n{{}}\n```", 0.8),
        (f"Here it is: {DOCUMENTS['json']}", 0.0),
    ],
)
async def test_the_document_is_the_first_fence_or_the_code_markers(server, text, reward):
    assert (await verify(server, text, "json", ORDER_PATHS))["reward"] == reward


async def test_raw_output_score_counts_paths_written_in_the_raw_text(server):
    answer = await verify(server, "order.id is here; not json", "json", ["order.id", "order.total"])
    assert answer["raw_output_score"] == 0.5 and answer["reward"] == 0.0


async def test_no_text_is_an_empty_response(server):
    reasoning = {"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": "{}"}]}
    status, answer = await post_verify(server, reasoning, output_type="json", raw_output_metric=["a"])
    assert status == 200 and answer["reward"] == 0.0 and answer["error_type"] == "empty_response"


async def test_output_type_is_case_insensitive_and_row_fields_are_echoed(server):
    answer = await verify(
        server, DOCUMENTS["json"], "JSON", ["order.id"], task_id="t1", rendering=False, query="q"
    )
    assert answer["output_type"] == "json" and answer["reward"] == 1.0
    assert (answer["task_id"], answer["query"], answer["rendering"]) == ("t1", "q", False)
    forged = await verify(server, "nope", "json", ["order.id"], reward=1.0, render_score=1.0)
    assert (forged["reward"], forged["render_score"]) == (0.0, 0.0)


@pytest.mark.parametrize(
    ("row", "field"),
    [
        ({"output_type": "html", "raw_output_metric": []}, "output_type"),
        ({"raw_output_metric": []}, "output_type"),
        ({"output_type": "json", "raw_output_metric": "order.id"}, "raw_output_metric"),
    ],
)
async def test_a_bad_row_is_a_422_naming_the_field(server, row, field):
    status, answer = await post_verify(server, message_item("{}"), **row)
    assert status == 422 and field in json.dumps(answer["detail"])


async def test_an_answer_over_the_size_limit_is_not_parsed(server):
    answer = await verify(server, "[" + "1," * MAX_CHARS + "1]", "json", ["[0]"])
    assert answer["error_type"] == "too_long" and answer["reward"] == 0.0


async def test_grading_past_its_deadline_earns_0_and_the_server_keeps_answering(server):
    """Each wildcard multiplies the walk: 60**4 lookups through a YAML alias chain take far too long."""
    bomb = "a: &a [" + ",".join(["x"] * 60) + "]\nb: &b [" + ",".join(["*a"] * 60) + "]\n"
    bomb += "c: &c [" + ",".join(["*b"] * 60) + "]\nd: [" + ",".join(["*c"] * 60) + "]\n"
    answer = await verify(server, bomb, "yaml", ["d.*.*.*.*.missing"])
    assert answer["error_type"] == "timeout" and answer["reward"] == 0.0
    assert "exceeded" in server.log()
    assert (await verify(server, DOCUMENTS["json"], "json", ["order.id"]))["reward"] == 1.0


async def test_aggregate_metrics_break_scores_down_by_format(server):
    results = [
        await verify(server, DOCUMENTS["json"], "json", ["order.id"], input_type="Text"),
        await verify(server, DOCUMENTS["yaml"], "yaml", ["order.id", "order.x"], input_type="CSV"),
    ]
    rollouts = [{**result, "_ng_task_index": i, "_ng_rollout_index": 0} for i, result in enumerate(results)]
    status, body = await post_json(server.url + "/aggregate_metrics", {"verify_responses": rollouts})
    assert status == 200, body
    metrics = body["key_metrics"]
    assert metrics["mean/reward_output_json"] == 1.0 and metrics["mean/reward_output_yaml"] == 0.6
    assert metrics["mean/key_validation_score_yaml"] == 0.5 and metrics["mean/render_score_yaml"] == 1.0
    assert metrics["mean/reward_input_csv"] == 0.6 and metrics["mean/reward"] == 0.8


@pytest.mark.parametrize("index", range(len(ROLLOUTS)))
async def test_recorded_rollouts_verify_to_their_recorded_result(server, index):
    rollout = ROLLOUTS[index]
    status, body = await post_json(server.url + "/verify", rollout)
    assert status == 200, body
    fields = ("reward", "render_score", "key_validation_score", "raw_output_score", "error_type", "task_id")
    assert {key: body[key] for key in fields} == {key: rollout[key] for key in fields}


def test_recorded_rollouts_cover_every_format_and_a_spread_of_rewards():
    assert sorted(rollout["output_type"] for rollout in ROLLOUTS) == ["csv", "json", "toml", "xml", "yaml"]
    assert sorted(rollout["reward"] for rollout in ROLLOUTS) == [0.0, 0.73, 1.0, 1.0, 1.0]
    assert [rollout["task_id"] for rollout in ROLLOUTS] == [row["task_id"] for row in ROWS]


def test_config_declares_the_environment_and_its_agent():
    check_environment_config(FOLDER, "structeval", "instruction_following")


@pytest.mark.parametrize(
    ("path", "tokens"),
    [
        ("a.b[0].c", ["a", "b", "[0]", "c"]),
        ("`a.b`.c[*]", ["a.b", "c", "[*]"]),
        ("[1][2]", ["[1]", "[2]"]),
        ("a[0", None),
    ],
)
def test_path_tokens(path, tokens):
    assert path_tokens(path) == tokens


def test_paths_follow_keys_indexes_wildcards_and_xml_attributes():
    document = {"a": {"b.c": [{"d": 1}, {"e": None}]}}
    assert path_exists(document, "a.`b.c`[1].e")
    assert path_exists(document, "a.`b.c`.*.d") and not path_exists(document, "a.`b.c`.*.f")
    assert not path_exists(document, "a.`b.c`[2]") and not path_exists(document, "a.`b.c`[-1]")
    assert not path_exists(document, "a[0") and not path_exists(document, "csv::a")
    xml = parse_xml('<r id="1"><k>v</k><k>w</k>tail</r>')
    assert xml == {"r": {"@id": "1", "k": ["v", "w"], "#text": "tail"}}
    assert path_exists(xml, "r.@id") and path_exists(xml, "r.id") and path_exists(xml, "r.k[1]")


def test_extract_document_prefers_a_fence_over_code_markers():
    assert extract_document("<|BEGIN_CODE|>a<|END_CODE|>\n```\nb\n```") == "b"
    assert extract_document("x ```inline``` y\n```yaml\nc\n```") == "c"
    assert extract_document("  plain  ") == "plain"
