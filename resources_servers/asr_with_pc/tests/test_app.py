"""asr_with_pc: the rate helpers in-process, everything else over HTTP against one real server."""

from collections.abc import Iterator
from pathlib import Path

import jiwer
import pytest

from nemo_gym.testing import (
    BASE_VERIFY_FIELDS,
    StartedServer,
    check_environment_config,
    function_call_item,
    message_item,
    post_json,
    read_jsonl,
    response_with,
    run_resources_server,
    without_verify_flags,
)
from resources_servers.asr_with_pc.grading import pc_tokens, punctuation_error_rate, standard_text

FOLDER = Path(__file__).resolve().parents[1]
INSTANCE = "asr_with_pc"
ROWS = read_jsonl(FOLDER / "data" / "example.jsonl")
ROLLOUTS = read_jsonl(FOLDER / "data" / "example_rollouts.jsonl")
A_RESPONSE = ROLLOUTS[0]["response"]
PC_ROW = {**ROWS[0], "expected_answer": "Hello, Maria. Did the train leave on time?"}
DEADLINE_S = 3.0


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StartedServer]:
    workdir = tmp_path_factory.mktemp("asr_with_pc")
    with run_resources_server(INSTANCE, workdir, domain="other", grading_timeout_s=DEADLINE_S) as started:
        yield started


async def verify(server: StartedServer, *items: dict, row: dict = PC_ROW) -> dict:
    status, body = await post_json(
        server.url + "/verify", {**row, "response": response_with(*items, **A_RESPONSE)}
    )
    assert status == 200, body
    return body


async def answer(server: StartedServer, text: str, row: dict = PC_ROW) -> dict:
    return await verify(server, message_item(text), row=row)


# --- the rates (in-process) -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("reference", "hypothesis", "rate"),
    [
        ("no marks", "none here", 0.0),
        ("a, b.", "a, b.", 0.0),
        ("a, b.", "a b.", 0.5),  # one deletion over C=1 + D=1
        ("a, b.", "a; b.", 0.5),  # one substitution
        ("a b", "a, b!", 1.0),  # two insertions, nothing correct
        ("a, b. c!", "a b. c?", 2 / 3),  # deletion of ",", "." right, "!" → "?"
        ("...", "", 1.0),
    ],
)
def test_the_punctuation_error_rate_aligns_the_marks_in_order(reference, hypothesis, rate):
    assert punctuation_error_rate(reference, hypothesis) == pytest.approx(rate)


def test_punctuation_becomes_tokens_of_its_own_and_the_standard_text_is_whisper_normalized():
    assert pc_tokens("  Hi,there...  OK? ") == "Hi , there . . . OK ?"
    assert standard_text("Mr. Smith paid twenty dollars, didn't he?") == "mister smith paid $20 did not he"


# --- /verify ----------------------------------------------------------------------------------------


async def test_an_exact_transcript_earns_1_with_every_rate_0_and_the_answer_echoes_the_row(server):
    body = await answer(server, "Hello, Maria. Did the train leave on time?")
    assert body["reward"] == 1.0 and body["is_correct"] is True
    assert (body["wer"], body["wer_c"], body["wer_pc"], body["per"]) == (0.0, 0.0, 0.0, 0.0)
    assert body["ref_pc_tok"] == "Hello , Maria . Did the train leave on time ?"
    assert body["text"] == body["pred_text"] == "hello maria did the train leave on time"
    row_fields = {key for key in PC_ROW if key != "response"}
    assert {key: body[key] for key in row_fields - {"responses_create_params"}} == {
        key: PC_ROW[key] for key in row_fields - {"responses_create_params"}
    }
    assert {*BASE_VERIFY_FIELDS, "is_correct", "wer", "wer_c", "wer_pc", "per", "text"} <= set(body)


async def test_case_and_punctuation_count_only_in_their_own_rates(server):
    body = await answer(server, "hello maria did the train leave on time")
    assert body["wer"] == 0.0
    assert body["wer_c"] == pytest.approx(3 / 8)  # Hello, Maria, Did
    assert body["per"] == 1.0
    assert body["wer_pc"] == pytest.approx(jiwer.wer(body["ref_pc_tok"], body["hyp_pc_tok"]))
    assert body["reward"] == 0.0  # 3 words and 3 marks of 11 tokens


async def test_a_wrong_transcript_scores_0(server):
    body = await answer(server, "Hello. The rain left on time.")
    assert body["reward"] == 0.0 and body["wer_pc"] >= 0.5


async def test_plain_asr_compares_whisper_normalized_text_only(server):
    row = {**PC_ROW, "task_type": "ASR", "expected_answer": "I paid twenty dollars for the colour TV."}
    body = await answer(server, "i paid $20 for the color tv", row=row)
    assert body["reward"] == 1.0 and body["wer"] == 0.0
    assert (body["wer_c"], body["wer_pc"], body["per"]) == (0.0, 0.0, 0.0)


async def test_an_empty_plain_asr_answer_reads_as_the_word_empty(server):
    row = {**PC_ROW, "task_type": "ASR", "expected_answer": "good morning"}
    body = await verify(server, function_call_item("transcribe", {}), row=row)
    assert body["pred_text"] == "empty" and body["wer"] == 1.0 and body["reward"] == 0.0


async def test_the_leaderboard_scores_each_named_reference_too(server):
    body = await answer(server, "Call me at 555 1234.", row=ROWS[3])
    assert body["reward"] == 0.0 and body["wer"] == 0.5
    assert (body["wer_tn"], body["is_correct_tn"]) == (0.5, False)
    assert (body["wer_itn"], body["is_correct_itn"]) == (0.0, True)


async def test_a_hallucination_row_rates_characters_per_minute_of_audio(server):
    calm = await answer(server, "Stop.", row=ROWS[4])
    assert calm["reward"] == 1.0 and calm["hallucination_rate"] == 0.0 and calm["char_rate"] == 150.0
    runaway = await answer(server, "Stop. " * 10, row=ROWS[4])  # 59 characters in 2 s
    assert (
        runaway["reward"] == 0.0 and runaway["hallucination_rate"] == 1.0 and runaway["char_rate"] == 1770.0
    )


async def test_exact_match_ignores_case_and_punctuation_only(server):
    row = {**PC_ROW, "task_type": "EXACT_MATCH", "expected_answer": "Forty-two."}
    assert (await answer(server, "forty two", row=row))["reward"] == 1.0
    assert (await answer(server, "forty three", row=row))["reward"] == 0.0


async def test_a_row_without_task_type_takes_the_configs(server):
    row = {key: value for key, value in PC_ROW.items() if key != "task_type"}
    body = await answer(server, "hello maria did the train leave on time", row=row)
    assert body["task_type"] is None and body["per"] == 1.0  # ASR-PC's rates were computed


@pytest.mark.parametrize(
    "row",
    [
        {**PC_ROW, "expected_answer": "   "},
        {**PC_ROW, "task_type": "ASR", "expected_answer": "uh um"},  # Whisper drops the fillers
        {**PC_ROW, "task_type": "EXACT_MATCH", "expected_answer": "?!"},
        {**ROWS[4], "audio_duration": None},
        {**ROWS[4], "audio_duration": 0},
    ],
    ids=["blank", "only-fillers", "only-marks", "no-duration", "zero-duration"],
)
async def test_an_ungradable_row_is_masked_not_scored(server, row):
    body = await answer(server, "Hello.", row=row)
    assert body["mask_sample"] is True and body["reward"] == 0.0
    assert body["failure_kind"] == "asr_with_pc:ungradable" and body["failure_reason"]


async def test_a_grading_past_its_deadline_is_masked_and_the_server_keeps_answering(server):
    row = {**PC_ROW, "expected_answer": "a" + ".," * 1500}
    body = await answer(server, "a" + ",." * 1500, row=row)
    assert body["mask_sample"] is True and body["failure_kind"] == "verifier_error"
    assert "deadline" in body["failure_reason"] and body["reward"] == 0.0
    assert (await answer(server, "Hello, Maria. Did the train leave on time?"))["reward"] == 1.0


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"task_type": "BLEU"}, "task_type"),
        ({"normalization_mode": "audiobench"}, "normalization_mode"),
        ({"expected_answer": ["Hello"]}, "expected_answer"),
        ({"audio_duration": "long"}, "audio_duration"),
        ({"reference_fields": "text_tn"}, "reference_fields"),
    ],
)
async def test_a_malformed_row_is_a_422_naming_the_field(server, change, field):
    status, body = await post_json(server.url + "/verify", {**PC_ROW, **change, "response": A_RESPONSE})
    assert status == 422 and ["body", field] in [error["loc"] for error in body["detail"]]


async def test_a_reference_field_the_row_lacks_is_a_422_saying_which(server):
    row = {**ROWS[3], "reference_fields": ["text_tn", "text_xx"]}
    status, body = await post_json(server.url + "/verify", {**row, "response": A_RESPONSE})
    assert status == 422 and "text_xx" in str(body["detail"])


# --- metrics, recorded data, config -----------------------------------------------------------------


async def test_aggregate_metrics_give_corpus_wer_mean_rates_and_pass_at_k(server):
    first = await answer(server, "Hello, Maria. Did the train leave on time?")
    second = await answer(server, "hello maria did the train leave on time")
    third = await answer(server, "Good night.", row={**PC_ROW, "expected_answer": "Good morning."})
    rollouts = [
        {**first, "_ng_task_index": 0, "_ng_rollout_index": 0},
        {**second, "_ng_task_index": 0, "_ng_rollout_index": 1},
        {**third, "_ng_task_index": 1, "_ng_rollout_index": 0},
    ]
    status, body = await post_json(server.url + "/aggregate_metrics", {"verify_responses": rollouts})
    assert status == 200, body
    metrics = body["agent_metrics"]
    # Corpus WER pools the words: 0 + 0 errors over 8 words, then 1 error in 2 words at k=2.
    assert metrics["corpus_wer@k=1"] == pytest.approx(100 * 1 / 10)
    assert metrics["corpus_wer@k=2"] == pytest.approx(100 * 1 / 18)
    assert metrics["per@k=2"] == pytest.approx(100 * (0.0 + 1.0 + 0.0) / 3)
    # Task 0: one of two right; task 1: "Good night ." misses one of 3 punctuated tokens, so it is right.
    assert metrics["pass@1/accuracy"] == pytest.approx(100 * (0.5 + 1) / 2)
    key = body["key_metrics"]
    assert key["wer"] == metrics["corpus_wer@k=2"] and key["per"] == metrics["per@k=2"]
    assert key["wer_pc"] == metrics["wer_pc@k=2"] and "pass@1[avg-of-2]/accuracy" in key


@pytest.mark.parametrize("rollout", ROLLOUTS, ids=lambda rollout: rollout["sample_id"])
async def test_recorded_rollouts_verify_to_their_recorded_answer(server, rollout):
    status, body = await post_json(server.url + "/verify", rollout)
    assert status == 200, body
    recorded = {key: value for key, value in rollout.items() if key in body}
    assert without_verify_flags(body) == without_verify_flags(recorded)


def test_config_declares_the_environment_and_its_agent():
    check_environment_config(FOLDER, INSTANCE, "other")
    assert {row["agent_ref"]["name"] for row in ROWS} == {"asr_with_pc_simple_agent"}
