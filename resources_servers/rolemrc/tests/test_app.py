"""rolemrc: BLEU, 13a tokens and reasoning removal in-process, everything else over HTTP against one server."""

import math
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from pydantic import ValidationError

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
from resources_servers.rolemrc.app import RoleMRCConfig
from resources_servers.rolemrc.grading import sentence_bleu, strip_reasoning, task_dimension, tokenize_13a

FOLDER = Path(__file__).resolve().parents[1]
INSTANCE = "rolemrc"
ROWS = read_jsonl(FOLDER / "data" / "example.jsonl")
ROLLOUTS = read_jsonl(FOLDER / "data" / "example_rollouts.jsonl")
A_RESPONSE = ROLLOUTS[0]["response"]
GOLD = "the ship sails at dawn with the tide"
ROW = {**ROWS[0], "reference": GOLD}
DEADLINE_S = 3.0


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StartedServer]:
    workdir = tmp_path_factory.mktemp("rolemrc")
    with run_resources_server(
        INSTANCE,
        workdir,
        domain="instruction_following",
        include_bertscore=True,
        grading_timeout_s=DEADLINE_S,
    ) as started:
        yield started


async def verify(server: StartedServer, *items: dict, row: dict = ROW) -> dict:
    status, body = await post_json(
        server.url + "/verify", {**row, "response": response_with(*items, **A_RESPONSE)}
    )
    assert status == 200, body
    return body


# --- the metrics (in-process) -----------------------------------------------------------------------


def test_13a_tokens_split_symbols_but_not_apostrophes_and_keep_numbers_whole():
    assert tokenize_13a("Hi, Ana! It's $3.50 - 1-2 &amp; more.") == (
        ["Hi", ",", "Ana", "!", "It's", "$", "3.50", "-", "1", "-", "2", "&", "more", "."]
    )


@pytest.mark.parametrize(
    ("reply", "reference", "bleu"),
    [
        (GOLD, GOLD, 1.0),
        ("the ship sails at dawn with the tide today", GOLD, pytest.approx((5 / 9) ** 0.25)),
        ("the ship sails at noon", GOLD, pytest.approx((1 / 5) ** 0.25 * math.exp(1 - 8 / 5))),
        ("the ship sails", GOLD, 0.0),  # under 4 tokens there is no 4-gram: unsmoothed BLEU is 0
        ("ship the", GOLD, 0.0),  # no 3-gram at all: unsmoothed BLEU is 0
        ("", GOLD, 0.0),
    ],
)
def test_sentence_bleu_is_unsmoothed_with_a_brevity_penalty(reply, reference, bleu):
    assert sentence_bleu(reply, reference) == bleu


@pytest.mark.parametrize(
    ("text", "reply"),
    [
        ("no tags at all  ", "no tags at all  "),
        ("<think>plan</think>  Aye.", "Aye."),
        ("<think>a</think>x<think>b</think>y", "xy"),
        ("planning without an opening tag</think> Aye.", "Aye."),
    ],
)
def test_reasoning_is_removed_before_scoring(text, reply):
    assert strip_reasoning(text) == reply


@pytest.mark.parametrize(
    ("task", "dimension"),
    [
        ("role_related_mrc_answer_with_narration", "on_scene_dialogue"),
        ("role_related_mrc_refused_no_narration-2ndrefused", "multi_turn"),
        ("role_unrelated_mrc_refused_with_narration-2ndanswer", "multi_turn"),
        ("role_related_mrc_answer_no_narration-special-content", "nested_instruction"),
        ("role_related_mrc_answer_with_narration-refused", "instruction_priority"),
    ],
)
def test_the_dimension_comes_from_the_task_suffix(task, dimension):
    assert task_dimension(task) == dimension


def test_judge_mode_is_refused_at_startup():
    with pytest.raises(ValidationError, match="judge mode is not supported"):
        RoleMRCConfig(name="rolemrc", entrypoint="app.py", domain="instruction_following", mode="judge")


# --- /verify ----------------------------------------------------------------------------------------


async def test_the_gold_reply_earns_1_and_the_answer_echoes_the_row(server):
    body = await verify(server, message_item(GOLD))
    assert body["reward"] == 1.0 == body["rougeL"] == body["rouge1"] == body["rouge2"] == body["bleu"]
    assert body["meteor"] is None and body["generation"] == GOLD
    assert (body["reference"], body["task"], body["dimension"]) == (GOLD, ROW["task"], "on_scene_dialogue")
    scores = {"rouge1", "rouge2", "rougeL", "rougeLsum", "bleu", "meteor", "generation"}
    assert set(body) == {*BASE_VERIFY_FIELDS, "reference", "task", "dimension", "agent_ref", *scores}


async def test_the_reward_is_rouge_l_with_stemming(server):
    body = await verify(server, message_item("The ships sailed at dawn, riding the tide!"))
    # Stemmed tokens: the ship sail at dawn ride the tide (8) against the ship sail at dawn with the tide (8):
    # the longest common subsequence has 7 tokens.
    assert body["reward"] == body["rougeL"] == pytest.approx(7 / 8)
    assert body["bleu"] == 0.0  # "the ship sailed at" is no 4-gram of the gold reply after 13a tokens


async def test_reasoning_is_not_scored_and_a_row_can_name_its_dimension(server):
    body = await verify(
        server, message_item(f"<think>{'plan ' * 50}</think>{GOLD}"), row={**ROW, "dimension": "x"}
    )
    assert body["reward"] == 1.0 and body["generation"] == GOLD and body["dimension"] == "x"


async def test_a_reply_without_text_scores_0(server):
    body = await verify(server, function_call_item("lookup", {}))
    assert body["reward"] == 0.0 and body["bleu"] == 0.0 and body["generation"] == ""


async def test_the_generation_is_cut_at_500_characters(server):
    body = await verify(server, message_item("aye " * 300))
    assert len(body["generation"]) == 500


async def test_scoring_past_its_deadline_is_masked_and_the_server_keeps_answering(server):
    row = {**ROW, "reference": " ".join(f"w{i}" for i in range(6000))}
    body = await verify(server, message_item(" ".join(f"w{i}" for i in range(6000, 0, -1))), row=row)
    assert body["mask_sample"] is True and body["failure_kind"] == "verifier_error" and body["reward"] == 0.0
    assert (await verify(server, message_item(GOLD)))["reward"] == 1.0


@pytest.mark.parametrize(
    ("change", "field"),
    [({"reference": "   "}, "reference"), ({"reference": None}, "reference"), ({"task": 3}, "task")],
)
async def test_a_malformed_row_is_a_422_naming_the_field(server, change, field):
    status, body = await post_json(server.url + "/verify", {**ROW, **change, "response": A_RESPONSE})
    assert status == 422 and ["body", field] in [error["loc"] for error in body["detail"]]


# --- metrics, recorded data, config -----------------------------------------------------------------


async def test_aggregate_metrics_give_means_per_dimension_and_per_reference_metric(server):
    results = [
        await verify(server, message_item(GOLD)),
        await verify(server, message_item("the ship sails"), row={**ROW, "task": "t-refused"}),
    ]
    rollouts = [{**result, "_ng_task_index": i, "_ng_rollout_index": 0} for i, result in enumerate(results)]
    status, body = await post_json(server.url + "/aggregate_metrics", {"verify_responses": rollouts})
    assert status == 200, body
    metrics = body["agent_metrics"]
    assert metrics["mean_reward"] == pytest.approx((1.0 + results[1]["reward"]) / 2) and metrics["count"] == 2
    assert metrics["dimension/instruction_priority/mean_reward"] == results[1]["reward"]
    assert metrics["auto/bleu/mean"] == pytest.approx((1.0 + results[1]["bleu"]) / 2)
    assert "auto/meteor/mean" not in metrics  # never computed
    assert body["key_metrics"]["auto/rougeL/mean"] == metrics["auto/rougeL/mean"]


@pytest.mark.parametrize("rollout", ROLLOUTS, ids=lambda rollout: rollout["task"])
async def test_recorded_rollouts_verify_to_their_recorded_answer(server, rollout):
    status, body = await post_json(server.url + "/verify", rollout)
    assert status == 200, body
    assert without_verify_flags(body) == without_verify_flags({key: rollout[key] for key in body})


def test_config_declares_the_environment_and_its_agent():
    _, resources, _ = check_environment_config(FOLDER, INSTANCE, "instruction_following")
    assert (resources.mode, resources.include_bertscore) == ("reference", False)
    assert {row["agent_ref"]["name"] for row in ROWS} == {"rolemrc_simple_agent"}


def test_the_metrics_need_no_download():
    """Scoring reads no downloaded data: it runs with NLTK's data path pointing nowhere."""
    code = "from resources_servers.rolemrc.grading import reference_metrics; print(reference_metrics('a b', 'a b'))"
    env = {"PYTHONPATH": str(FOLDER.parents[1]), "NLTK_DATA": "/nonexistent"}
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60)
    assert result.returncode == 0 and "'meteor': None" in result.stdout, result.stderr
