"""widesearch over HTTP: the server runs as a real process and judges through a real openai_model server
in front of the scripted upstream (the one test double)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from nemo_gym.config_types import ConfigError
from nemo_gym.prompt import load_judge_prompt_file
from nemo_gym.testing import (
    JudgedServer,
    check_environment_config,
    post_json,
    read_jsonl,
    response_with,
    run_judged_server,
    shipped_settings,
)
from resources_servers.widesearch.app import ALIGNMENT_PLACEHOLDERS, COLUMN_PLACEHOLDERS
from resources_servers.widesearch.widesearch_grading import (
    UnparsableTable,
    extract_table,
    preprocess,
    rule_score,
)
from tests.upstream_script import ScriptedUpstream, assistant_message

FOLDER = Path(__file__).resolve().parents[1]
NAME = "widesearch"
ROWS = read_jsonl(FOLDER / "data" / "example.jsonl")
ROLLOUTS = read_jsonl(FOLDER / "data" / "example_rollouts.jsonl")
SHIPPED = shipped_settings(FOLDER)
GASES, NORDIC, APOLLO = ROWS[0], ROWS[1], ROWS[3]
GAS_ROWS = [("Helium", "He", "2"), ("Neon", "Ne", "10"), ("Argon", "Ar", "18"), ("Krypton", "Kr", "36"),
            ("Xenon", "Xe", "54"), ("Radon", "Rn", "86")]  # fmt: skip
NORDIC_ROWS = [("Denmark", "Copenhagen"), ("Finland", "Helsinki"), ("Iceland", "Reykjavik"), ("Norway", "Oslo"),
               ("Sweden", "Stockholm")]  # fmt: skip


@pytest.fixture(scope="module")
def judged(
    scripted_upstream: ScriptedUpstream, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[JudgedServer]:
    with run_judged_server(
        scripted_upstream, tmp_path_factory.mktemp(NAME), NAME, **{**SHIPPED, "judge_max_attempts": 1}
    ) as started:
        yield started


def table(header: tuple[str, ...], rows: list[tuple[str, ...]], fenced: bool = True) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    body = "\n".join(lines)
    return f"My findings:\n```markdown\n{body}\n```" if fenced else f"My findings:\n\n{body}\n\nDone."


def decisions(*values: int) -> str:
    return "```json\n" + json.dumps({f"idx_{i}": value for i, value in enumerate(values)}) + "\n```"


async def verify(judged: JudgedServer, row: dict, text: str) -> dict:
    status, result = await post_json(
        judged.url + "/verify", {**row, "response": response_with(assistant_message(text))}
    )
    assert status == 200, result
    return result


SIX = ("precision_by_row", "recall_by_row", "f1_by_row", "precision_by_item", "recall_by_item", "f1_by_item")


def numbers(result: dict) -> tuple[float, ...]:
    return tuple(result[name] for name in SIX)


# ---- rule-scored tables ---------------------------------------------------------------------------------


async def test_a_perfect_table_scores_1_without_the_judge(judged):
    judged.judge.script("unused")
    result = await verify(judged, GASES, table(("Element", "Symbol", "Atomic Number"), GAS_ROWS[::-1]))
    assert (result["reward"], result["score"], numbers(result)) == (1.0, 1.0, (1.0,) * 6)
    assert (result["instance_id"], result["judge_failure"], result["judge_evaluations"]) == (
        "ws-001",
        None,
        [],
    )
    assert judged.judge.requests() == []


async def test_a_partial_table_scores_the_f1_computed_by_hand(judged):
    judged.judge.script("```json\n{}\n```")  # asked to map the keys Oxygen and neon: maps neither
    rows = [*GAS_ROWS[:2], ("Argon", "Ar", "19"), GAS_ROWS[3], ("Oxygen", "O", "8"), ("neon", "Ne", "99")]
    result = await verify(judged, GASES, table(("Element", "Symbol", "Atomic Number"), rows, fenced=False))
    # "neon" is a duplicate key of Neon after norm_str: the first is kept. 5 rows predicted, 6 gold; matched
    # He, Ne, Ar, Kr; Argon's number is wrong: 3 true rows, 3 + 3 + 2 + 3 = 11 true items of 3 columns.
    p_row, r_row, p_item, r_item = 3 / 5, 3 / 6, 11 / 15, 11 / 18
    expected = (p_row, r_row, 2 * p_row * r_row / (p_row + r_row), p_item, r_item, 2 / 3)
    assert numbers(result) == pytest.approx(expected)
    assert (result["reward"], result["evaluation_message"]) == (
        0.0,
        "the table is incomplete or has mismatches",
    )


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        (
            "I found six noble gases: helium, neon, argon, krypton, xenon and radon.",
            "contains no Markdown table",
        ),
        (
            "```markdown\n| Element | Symbol |\n|---|---|\n| Helium | He | 2 | extra |\n```",
            "cannot be read: row 1",
        ),
        (
            "| Element | Element | Symbol |\n|---|---|---|\n| Helium | Helium | He |",
            "cannot be read: the header",
        ),
    ],
    ids=["no_table", "too_many_cells", "repeated_header"],
)
async def test_a_missing_or_unreadable_table_scores_0_with_the_reason(judged, text, reason):
    judged.judge.script("unused")
    result = await verify(judged, GASES, text)
    assert (result["reward"], numbers(result), result["judge_failure"]) == (0.0, (0.0,) * 6, None)
    assert reason in result["evaluation_message"]


async def test_columns_the_judge_cannot_map_score_0_with_the_reason(judged):
    judged.judge.script('```json\n{"name": "element"}\n```')
    result = await verify(judged, GASES, table(("Name", "Symbol"), [("Helium", "He")]))
    assert (result["reward"], result["judge_failure"]) == (0.0, None)
    assert "are not the required ['element', 'symbol', 'atomicnumber']" in result["evaluation_message"]
    assert len(result["judge_evaluations"]) == 1


# ---- judged columns -------------------------------------------------------------------------------------


async def test_the_judge_agreeing_maps_columns_and_passes_every_cell(judged):
    judged.judge.script(
        '```json\n{"nation": "country", "capitalcity": "capital"}\n```', decisions(1, 1, 1, 1, 1)
    )
    rows = [(country, capital.upper()) for country, capital in NORDIC_ROWS]
    result = await verify(judged, NORDIC, table(("Nation", "Capital City"), rows))
    assert (result["reward"], numbers(result)) == (1.0, (1.0,) * 6)
    alignment, cells = judged.judge.requests()
    assert '["nation", "capitalcity"]' in alignment["input"][-1]["content"]
    cell_prompt = cells["input"][-1]["content"]
    assert (
        "The same city" in cell_prompt
        and '"idx_4": {"response": "STOCKHOLM", "target": "Stockholm"}' in cell_prompt
    )
    assert len(result["judge_evaluations"]) == 2


async def test_the_judge_disagreeing_fails_those_cells(judged):
    judged.judge.script(decisions(1, 0, 1, 0, 1))
    result = await verify(judged, NORDIC, table(("Country", "Capital"), NORDIC_ROWS))
    # 5 rows, 2 with a failed capital: 3 true rows of 5; 10 - 2 = 8 true items of 10.
    assert numbers(result) == pytest.approx((0.6, 0.6, 0.6, 0.8, 0.8, 0.8))
    assert result["reward"] == 0.0 and result["judge_failure"] is None


async def test_key_values_are_mapped_by_the_judge_before_matching(judged):
    judged.judge.script('```json\n{"Danmark": "Denmark"}\n```', decisions(1, 1, 1, 1, 1))
    rows = [("Danmark", "Copenhagen"), *NORDIC_ROWS[1:]]
    result = await verify(judged, NORDIC, table(("Country", "Capital"), rows))
    assert (result["reward"], len(judged.judge.requests())) == (1.0, 2)


@pytest.mark.parametrize(
    "judge_text",
    ["Every capital is right.", decisions(1, 1, 1, 1), '```json\n{"idx_0": "yes"}\n```'],
    ids=["prose", "missing_cell", "not_0_or_1"],
)
async def test_a_malformed_verdict_is_a_judge_failure_not_a_score(judged, judge_text):
    judged.judge.script(judge_text)
    result = await verify(judged, NORDIC, table(("Country", "Capital"), NORDIC_ROWS))
    failure = result["judge_failure"]
    assert (failure["kind"], failure["attempts"], result["reward"]) == ("bad_response", 1, 0.0)
    assert result["evaluation_message"] == "the judgment failed"


async def test_a_failing_judge_is_a_judge_failure(judged):
    judged.judge.script({"status": 403, "body": {"error": {"message": "this model is not enabled"}}})
    result = await verify(judged, NORDIC, table(("Country", "Capital"), NORDIC_ROWS))
    failure = result["judge_failure"]
    assert (failure["kind"], failure["attempts"]) == ("upstream_error", 1)
    assert "not enabled" in failure["message"] and result["reward"] == 0.0


async def test_an_evaluation_without_a_pipeline_for_a_scored_column_is_a_422(judged):
    evaluation = {**APOLLO["evaluation"], "eval_pipeline": {"mission": {"metric": ["exact_match"]}}}
    status, result = await post_json(
        judged.url + "/verify", {**APOLLO, "evaluation": evaluation, "response": response_with()}
    )
    assert status == 422
    assert "landingdate" in json.dumps(result["detail"])


# ---- metrics, recorded data, config ----------------------------------------------------------------------


def graded(task: int, rollout: int, score: float | None) -> dict:
    failure = {"kind": "timeout", "message": "late", "attempts": 1} if score is None else None
    return {
        **GASES,
        "response": response_with(),
        "reward": score or 0.0,
        "score": score,
        "f1_by_item": score,
        "judge_failure": failure,
        "_ng_task_index": task,
        "_ng_rollout_index": rollout,
    }


async def test_metrics_report_success_rate_and_f1_of_judged_rollouts(judged):
    rollouts = [graded(0, 0, 1.0), graded(0, 1, 0.0), graded(1, 0, None), graded(1, 1, 0.0)]
    status, result = await post_json(judged.url + "/aggregate_metrics", {"verify_responses": rollouts})
    assert status == 200, result
    metrics = result["agent_metrics"]
    assert metrics["pass@1[avg-of-1]/score"] == pytest.approx(50.0)
    assert metrics["pass@2/score"] == pytest.approx(100.0)  # only task 0 has 2 graded rollouts
    assert (metrics["judge_failure_rate"], metrics["judge_failures/timeout"]) == (0.25, 1)


@pytest.mark.parametrize("rollout", ROLLOUTS, ids=lambda rollout: rollout["instance_id"])
async def test_recorded_rollouts_reproduce_their_scores(judged, rollout):
    row = next(row for row in ROWS if row["instance_id"] == rollout["instance_id"])
    answers = [e["response"]["output"][-1]["content"][-1]["text"] for e in rollout["judge_evaluations"]]
    judged.judge.script(*answers)
    status, result = await post_json(judged.url + "/verify", {**row, "response": rollout["response"]})
    assert status == 200, result
    for key in ("reward", "evaluation_message", *SIX):
        assert result[key] == rollout[key], key
    sent = [evaluation["responses_create_params"] for evaluation in result["judge_evaluations"]]
    assert sent == [evaluation["responses_create_params"] for evaluation in rollout["judge_evaluations"]]


def test_config_declares_the_environment():
    _, resources, _ = check_environment_config(FOLDER, NAME, "knowledge")
    assert resources.model_extra["judge_model_server"] == {
        "type": "responses_api_models",
        "name": "policy_model",
    }
    assert resources.model_extra["judge_alignment_prompt_path"] == "prompts/alignment.yaml"
    assert resources.model_extra["judge_column_prompt_path"] == "prompts/column_judge.yaml"


def test_the_shipped_prompts_fill_with_their_placeholders(tmp_path):
    alignment = load_judge_prompt_file(FOLDER, SHIPPED["judge_alignment_prompt_path"], ALIGNMENT_PLACEHOLDERS)
    assert '["a"]' in alignment.user.format(response='["a"]', reference='["b"]')
    column = load_judge_prompt_file(FOLDER, SHIPPED["judge_column_prompt_path"], COLUMN_PLACEHOLDERS)
    assert "C!" in column.user.format(criterion="C!", response="{}")
    (tmp_path / "bad.yaml").write_text("user: '{criterion} {target}'")
    with pytest.raises(ConfigError, match="judge_prompt_path.*target"):
        load_judge_prompt_file(tmp_path, "bad.yaml", COLUMN_PLACEHOLDERS)


@pytest.mark.parametrize(
    ("got", "want", "metric", "criterion", "score"),
    [
        ("Oslo", "oslo", "exact_match", None, 1.0),
        ("Oslo", "Bergen", "exact_match", None, 0.0),
        ("see https://www.nasa.gov/apollo", "https://www.nasa.gov/", "url_match", None, 1.0),
        ("https://nasa.gov", "https://www.nasa.gov", "url_match", None, 0.0),
        ("62%", "0.6", "number_near", 0.05, 1.0),
        ("62", "60", "number_near", 0.01, 0.0),
        ("NULL", "NULL", "number_near", 0.1, 1.0),
        ("15 September 2000", "2000-09-15", "date_near", None, 1.0),
        ("2000-11-30", "2000-09-15", "date_near", None, 0.0),
        ("no idea", "2000-09-15", "date_near", None, 0.0),
    ],
)
def test_rule_scores(got, want, metric, criterion, score):
    assert rule_score(got, want, metric, criterion) == score


def test_preprocessing_and_table_reading():
    assert preprocess("1,234.5 km", "extract_number") == "1234.5"
    assert preprocess("none", "extract_number") == "NULL"
    assert preprocess(" **New York** ", "norm_str") == "newyork"
    assert preprocess("July 20, 1969", "norm_date") == "1969-07-20"
    assert extract_table("| A | B C |\n|---|---|\n| 1 |") == (["a", "bc"], [{"a": "1", "bc": ""}])
    assert extract_table("no table here") is None
    with pytest.raises(UnparsableTable):
        extract_table("| A | |\n| 1 | 2 |")
