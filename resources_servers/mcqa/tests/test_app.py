"""mcqa over HTTP: each server runs as a real process started from its own app.py."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
import yaml

from nemo_gym.config_types import validate_server_instance_config
from nemo_gym.global_config import install_root
from nemo_gym.testing import (
    BASE_VERIFY_FIELDS,
    EMPTY_AGGREGATE_METRICS,
    StartedServer,
    instance_config,
    post_json,
    run_instance,
    run_resources_server,
)

FOLDER = Path(__file__).resolve().parents[1]
IMPLEMENTATION = "mcqa"


def read_jsonl(name: str) -> list[dict]:
    return [orjson.loads(line) for line in (FOLDER / "data" / name).read_bytes().splitlines() if line.strip()]


ROWS = read_jsonl("example.jsonl")
TEMPLATE_ROWS = read_jsonl("example_with_template_metadata.jsonl")
ROLLOUTS = read_jsonl("example_rollouts.jsonl")
TEMPLATE_ROLLOUTS = read_jsonl("example_rollouts_with_template_metadata.jsonl")
A_RESPONSE = ROLLOUTS[0]["response"]
OPTIONS = [
    {"A": "Karyotyping"},
    {"B": "Polymerase Chain Reaction (PCR)"},
    {"C": "Southern blotting"},
    {"D": None},
]
VERIFY_FIELDS = {
    *BASE_VERIFY_FIELDS,
    "expected_answer",
    "extracted_answer",
}


# ---- servers --------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp(IMPLEMENTATION)


def start(workdir: Path, name: str, **inner: object) -> Iterator[StartedServer]:
    with run_resources_server(
        name, workdir, implementation=IMPLEMENTATION, domain="knowledge", **inner
    ) as started:
        yield started


@pytest.fixture(scope="module")
def server(workdir: Path) -> Iterator[StartedServer]:
    """No config grading mode: each row's own mode applies."""
    yield from start(workdir, "mcqa")


@pytest.fixture(scope="module")
def md_server(workdir: Path) -> Iterator[StartedServer]:
    """The config-only markdown mode, overriding every row."""
    yield from start(workdir, "mcqa_md", grading_mode="lenient_answer_colon_md")


@pytest.fixture(scope="module")
def hurried_server(workdir: Path) -> Iterator[StartedServer]:
    yield from start(workdir, "mcqa_hurried", grading_timeout_seconds=0.3)


# ---- helpers --------------------------------------------------------------------------------------------


def response_saying(*texts: str) -> dict:
    """A recorded response whose output is replaced by one assistant message per text (plus a reasoning item)."""
    response = copy.deepcopy(A_RESPONSE)
    reasoning = {
        "id": "rs_1",
        "type": "reasoning",
        "summary": [{"type": "summary_text", "text": "\\boxed{A}"}],
    }
    messages = [
        {
            "id": f"msg_{index}",
            "type": "message",
            "role": "assistant",
            "status": "completed",
            "content": [{"type": "output_text", "text": text, "annotations": []}],
        }
        for index, text in enumerate(texts)
    ]
    response["output"] = [reasoning, *messages]
    return response


def verify_body(text: str | list[str], expected: str = "B", options: list | None = None, **row: Any) -> dict:
    texts = [text] if isinstance(text, str) else text
    return {
        "responses_create_params": {"input": [{"role": "user", "content": "Pick one."}]},
        "options": OPTIONS if options is None else options,
        "expected_answer": expected,
        "response": response_saying(*texts),
        **row,
    }


async def grade(server: StartedServer, text: str | list[str], **kwargs: Any) -> tuple[float, str | None]:
    status, body = await post_json(server.url + "/verify", verify_body(text, **kwargs))
    assert status == 200, body
    return body["reward"], body["extracted_answer"]


def with_regex(regex: str | list[str]) -> dict:
    return {"template_metadata": {"template_id": "t1", "output_regex": regex, "weight": 0.5}}


# ---- verify: answer shape -------------------------------------------------------------------------------


async def test_verify_answers_only_the_declared_fields_with_the_normalized_gold(server):
    status, body = await post_json(
        server.url + "/verify", verify_body("\\boxed{B}", expected="  b ", uuid="u-1")
    )
    assert status == 200
    assert set(body) == VERIFY_FIELDS, "options, uuid and grading_mode are not echoed"
    assert body["reward"] == 1.0
    assert body["expected_answer"] == "B" and body["extracted_answer"] == "B"
    assert body["responses_create_params"]["input"][0]["type"] == "message"
    assert body["responses_create_params"]["tools"] == []


@pytest.mark.parametrize("text", ["", "   \n\t "])
async def test_empty_output_scores_zero_with_no_answer(server, text):
    assert await grade(server, text) == (0.0, None)


async def test_output_text_joins_every_message_and_ignores_reasoning(server):
    # The reasoning item says \boxed{A}; only the messages count, concatenated without a separator.
    assert await grade(server, ["the answer is \\boxed{", "C}"], expected="C") == (1.0, "C")


async def test_empty_gold_never_rewards(server):
    assert await grade(server, "\\boxed{B}", expected="  ") == (0.0, "B")


# ---- verify: strict_single_letter_boxed -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "extracted"),
    [
        ("so \\boxed{B}", "B"),
        ("\\boxed{ [B] }", "B"),
        ("\\boxed{{B}}", "B"),
        ("\\boxed{(B).}", "B"),
        ("\\boxed{b}", None),
        ("\\boxed{BC}", None),
        ("\\boxed{B: Polymerase Chain Reaction (PCR)}", None),
        ("\\boxed{\\text{B}}", None),
        ("B", None),
        ("**Answer: B**", None),
        ("\\boxed{42} then \\boxed{x+1} and finally \\boxed{B}", "B"),
        ("\\boxed{A} first, \\boxed{B} second", "A"),
        ("\\boxed{B", None),
    ],
)
async def test_strict_mode_takes_the_first_boxed_lone_uppercase_letter(server, text, extracted):
    reward, got = await grade(server, text, grading_mode="strict_single_letter_boxed")
    assert got == extracted
    assert reward == (1.0 if extracted == "B" else 0.0)


async def test_strict_mode_is_the_default(server):
    assert await grade(server, "\\boxed{B}") == (1.0, "B")
    assert await grade(server, "Answer: B") == (0.0, None)


@pytest.mark.parametrize("letter", ["D", "Z"])
async def test_strict_mode_rejects_a_letter_that_is_not_an_option(server, letter):
    # D is listed with a null text, so it is not a choice; Z is not listed at all.
    assert await grade(server, f"\\boxed{{{letter}}}", expected=letter) == (0.0, None)


async def test_option_letters_are_uppercased(server):
    options = [{"a": "x"}, {"b": "y"}]
    assert await grade(server, "\\boxed{B}", options=options) == (1.0, "B")


# ---- verify: lenient_boxed ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "extracted"),
    [
        ("\\boxed{B}", "B"),
        ("\\boxed{polymerase   chain reaction (pcr)}", "B"),
        ("\\boxed{\\text{Polymerase Chain Reaction (PCR)}}", "B"),
        ("\\boxed{The answer is Southern blotting.}", "C"),
        ("\\boxed{Karyotyping or Southern blotting}", None),
        ("\\boxed{Nothing listed}", None),
        ("Polymerase Chain Reaction (PCR)", None),
        ("\\boxed{Southern blotting} and later \\boxed{Karyotyping}", "C"),
    ],
)
async def test_lenient_boxed_falls_back_to_the_one_option_text_inside_the_first_box(server, text, extracted):
    reward, got = await grade(server, text, expected="B", grading_mode="lenient_boxed")
    assert got == extracted
    assert reward == (1.0 if extracted == "B" else 0.0)


# ---- verify: lenient_answer_colon -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "extracted"),
    [
        ("Reasoning...\nAnswer: B", "B"),
        ("ANSWER:b\nmore text", "B"),
        ("Final answer: \\text{B}", "B"),
        ("answer: Polymerase Chain Reaction (PCR)", "B"),
        ("Answer:  southern   BLOTTING.", "C"),
        ("Answer: D", None),
        ("Answer: B because PCR", None),
        ("Answer: A\nAnswer: B", "A"),
        ("\\boxed{B}", None),
        ("**Answer:** B", None),
    ],
)
async def test_lenient_answer_colon_reads_the_line_after_the_first_answer_colon(server, text, extracted):
    reward, got = await grade(server, text, grading_mode="lenient_answer_colon")
    assert got == extracted
    assert reward == (1.0 if extracted == "B" else 0.0)


# ---- verify: config override and lenient_answer_colon_md ------------------------------------------------


@pytest.mark.parametrize(
    ("text", "extracted"),
    [
        ("**Answer: B**", "B"),
        ("**Answer:** B", "B"),
        ("__Answer__: B", "B"),
        ("Answer: B", "B"),
        ("Answer: b", None),
        ("Answer: Polymerase Chain Reaction (PCR)", None),
        ("\\boxed{B}", None),
    ],
)
async def test_config_markdown_mode_overrides_every_row(md_server, text, extracted):
    # The row asks for strict boxed grading, the config's mode wins.
    reward, got = await grade(md_server, text, grading_mode="strict_single_letter_boxed")
    assert got == extracted
    assert reward == (1.0 if extracted == "B" else 0.0)


async def test_the_markdown_mode_is_not_a_row_mode(server):
    status, body = await post_json(
        server.url + "/verify", verify_body("x", grading_mode="lenient_answer_colon_md")
    )
    assert status == 422
    assert ["body", "grading_mode"] in [error["loc"] for error in body["detail"]]


async def test_an_unknown_config_mode_stops_the_server_from_starting(workdir):
    config = {
        "bad": instance_config("resources_servers", IMPLEMENTATION, domain="knowledge", grading_mode="fuzzy")
    }
    with pytest.raises(RuntimeError, match="grading_mode"):
        with run_instance(config, "bad", workdir):
            pass


# ---- verify: template output_regex ----------------------------------------------------------------------


async def test_template_regex_takes_the_last_match_case_insensitively(server):
    regex = "Final Choice:\\s*([A-Za-z])"
    text = "final choice: a ... on reflection FINAL CHOICE: b"
    assert await grade(server, text, **with_regex(regex)) == (1.0, "B")


async def test_template_regex_comes_before_the_grading_mode(server):
    # Strict grading alone would pick the boxed A; the template's regex finds the B.
    text = "\\boxed{A}\nOption Selected: B"
    assert await grade(server, text, **with_regex("Option Selected:\\s*([A-Za-z])")) == (1.0, "B")


async def test_template_regex_accepts_a_letter_that_is_not_an_option(server):
    assert await grade(server, "ANSWER IS Z", expected="Z", **with_regex("ANSWER IS\\s*([A-Za-z])")) == (
        1.0,
        "Z",
    )


async def test_template_regex_works_without_options(server):
    body = verify_body("ANSWER IS c", expected="C", **with_regex("ANSWER IS\\s*([A-Za-z])"))
    del body["options"]
    status, answer = await post_json(server.url + "/verify", body)
    assert status == 200 and (answer["reward"], answer["extracted_answer"]) == (1.0, "C")


async def test_template_regex_match_can_be_an_option_text(server):
    regex = "Choice:\\s*(.+)"
    assert await grade(server, "Choice: southern blotting", expected="C", **with_regex(regex)) == (1.0, "C")


async def test_template_regex_list_is_tried_in_order(server):
    regexes = ["Final Choice:\\s*([A-Za-z])", "ANSWER IS\\s*([A-Za-z])"]
    assert await grade(server, "ANSWER IS B", **with_regex(regexes)) == (1.0, "B")
    assert await grade(server, "ANSWER IS A\nFinal Choice: B", **with_regex(regexes)) == (1.0, "B")


@pytest.mark.parametrize(
    ("letter", "expected"), [("ب", "B"), ("ج", "C"), ("ঢ", "D"), ("Ｂ", "B"), ("অ", "A")]
)
async def test_template_regex_maps_localized_letters(server, letter, expected):
    assert await grade(
        server, f"الإجابة: {letter}", expected=expected, **with_regex("الإجابة:\\s*(\\S)")
    ) == (
        1.0,
        expected,
    )


async def test_invalid_template_regex_falls_back_to_the_grading_mode(server):
    assert await grade(server, "\\boxed{B}", **with_regex("([unclosed")) == (1.0, "B")
    assert await grade(server, "\\boxed{B}", **with_regex(["([unclosed", "nothing here (X)"])) == (1.0, "B")
    uncompilable = ["a{99999999999}", "(" * 1000 + ")" * 1000]  # a huge repeat, nesting too deep
    assert await grade(server, "\\boxed{B}", **with_regex(uncompilable)) == (1.0, "B")


async def test_template_regex_without_a_group_uses_the_whole_match(server):
    assert await grade(server, "pick: x, then B", expected="B", **with_regex("\\b[A-Z]$")) == (1.0, "B")


async def test_template_metadata_of_the_wrong_shape_is_a_422(server):
    status, body = await post_json(
        server.url + "/verify", verify_body("B", template_metadata={"output_regex": 3})
    )
    assert status == 422
    assert any(error["loc"][:3] == ["body", "template_metadata", "output_regex"] for error in body["detail"])


async def test_a_catastrophic_template_regex_scores_zero_instead_of_hanging(hurried_server):
    text = "a" * 60 + "!"
    status, body = await post_json(hurried_server.url + "/verify", verify_body(text, **with_regex("^(a+)+$")))
    assert status == 200
    assert (body["reward"], body["extracted_answer"]) == (0.0, None)
    assert "extract_answer exceeded its" in hurried_server.log()
    # The server is still usable afterwards.
    assert await grade(hurried_server, "\\boxed{B}") == (1.0, "B")


async def test_thousands_of_unclosed_boxes_are_read_within_a_short_deadline(hurried_server):
    # Scanning to the end of the text from each of the 30k openings would take far longer than 0.3 s.
    text = "\\boxed{ " * 30_000 + "\\boxed{B}"
    assert await grade(hurried_server, text) == (1.0, "B")
    assert await grade(hurried_server, text, grading_mode="lenient_boxed") == (1.0, "B")


# ---- verify: request validation -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"expected_answer": None}, "expected_answer"),
        ({"grading_mode": "fuzzy"}, "grading_mode"),
        ({"options": "A, B"}, "options"),
        ({"response": None}, "response"),
    ],
)
async def test_malformed_rows_are_422_naming_the_field(server, change, field):
    body = {**verify_body("\\boxed{B}"), **change}
    status, answer = await post_json(server.url + "/verify", body)
    assert status == 422
    assert any(error["loc"][:2] == ["body", field] for error in answer["detail"])


async def test_a_missing_expected_answer_is_a_422_naming_it(server):
    body = verify_body("\\boxed{B}")
    del body["expected_answer"]
    status, answer = await post_json(server.url + "/verify", body)
    assert status == 422
    assert ["body", "expected_answer"] in [error["loc"] for error in answer["detail"]]


async def test_extra_row_fields_are_accepted_and_not_echoed(server):
    body = verify_body(
        "\\boxed{B}", uuid="x", metadata={"source": "mmlu"}, reward_profiles=[{"pass_rate": 1}]
    )
    status, answer = await post_json(server.url + "/verify", body)
    assert status == 200 and set(answer) == VERIFY_FIELDS and answer["reward"] == 1.0


# ---- recorded rollouts ----------------------------------------------------------------------------------


def user_text(row: dict) -> str:
    return row["responses_create_params"]["input"][0]["content"]


def replay_cases() -> list[tuple[dict, dict]]:
    """Each recorded rollout with the example row it came from (matched by prompt); the rollouts do not
    carry `options` or `template_metadata`, so those come from the row."""
    by_prompt = {user_text(row): row for row in ROWS + TEMPLATE_ROWS}
    return [(by_prompt[user_text(rollout)], rollout) for rollout in ROLLOUTS + TEMPLATE_ROLLOUTS]


@pytest.mark.parametrize(
    ("row", "rollout"), replay_cases(), ids=lambda value: value.get("uuid", "")[:8] or None
)
async def test_recorded_rollouts_reproduce_their_reward_and_answer(server, row, rollout):
    status, body = await post_json(server.url + "/verify", {**row, "response": rollout["response"]})
    assert status == 200, body
    assert body["reward"] == rollout["reward"]
    assert body["extracted_answer"] == rollout["extracted_answer"]
    assert body["expected_answer"] == rollout["expected_answer"]


async def test_seed_session_accepts_every_example_row(server):
    for row in ROWS + TEMPLATE_ROWS:
        assert await post_json(server.url + "/seed_session", row) == (200, {})


# ---- aggregate metrics ----------------------------------------------------------------------------------


def scored(task: int, rollout: int, reward: float, extracted: str | None) -> dict:
    return {
        "responses_create_params": {"input": [{"role": "user", "content": f"task {task}"}]},
        "response": A_RESPONSE,
        "reward": reward,
        "expected_answer": "B",
        "extracted_answer": extracted,
        "_ng_task_index": task,
        "_ng_rollout_index": rollout,
    }


async def test_aggregate_metrics_reports_pass_majority_and_no_answer(server):
    rollouts = [
        scored(0, 0, 1.0, "B"),
        scored(0, 1, 0.0, "A"),
        scored(0, 2, 1.0, "B"),
        scored(1, 0, 0.0, None),
        scored(1, 1, 0.0, "C"),
        scored(1, 2, 0.0, "C"),
    ]
    status, result = await post_json(server.url + "/aggregate_metrics", {"verify_responses": rollouts})
    assert status == 200, result
    metrics, key = result["agent_metrics"], result["key_metrics"]
    assert metrics["pass@1/accuracy"] == pytest.approx(100 * (2 / 3) / 2)
    assert metrics["pass@3/accuracy"] == 50.0
    assert metrics["pass@1[avg-of-3]/accuracy"] == pytest.approx(100 * (2 / 3) / 2)
    assert metrics["pass@1[avg-of-3]/no_answer"] == pytest.approx(100 * (1 / 3) / 2)
    assert metrics["majority@3/accuracy"] == 50.0  # task 0 votes B (right), task 1 votes C (wrong)
    assert metrics["per_sample_aggregate"]["accuracy"] == [50.0, 0.0, 50.0]
    assert "pass@1[avg-of-3]/accuracy/std_dev_across_runs" in metrics
    assert set(key) == {
        "mean/reward",
        "pass@1[avg-of-3]/accuracy",
        "pass@1[avg-of-3]/no_answer",
        "pass@3/no_answer",
        "majority@3/accuracy",
        "pass@1/accuracy",
    }
    assert key["mean/reward"] == pytest.approx(1 / 3)
    assert key["pass@3/no_answer"] == 50.0


async def test_aggregate_metrics_of_nothing_is_empty(server):
    status, result = await post_json(server.url + "/aggregate_metrics", {"verify_responses": []})
    assert status == 200
    assert result == EMPTY_AGGREGATE_METRICS


# ---- config ---------------------------------------------------------------------------------------------


def test_config_declares_the_environment_and_its_agent():
    config = yaml.safe_load((FOLDER / "configs" / f"{IMPLEMENTATION}.yaml").read_text())
    instances = {name: validate_server_instance_config(name, block) for name, block in config.items()}
    resources = config[IMPLEMENTATION]["resources_servers"][IMPLEMENTATION]
    assert resources["entrypoint"] == "app.py" and resources["domain"] == "knowledge"
    assert resources["grading_mode"] is None
    agent = config[f"{IMPLEMENTATION}_simple_agent"]["responses_api_agents"]["simple_agent"]
    assert agent["resources_server"] == {"type": "resources_servers", "name": IMPLEMENTATION}
    assert agent["model_server"] == {"type": "responses_api_models", "name": "policy_model"}
    datasets = {d.name: d for d in instances[f"{IMPLEMENTATION}_simple_agent"].datasets}
    for name in ("example", "example_with_template_metadata"):
        assert datasets[name].type == "example"
        assert (install_root() / datasets[name].jsonl_fpath).read_bytes() == (
            FOLDER / "data" / f"{name}.jsonl"
        ).read_bytes()
