"""format_verification: each check type in-process (cheap); validation, grading modes, the deadline, NeMo Gym
`verifier` rows, metrics and the shipped data over HTTP against one real server (a second one for the
config override)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pydantic import TypeAdapter, ValidationError

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
from resources_servers.format_verification.checks import Check, heading_titles, run_checks

FOLDER = Path(__file__).resolve().parents[1]
ROWS = read_jsonl(FOLDER / "data" / "example.jsonl")
ROLLOUTS = read_jsonl(FOLDER / "data" / "example_rollouts.jsonl")
A_RESPONSE = ROLLOUTS[0]["response"]
CITATIONS_ROW = ROWS[0]  # fraction: citations (2 of 3 sources), <= 120 words, <= 5 sentences
REGEX_VERIFIER_ROW = ROWS[3]  # NeMo Gym verifier: 4 numbered lines
MARKERS_VERIFIER_ROW = ROWS[4]  # NeMo Gym verifier: [ref:1] and [ref:2], no other [ref:n]
DEADLINE_S = 2.0
CHECKS = TypeAdapter(list[Check])


def verdicts(text: str, *checks: dict) -> list[bool]:
    return [result["passed"] for result in run_checks(text, CHECKS.validate_python(list(checks)))]


def details(text: str, check: dict) -> dict:
    return run_checks(text, CHECKS.validate_python([check]))[0]["details"]


# ---- each check type (pure functions) -------------------------------------------------------------------


def test_regex_must_and_must_not_match_with_flags():
    assert verdicts(
        "Intro\n- first item",
        {"type": "regex", "pattern": r"^- \w"},  # no m flag: ^ is the start of the text
        {"type": "regex", "pattern": r"^- \w", "flags": "m"},
        {"type": "regex", "pattern": "INTRO", "flags": "i"},
        {"type": "regex", "pattern": "probably", "must_match": False},
        {"type": "regex", "pattern": "item", "must_match": False},
    ) == [False, True, True, True, False]
    assert details("say hi", {"type": "regex", "pattern": "h."}) == {"matched": True, "match": "hi"}


def test_line_regex_counts_lines_matching_any_pattern_once():
    check = {"type": "line_regex", "patterns": [r"^\d+\.", r"^- "], "min_matches": 3, "max_matches": 3}
    assert verdicts("1. a\n- b\n2. c", check) == [True]
    assert verdicts("1. a - b\n2. c", check) == [False]  # one line matching twice counts once
    assert verdicts("1. a\n2. b\n3. c\n- d", check) == [False]  # above max_matches
    assert details("1. a", check) == {"matching_lines": 1, "min_matches": 3, "max_matches": 3}


@pytest.mark.parametrize(
    ("text", "cited", "out_of_range", "passed"),
    [
        ("Heat moves [1]. COP above 1 [2, 3].", [1, 2, 3], [], True),
        ("Only one source [1] and again [1].", [1], [], False),  # one distinct source
        ("See [1] and [4].", [1, 4], [4], False),  # source 4 does not exist
        ("See [0] and [2].", [0, 2], [0], False),
        ("Links [a] and [ 2 ] and [1,3].", [1, 2, 3], [], True),
    ],
)
def test_citations_count_distinct_sources_within_range(text, cited, out_of_range, passed):
    check = {"type": "citations", "min_distinct": 2, "max_distinct": 3, "num_sources": 3}
    assert details(text, check) == {"cited": cited, "out_of_range": out_of_range}
    assert verdicts(text, check) == [passed]


def test_markers_need_every_expected_one_and_no_spurious_match():
    check = {"type": "markers", "expected": ["[ref:1]", "[ref:2]"], "spurious_patterns": [r"\[ref:\d+\]"]}
    assert verdicts("a [ref:1] b [ref:2]", check) == [True]
    assert details("a [ref:1] b [ref:3]", check) == {
        "expected": ["[ref:1]", "[ref:2]"],
        "missing": ["[ref:2]"],
        "spurious": ["[ref:3]"],
    }


@pytest.mark.parametrize(
    ("text", "words", "sentences"),
    [
        ("Don't panic: it's a well-known trick. Right?", 7, 2),
        ("Pi is 3.14 and e is 2.72! Done.", 8, 2),  # decimals do not end sentences
        ('He said "stop." Then left', 5, 2),
        ("no final punctuation", 3, 1),
        ("", 0, 0),
        ("... !!! ???", 0, 0),
    ],
)
def test_word_and_sentence_counts(text, words, sentences):
    assert details(text, {"type": "word_count", "min": 0}) == {"count": words}
    assert details(text, {"type": "sentence_count", "min": 0}) == {"count": sentences}


def test_count_bounds_are_inclusive():
    assert verdicts("one two three", {"type": "word_count", "min": 3, "max": 3}) == [True]
    assert verdicts("one two three", {"type": "word_count", "max": 2}) == [False]
    assert verdicts("One. Two.", {"type": "sentence_count", "min": 3}) == [False]


def test_headings_are_markdown_headings_or_wholly_bold_lines():
    text = (
        "# Title #\n##Not a heading\n#hashtag\n**Summary:**\n__Impact__\n**Bold** and **more**\n####### seven"
    )
    assert heading_titles(text) == ["Title", "Summary:", "Impact"]


def test_sections_must_all_appear_in_order_unless_told_otherwise():
    text = "## 1. Summary\ntext\n### Root cause:\ntext\n**Impact**\ntext"
    in_order = {"type": "sections", "headers": ["summary", "Impact", "Root Cause"]}
    assert verdicts(text, in_order, {**in_order, "in_order": False}) == [False, True]
    assert details(text, in_order) == {
        "found": ["1. Summary", "Root cause:", "Impact"],
        "missing": [],
        "in_order": False,
    }
    assert details(text, {"type": "sections", "headers": ["Summary", "Action items"]})["missing"] == [
        "Action items"
    ]


@pytest.mark.parametrize(
    ("text", "allow_fence", "passed", "missing"),
    [
        ('{"title": "Dune", "year": 1965}', False, True, []),
        ('  {"title": "Dune"}\n', False, False, ["year"]),
        ('```json\n{"title": "Dune", "year": 1965}\n```', False, False, ["title", "year"]),
        ('```json\n{"title": "Dune", "year": 1965}\n```', True, True, []),
        ('Here it is: {"title": "Dune", "year": 1965}', False, False, ["title", "year"]),
        ('{"title": NaN, "year": 1}', False, False, ["title", "year"]),  # not JSON
        ('["title", "year"]', False, False, ["title", "year"]),  # valid JSON, not an object
        ("[" * 100_000, False, False, ["title", "year"]),  # too deep: invalid, not a crash
    ],
)
def test_json_only(text, allow_fence, passed, missing):
    check = {"type": "json_only", "required_keys": ["title", "year"], "allow_code_fence": allow_fence}
    assert verdicts(text, check) == [passed]
    assert details(text, check)["missing_keys"] == missing


@pytest.mark.parametrize(
    ("check", "complaint"),
    [
        ({"type": "nope"}, "'nope'"),
        ({"type": "regex", "pattern": "(unclosed"}, "invalid regular expression"),
        ({"type": "regex", "pattern": "a", "flags": "g"}, "flags"),
        ({"type": "regex", "pattern": "a", "must_macth": False}, "must_macth"),
        ({"type": "word_count"}, "give min, max or both"),
        ({"type": "sentence_count", "min": 5, "max": 2}, "min 5 is above max 2"),
        ({"type": "line_regex", "patterns": []}, "patterns"),
        ({"type": "citations", "num_sources": 0}, "num_sources"),
    ],
)
def test_bad_checks_are_refused_naming_the_problem(check, complaint):
    with pytest.raises(ValidationError, match=complaint):
        CHECKS.validate_python([check])


# ---- /verify over HTTP ----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("format_verification")


@pytest.fixture(scope="module")
def server(workdir: Path) -> Iterator[StartedServer]:
    """Rows choose their grading mode; a deadline far above any sane check yet short for a runaway regex."""
    with run_resources_server(
        "format_verification", workdir, domain="instruction_following", grading_timeout_s=DEADLINE_S
    ) as started:
        yield started


def body_for(row: dict, *items: dict, **changes: Any) -> dict:
    return {**row, "response": response_with(*items, **A_RESPONSE), **changes}


async def verify(server: StartedServer, row: dict, *items: dict, **changes: Any) -> dict:
    status, answer = await post_json(server.url + "/verify", body_for(row, *items, **changes))
    assert status == 200, answer
    return answer


CITED = "Heat is moved, not made [1]. The COP of a heater is 1 [2]. Heat pumps reach 2.5 to 4 [3]."
UNCITED = "Heat is moved, not made. Heat pumps reach 2.5 to 4."


async def test_fraction_mode_rewards_the_share_of_checks_passed(server):
    answer = await verify(server, CITATIONS_ROW, message_item(CITED))
    assert (answer["reward"], answer["all_passed"], answer["fraction_passed"]) == (1.0, True, 1.0)
    partial = await verify(server, CITATIONS_ROW, message_item(UNCITED))
    assert partial["reward"] == pytest.approx(2 / 3)
    assert [result["passed"] for result in partial["check_results"]] == [False, True, True]
    assert [result["type"] for result in partial["check_results"]] == [
        "citations",
        "word_count",
        "sentence_count",
    ]
    assert partial["grading_mode"] == "fraction" and partial["timed_out"] is False
    assert partial["verifier"] is None and partial["match_details"] is None


async def test_binary_mode_rewards_only_all_checks_passed(server):
    answer = await verify(server, CITATIONS_ROW, message_item(UNCITED), grading_mode="binary")
    assert (answer["reward"], answer["fraction_passed"]) == (0.0, pytest.approx(2 / 3))
    row_without_mode = {key: value for key, value in CITATIONS_ROW.items() if key != "grading_mode"}
    default = await verify(server, row_without_mode, message_item(UNCITED))
    assert (default["grading_mode"], default["reward"]) == ("binary", 0.0)


async def test_the_config_grading_mode_overrides_the_rows(workdir):
    with run_resources_server(
        "format_binary",
        workdir,
        implementation="format_verification",
        domain="instruction_following",
        grading_mode="binary",
    ) as binary_server:
        answer = await verify(binary_server, CITATIONS_ROW, message_item(UNCITED))
    assert (answer["grading_mode"], answer["reward"]) == ("binary", 0.0)


async def test_nemo_gym_regex_verifier_rows(server):
    tips = "1. Use the imperative.\n2. Keep it short.\n3) Explain why.\n4. Link the issue."
    answer = await verify(server, REGEX_VERIFIER_ROW, message_item(tips))
    assert answer["reward"] == 1.0
    assert answer["verifier"] == REGEX_VERIFIER_ROW["verifier"]
    assert answer["match_details"] == {
        "matching_lines": 4,
        "min_matches": 4,
        "max_matches": None,
        "passed": True,
    }
    three = await verify(server, REGEX_VERIFIER_ROW, message_item("1. a\n2. b\n- c\n3. d"))
    assert (three["reward"], three["match_details"]["matching_lines"]) == (0.0, 3)


async def test_nemo_gym_string_match_verifier_rows(server):
    good = await verify(
        server, MARKERS_VERIFIER_ROW, message_item("Greek text [ref:1]; decoded 1822 [ref:2].")
    )
    assert (good["reward"], good["match_details"]["passed"]) == (1.0, True)
    spurious = await verify(server, MARKERS_VERIFIER_ROW, message_item("[ref:1] [ref:2] and [ref:7]"))
    assert (spurious["reward"], spurious["match_details"]["spurious"]) == (0.0, ["[ref:7]"])


async def test_inline_prose_is_graded_like_regex(server):
    verifier = {**REGEX_VERIFIER_ROW["verifier"], "type": "inline_prose", "source": "ds2"}
    answer = await verify(
        server, REGEX_VERIFIER_ROW, message_item("1. a\n2. b\n3. c\n4. d"), verifier=verifier
    )
    assert answer["reward"] == 1.0 and answer["verifier"] == verifier  # extra verifier keys are kept


@pytest.mark.parametrize(
    "items",
    [
        [],
        [{"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": "1. a"}]}],
        [function_call_item("write", {"text": "1. a"})],
        [message_item("  \n ")],
    ],
    ids=["no output", "reasoning only", "function call only", "blank text"],
)
async def test_a_response_without_text_scores_zero_even_on_negative_checks(server, items):
    row = {**ROWS[2], "checks": [{"type": "regex", "pattern": "```", "must_match": False}]}
    answer = await verify(server, row, *items)
    assert (answer["reward"], answer["check_results"], answer["all_passed"]) == (0.0, [], False)


async def test_odd_unicode_and_huge_text_are_checked(server):
    row = {
        **ROWS[2],
        "checks": [{"type": "word_count", "min": 1}, {"type": "regex", "pattern": "\U0001f600"}],
    }
    assert (await verify(server, row, message_item("\u202e\x00 word \U0001f600")))["reward"] == 1.0
    huge = await verify(server, CITATIONS_ROW, message_item("Heat moves [1] [2]. " * 50_000))
    assert [result["passed"] for result in huge["check_results"]] == [True, False, False]


async def test_a_runaway_row_regex_scores_zero_and_the_server_keeps_answering(server):
    row = {**ROWS[2], "checks": [{"type": "regex", "pattern": "^(a+)+$"}]}
    answer = await verify(server, row, message_item("a" * 60 + "!"))
    assert (answer["reward"], answer["timed_out"], answer["check_results"]) == (0.0, True, [])
    assert "run_checks exceeded its" in server.log()
    assert (await verify(server, CITATIONS_ROW, message_item(CITED)))["reward"] == 1.0


async def post_row(server: StartedServer, **changes: Any) -> tuple[int, Any]:
    body = body_for(ROWS[2], message_item("{}"), **changes)
    return await post_json(
        server.url + "/verify", {key: value for key, value in body.items() if value is not None}
    )


async def test_an_unknown_check_type_is_a_422_naming_it(server):
    status, answer = await post_row(server, checks=[{"type": "word_count", "max": 9}, {"type": "haiku"}])
    assert status == 422
    (error,) = answer["detail"]
    assert error["loc"] == ["body", "checks", 1] and "Input tag 'haiku'" in error["msg"]


@pytest.mark.parametrize(
    ("changes", "location", "complaint"),
    [
        (
            {"checks": [{"type": "regex", "pattern": "[a-"}]},
            ["body", "checks", 0],
            "invalid regular expression",
        ),
        ({"checks": []}, ["body", "checks"], "at least 1"),
        ({"checks": "word_count"}, ["body", "checks"], ""),
        ({"checks": None}, ["body"], "either `checks`"),
        ({"verifier": {"type": "regex", "verify_regex": ["\\d+"]}}, ["body"], "not both"),
        ({"checks": None, "verifier": {"type": "judge"}}, ["body", "verifier"], "'judge'"),
        (
            {"checks": None, "verifier": {"type": "regex", "verify_regex": ["(("]}},
            ["body", "verifier"],
            "invalid",
        ),
        ({"grading_mode": "partial"}, ["body", "grading_mode"], ""),
        ({"response": {"output": []}}, ["body", "response"], ""),
    ],
)
async def test_malformed_rows_are_422_naming_the_problem(server, changes, location, complaint):
    status, answer = await post_row(server, **changes)
    assert status == 422, answer
    assert any(
        error["loc"][: len(location)] == location and complaint in error["msg"] for error in answer["detail"]
    ), answer


# ---- metrics, recorded data, config ---------------------------------------------------------------------


async def test_aggregate_metrics_report_pass_rates_per_check_type(server):
    rollouts = []
    for index, text in enumerate([CITED, UNCITED]):
        answer = await verify(server, CITATIONS_ROW, message_item(text))
        rollouts.append({**answer, "_ng_task_index": 0, "_ng_rollout_index": index})
    rollouts.append({"reward": 1.0, "check_results": "odd", "_ng_task_index": 1, "_ng_rollout_index": 0})
    status, body = await post_json(server.url + "/aggregate_metrics", {"verify_responses": rollouts})
    assert status == 200, body
    keys = body["key_metrics"]
    assert keys["check_pass_rate/citations"] == pytest.approx(0.5)
    assert keys["check_pass_rate/word_count"] == pytest.approx(1.0)
    assert keys["mean/fraction_passed"] == pytest.approx((1 + 2 / 3) / 2)
    assert keys["mean/reward"] == pytest.approx((1 + 2 / 3 + 1) / 3)


@pytest.mark.parametrize("rollout", ROLLOUTS, ids=lambda rollout: rollout["response"]["id"][:12])
async def test_recorded_rollouts_verify_to_their_recorded_results(server, rollout):
    status, answer = await post_json(server.url + "/verify", rollout)
    assert status == 200, answer
    for field in ("reward", "check_results", "grading_mode", "match_details"):
        assert answer[field] == rollout[field]


def test_recorded_rollouts_cover_pass_partial_and_fail():
    assert sorted(round(rollout["reward"], 2) for rollout in ROLLOUTS) == [0.0, 0.0, 0.67, 1.0, 1.0]


def test_config_declares_the_environment_and_its_agent():
    _, resources, _ = check_environment_config(FOLDER, "format_verification", "instruction_following")
    assert resources.model_extra["grading_mode"] is None
