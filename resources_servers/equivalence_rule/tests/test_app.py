"""equivalence_rule over HTTP: one real server process per grading rule, started from its own app.py."""

import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from nemo_gym.testing import (
    VERIFY_FLAGS,
    StartedServer,
    check_environment_config,
    post_json,
    read_jsonl,
    response_with,
    run_resources_server,
)

FOLDER = Path(__file__).resolve().parents[1]
IMPLEMENTATION = "equivalence_rule"
ROWS = read_jsonl(FOLDER / "data" / "example.jsonl")
ROLLOUTS = read_jsonl(FOLDER / "data" / "example_rollouts.jsonl")
A_RESPONSE = ROLLOUTS[0]["response"]
ROW = ROWS[3]  # expected_answer "6"


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp(IMPLEMENTATION)


def start(workdir: Path, instance: str, **inner: Any):
    return run_resources_server(instance, workdir, implementation=IMPLEMENTATION, domain="knowledge", **inner)


@pytest.fixture(scope="module")
def exact(workdir: Path) -> Iterator[StartedServer]:
    """No grading_rule configured: the default must be exact."""
    with start(workdir, "default_rule") as started:
        yield started


@pytest.fixture(scope="module")
def seq(workdir: Path) -> Iterator[StartedServer]:
    with start(workdir, "seq_rule", grading_rule="seq_match") as started:
        yield started


@pytest.fixture(scope="module")
def weighted(workdir: Path) -> Iterator[StartedServer]:
    with start(workdir, "weighted_rule", grading_rule="weighted_seq_match") as started:
        yield started


@pytest.fixture(scope="module")
def hasty(workdir: Path) -> Iterator[StartedServer]:
    """Similarity grading with a deadline far below what a long answer needs."""
    with start(workdir, "hasty_rule", grading_rule="seq_match", grading_timeout_s=0.01) as started:
        yield started


def error_locations(body: dict) -> list[list]:
    return [error["loc"] for error in body["detail"]]


def message(*texts: str, refusal: str | None = None) -> dict:
    content: list[dict] = [{"type": "output_text", "text": text, "annotations": []} for text in texts]
    if refusal is not None:
        content.append({"type": "refusal", "refusal": refusal})
    return {"type": "message", "role": "assistant", "id": "msg_1", "status": "completed", "content": content}


REASONING = {
    "type": "reasoning",
    "id": "rs_1",
    "summary": [{"type": "summary_text", "text": "the answer is 7"}],
}


async def verify(server: StartedServer, expected: str, *items: dict, **row_changes: Any) -> dict:
    body = {
        **ROW,
        **row_changes,
        "expected_answer": expected,
        "response": response_with(*items, **A_RESPONSE),
    }
    status, answer = await post_json(server.url + "/verify", body)
    assert status == 200, answer
    assert answer["equivalence_score"] == answer["reward"]
    return answer


async def score(server: StartedServer, expected: str, *texts: str) -> float:
    return (await verify(server, expected, message(*texts)))["reward"]


@pytest.mark.parametrize(
    ("answer", "expected", "reward"),
    [
        ("6", "6", 1.0),
        ("5", "6", 0.0),
        ("  The   ANSWER\n\tis 42 ", "the answer is 42", 1.0),
        ("the answer is 42", "The Answer Is 42\n", 1.0),
        ("theansweris42", "the answer is 42", 0.0),
        ("6.", "6", 0.0),
        ("", "", 1.0),
        ("   ", "", 1.0),
        ("", "6", 0.0),
    ],
)
async def test_exact_is_the_default_and_compares_normalized_text(exact, answer, expected, reward):
    assert await score(exact, expected, answer) == reward


async def test_the_answer_is_every_output_text_joined_without_separator(exact):
    joined = await verify(exact, "NfAfO1 To the depths", message("NfAfO1"), message(" To the ", "depths"))
    assert joined["reward"] == 1.0
    assert (await verify(exact, "ab", message("a"), message("b")))["reward"] == 1.0
    assert (await verify(exact, "a b", message("a"), message("b")))["reward"] == 0.0


async def test_reasoning_and_refusals_are_not_part_of_the_answer(exact):
    assert (await verify(exact, "6", REASONING, message("6", refusal="no")))["reward"] == 1.0
    assert (await verify(exact, "the answer is 7", REASONING))["reward"] == 0.0
    assert (await verify(exact, "", REASONING))["reward"] == 1.0, "no message is an empty answer"


@pytest.mark.parametrize(
    ("answer", "expected", "reward"),
    [
        ("abcd", "abcd", 1.0),
        ("abce", "abcd", 0.75),  # 3 matching characters of 8: 2*3/8
        ("ABCE  ", "abcd", 0.75),  # normalized first
        ("wxyz", "abcd", 0.0),
        ("", "", 1.0),
        ("", "abcd", 0.0),
        ("a  b", "a b", 1.0),
    ],
)
async def test_seq_match_is_the_difflib_ratio_of_normalized_text(seq, answer, expected, reward):
    assert await score(seq, expected, answer) == pytest.approx(reward)


@pytest.mark.parametrize(
    ("answer", "reward"),
    [
        ("abcdefghijklmnop", 1.0),
        ("xbcdefghijklmnop", 0.85 * (30 / 32) + 0.15 * (18 / 20)),
        ("abcdefghijXXXXXX", 0.85 * (20 / 32) + 0.15 * 1.0),  # the right start earns the full prefix bonus
        ("XXXXXXklmnop", 0.85 * (12 / 28) + 0.15 * 0.0),  # a wrong start earns none
        ("", 0.0),
    ],
)
async def test_weighted_seq_match_adds_a_bonus_for_the_first_ten_characters(weighted, answer, reward):
    assert await score(weighted, "abcdefghijklmnop", answer) == pytest.approx(reward)


async def test_weighted_and_plain_similarity_differ_only_by_the_prefix_term(seq, weighted):
    right_start = await score(weighted, "abcdefghijklmnop", "abcdefghijXXXXXX")
    assert right_start > await score(seq, "abcdefghijklmnop", "abcdefghijXXXXXX")
    assert await score(weighted, "AB", "ab ") == 1.0, "short answers: the prefix is the whole answer"


async def test_verify_echoes_the_row_fields_and_adds_equivalence_score(exact):
    body = await verify(exact, "6", message("6"))
    row_fields = {key for key in ROW if key != "responses_create_params"}
    assert set(body) == {
        *VERIFY_FLAGS,
        "responses_create_params",
        "response",
        "reward",
        "equivalence_score",
        *row_fields,
    }
    assert {key: body[key] for key in row_fields} == {
        **{key: ROW[key] for key in row_fields},
        "expected_answer": "6",
    }


async def test_a_row_field_named_like_a_result_field_does_not_override_it(exact):
    body = await verify(exact, "6", message("5"), reward=1.0, equivalence_score=1.0)
    assert body["reward"] == 0.0 and body["equivalence_score"] == 0.0


async def test_a_similarity_grading_past_its_deadline_earns_0_and_the_server_keeps_answering(hasty):
    rng = random.Random(0)
    long_answer = "".join(chr(0x4E00 + rng.randrange(5000)) for _ in range(40_000))
    long_expected = "".join(chr(0x4E00 + rng.randrange(5000)) for _ in range(40_000))
    assert await score(hasty, long_expected, long_answer) == 0.0
    assert "exceeded" in hasty.log()
    assert await score(hasty, "abcd", "abce") == pytest.approx(0.75), "short gradings still finish in time"


@pytest.mark.parametrize(
    ("body", "field"),
    [
        (
            {**{k: v for k, v in ROW.items() if k != "expected_answer"}, "response": A_RESPONSE},
            "expected_answer",
        ),
        ({**ROW, "expected_answer": 6, "response": A_RESPONSE}, "expected_answer"),
        ({**ROW, "expected_answer": None, "response": A_RESPONSE}, "expected_answer"),
        (ROW, "response"),
    ],
)
async def test_a_bad_verify_body_is_a_422_naming_the_field(exact, body, field):
    status, answer = await post_json(exact.url + "/verify", body)
    assert status == 422 and ["body", field] in error_locations(answer)


@pytest.mark.parametrize(
    ("inner", "field"),
    [({"grading_rule": "fuzzy"}, "grading_rule"), ({"grading_timeout_s": 0}, "grading_timeout_s")],
)
def test_a_bad_grading_config_is_refused_at_startup(workdir, inner, field):
    with pytest.raises(RuntimeError, match=field):
        with start(workdir, "bad_config", **inner):
            pass


async def test_aggregate_metrics_profile_the_equivalence_score(seq):
    results = [await verify(seq, "abcd", message("abcd")), await verify(seq, "abcd", message("abce"))]
    rollouts = [{**result, "_ng_task_index": 0, "_ng_rollout_index": i} for i, result in enumerate(results)]
    status, body = await post_json(seq.url + "/aggregate_metrics", {"verify_responses": rollouts})
    assert status == 200, body
    assert body["key_metrics"]["mean/equivalence_score"] == pytest.approx(0.875)
    assert body["agent_metrics"]["min/reward"] == pytest.approx(0.75)


@pytest.mark.parametrize("rollout", ROLLOUTS, ids=lambda rollout: rollout["hashid"])
async def test_recorded_rollouts_verify_to_their_recorded_reward(exact, rollout):
    """The recorded rollouts were graded with the default (exact) rule and carry their row fields."""
    status, body = await post_json(exact.url + "/verify", rollout)
    assert status == 200, body
    assert body["reward"] == rollout["reward"] and body["equivalence_score"] == rollout["equivalence_score"]
    assert body["hashid"] == rollout["hashid"]


def test_config_declares_the_environment_and_the_agent_the_rows_name():
    agent_name = ROWS[0]["agent_ref"]["name"]
    _, resources, _ = check_environment_config(
        FOLDER, "lc_equivalence_rule", "knowledge", agent_instance=agent_name
    )
    assert resources.model_extra["grading_rule"] == "exact"
