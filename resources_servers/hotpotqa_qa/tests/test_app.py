"""hotpotqa_qa: normalization, extraction and F1 in-process (cheap); the server over HTTP, one process per
reward metric (F1, the default, and exact match)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from nemo_gym.testing import (
    VERIFY_FLAGS,
    StartedServer,
    check_environment_config,
    function_call_item,
    message_item,
    post_json,
    read_jsonl,
    response_with,
    run_resources_server,
)
from resources_servers.hotpotqa_qa.grading import extract_answer, normalize_answer, token_f1

FOLDER = Path(__file__).resolve().parents[1]
ROWS = read_jsonl(FOLDER / "data" / "example.jsonl")
ROLLOUTS = read_jsonl(FOLDER / "data" / "example_rollouts.jsonl")
ROW = ROWS[0]  # gold "Illinois"
A_RESPONSE = ROLLOUTS[0]["response"]
DEADLINE_S = 2.0


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("hotpotqa_qa")


@pytest.fixture(scope="module")
def server(workdir: Path) -> Iterator[StartedServer]:
    """Default reward metric (F1); a deadline far above any real grading."""
    with run_resources_server(
        "hotpotqa_qa", workdir, domain="knowledge", grading_timeout_seconds=DEADLINE_S
    ) as started:
        yield started


def body_for(*items: dict, row: dict = ROW, **changes: Any) -> dict:
    return {**row, "response": response_with(*items, **A_RESPONSE), **changes}


async def verify(server: StartedServer, *items: dict, **changes: Any) -> dict:
    status, answer = await post_json(server.url + "/verify", body_for(*items, **changes))
    assert status == 200, answer
    return answer


async def scores(server: StartedServer, text: str, **changes: Any) -> tuple[float, float, float, str | None]:
    answer = await verify(server, message_item(text), **changes)
    return answer["reward"], answer["exact_match"], answer["f1"], answer["extracted_answer"]


# ---- grading functions ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "normalized"),
    [
        ("The  Eiffel Tower!", "eiffel tower"),
        ("A cat, an owl & the dog.", "cat owl dog"),
        ("theater", "theater"),  # articles only as whole words
        ("Würzburg", "würzburg"),
        ("  \n", ""),
    ],
)
def test_normalization_is_squad_style(text, normalized):
    assert normalize_answer(text) == normalized


@pytest.mark.parametrize(
    ("prediction", "gold", "f1"),
    [
        ("Illinois", "Illinois", 1.0),
        ("Oak Park, Illinois", "Illinois", 0.5),  # precision 1/3, recall 1
        ("the University of Oxford", "Oxford University", 2 * (2 / 3) * 1 / (2 / 3 + 1)),
        ("Chicago", "Illinois", 0.0),
        ("no", "yes", 0.0),
        ("yes it is", "yes", 0.0),  # yes/no answers earn nothing unless identical
        ("The", "a", 1.0),  # both empty after normalization
        ("The", "Illinois", 0.0),
    ],
)
def test_token_f1(prediction, gold, f1):
    assert token_f1(prediction, gold) == pytest.approx(f1)


@pytest.mark.parametrize(
    ("text", "answer"),
    [
        ('Reasoning... {"answer": "Oxford"}', "Oxford"),
        ('{"answer": "A"} then {"answer": "B"}', "B"),  # the last JSON answer
        ('{"answer": 1746}', "1746"),
        ('{"answer": true}', "true"),
        ('{"note": "x"}\nAnswer: Paris', "Paris"),  # JSON without an answer key is skipped
        ("so \\boxed{\\text{Paris}}", "Paris"),
        ("Answer: Rome\nWait.\n**Final Answer:** Paris", "Paris"),  # the last Answer line
        ("> answer: Paris", "Paris"),
        ("Paris", "Paris"),  # no marker: the whole text
        ("  ", None),
        ("Answer:   ", "Answer:"),  # an empty Answer line falls back to the whole text
    ],
)
def test_extraction_order(text, answer):
    assert extract_answer(text) == answer


# ---- /verify over HTTP ----------------------------------------------------------------------------------


async def test_the_reward_is_f1_by_default_and_the_row_is_echoed(server):
    answer = await verify(server, message_item("Answer: Oak Park, Illinois"))
    assert (answer["reward"], answer["exact_match"], answer["f1"]) == (0.5, 0.0, 0.5)
    assert answer["extracted_answer"] == "Oak Park, Illinois"
    row_fields = {key for key in ROW if key != "responses_create_params"}
    assert {key: answer[key] for key in row_fields} == {key: ROW[key] for key in row_fields}
    assert set(answer) == {
        *VERIFY_FLAGS,
        *ROW,
        "response",
        "reward",
        "extracted_answer",
        "exact_match",
        "f1",
        "answer_aliases",
    }


async def test_aliases_count_as_gold_answers(server):
    row = ROWS[4]  # Würzburg, aliases Wurzburg / Wuerzburg
    assert await scores(server, "Answer: Wuerzburg", row=row) == (1.0, 1.0, 1.0, "Wuerzburg")
    assert await scores(server, "Answer: Munich", row=row) == (0.0, 0.0, 0.0, "Munich")
    assert (await scores(server, "Answer: Wuerzburg", row=row, answer_aliases=[]))[0] == 0.0


async def test_yes_no_answers(server):
    row = ROWS[2]  # yes
    assert await scores(server, "Answer: Yes.", row=row) == (1.0, 1.0, 1.0, "Yes.")
    assert await scores(server, "Answer: no", row=row) == (0.0, 0.0, 0.0, "no")


@pytest.mark.parametrize(
    "items",
    [
        [],
        [
            {
                "type": "reasoning",
                "id": "rs_1",
                "summary": [{"type": "summary_text", "text": "Answer: Illinois"}],
            }
        ],
        [function_call_item("search", {"q": "Illinois"})],
        [message_item("")],
    ],
    ids=["no output", "reasoning only", "function call only", "empty text"],
)
async def test_no_text_scores_zero_with_no_answer(server, items):
    answer = await verify(server, *items)
    assert (answer["reward"], answer["exact_match"], answer["f1"], answer["extracted_answer"]) == (
        0.0,
        0.0,
        0.0,
        None,
    )


async def test_odd_unicode_and_huge_text_are_graded(server):
    assert (await scores(server, "\u202e\x00\U0001f600\nAnswer: \ud7ff Illinois"))[0] == pytest.approx(2 / 3)
    assert (await scores(server, "I will look this up. " * 40_000 + "\nAnswer: Illinois"))[0] == 1.0


async def test_a_grading_past_its_deadline_scores_zero_and_the_server_keeps_answering(server):
    # Each "{" starts a JSON parse that nests as deep as the parser allows before failing: about 10 s.
    adversarial = '{"a": ' * 200_000
    assert await scores(server, adversarial) == (0.0, 0.0, 0.0, None)
    assert "grade exceeded its" in server.log()
    assert (await scores(server, "Answer: Illinois"))[0] == 1.0


async def test_a_row_field_named_like_a_result_field_does_not_override_it(server):
    answer = await verify(server, message_item("Answer: Chicago"), reward=1.0, f1=1.0, extracted_answer="x")
    assert (answer["reward"], answer["f1"], answer["extracted_answer"]) == (0.0, 0.0, "Chicago")


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"expected_answer": None}, "expected_answer"),
        ({"expected_answer": ["Illinois"]}, "expected_answer"),
        ({"answer_aliases": "Illinois"}, "answer_aliases"),
        ({"answer_aliases": [1]}, "answer_aliases"),
        ({"response": {"output": "Illinois"}}, "response"),
    ],
)
async def test_malformed_rows_are_422_naming_the_field(server, change, field):
    status, answer = await post_json(server.url + "/verify", body_for(message_item("Illinois"), **change))
    assert status == 422
    assert any(error["loc"][:2] == ["body", field] for error in answer["detail"])


async def test_exact_match_can_be_the_reward(workdir):
    with run_resources_server(
        "hotpotqa_em", workdir, implementation="hotpotqa_qa", domain="knowledge", reward_metric="exact_match"
    ) as em_server:
        assert await scores(em_server, "Answer: Oak Park, Illinois") == (0.0, 0.0, 0.5, "Oak Park, Illinois")
        assert await scores(em_server, "Answer: ILLINOIS.") == (1.0, 1.0, 1.0, "ILLINOIS.")


def test_an_unknown_reward_metric_is_refused_at_startup(workdir):
    with pytest.raises(RuntimeError, match="reward_metric"):
        with run_resources_server(
            "hotpotqa_bad", workdir, implementation="hotpotqa_qa", domain="knowledge", reward_metric="recall"
        ):
            pass


# ---- metrics, recorded data, config ---------------------------------------------------------------------


async def test_aggregate_metrics_score_exact_match_and_f1(server):
    texts = ["Answer: Illinois", "Answer: Oak Park, Illinois", "Answer: illinois", "no answer here: "]
    rollouts = []
    for index, text in enumerate(texts):
        answer = await verify(server, message_item(text))
        rollouts.append({**answer, "_ng_task_index": 0, "_ng_rollout_index": index})
    rollouts.append({"reward": 0.0, "_ng_task_index": 1, "_ng_rollout_index": 0})  # hand-written: no scores
    status, body = await post_json(server.url + "/aggregate_metrics", {"verify_responses": rollouts})
    assert status == 200, body
    metrics, keys = body["agent_metrics"], body["key_metrics"]
    assert metrics["pass@1[avg-of-4]/exact_match"] == pytest.approx(50.0)
    assert metrics["pass@2/f1"] == pytest.approx(100.0)  # best of the first two
    # "Illinois" and "illinois" are different extracted strings: 1 vote each with the other two, a 4-way tie
    # worth 0.5; task 1 has no exact_match to vote with, so it counts 0, as in NeMo Gym.
    assert metrics["majority@4/exact_match"] == pytest.approx(100 * (0.5 + 0) / 2)
    assert metrics["pass@1[avg-of-4]/no_answer"] == pytest.approx(100 * (0 / 4 + 1 / 1) / 2)
    assert {"mean/reward", "pass@1[avg-of-4]/f1", "pass@4/exact_match", "majority@4/f1"} <= set(keys)
    assert not any(key.startswith(("pass@4/no", "majority@4/no")) for key in keys)


@pytest.mark.parametrize("rollout", ROLLOUTS, ids=lambda rollout: rollout["id"])
async def test_recorded_rollouts_verify_to_their_recorded_scores(server, rollout):
    status, answer = await post_json(server.url + "/verify", rollout)
    assert status == 200, answer
    for field in ("reward", "exact_match", "f1", "extracted_answer", "id", "question"):
        assert answer[field] == rollout[field]


def test_recorded_rollouts_cover_full_partial_and_no_credit():
    assert {rollout["reward"] for rollout in ROLLOUTS} == {0.0, 0.5, 1.0}


def test_config_declares_the_environment_and_its_agent():
    _, resources, _ = check_environment_config(FOLDER, "hotpotqa_qa", "knowledge")
    assert resources.model_extra["reward_metric"] == "f1"
