"""moldetox: answer extraction and RDKit scoring in-process; /verify and /aggregate_metrics over HTTP
against one real server started from its app.py."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from nemo_gym.testing import (
    LINEAR_CPU_BUDGET_S,
    StartedServer,
    check_environment_config,
    cpu_time_of,
    message_item,
    post_json,
    read_jsonl,
    response_with,
    run_resources_server,
    without_verify_flags,
)
from resources_servers.moldetox.chem import extract_answer, score_answer

FOLDER = Path(__file__).resolve().parents[1]
INSTANCE = "moldetox"
ROWS = read_jsonl(FOLDER / "data" / "example.jsonl")
ROLLOUTS = read_jsonl(FOLDER / "data" / "example_rollouts.jsonl")
NITRO = ROWS[0]  # 4-nitrotoluene -> 4-methylbenzonitrile
GOLD, TOXIC = NITRO["verifier_metadata"]["answer"], NITRO["verifier_metadata"]["toxic_smiles"]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StartedServer]:
    with run_resources_server(
        INSTANCE, tmp_path_factory.mktemp("moldetox"), domain="knowledge", max_answer_chars=300
    ) as started:
        yield started


def said(smiles: str) -> str:
    return json.dumps({"answer": smiles})


async def verify(server: StartedServer, text: str | None, row: dict = NITRO) -> dict:
    items = [message_item(text)] if text is not None else []
    status, body = await post_json(server.url + "/verify", {**row, "response": response_with(*items)})
    assert status == 200, body
    return body


# --- extraction -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "answer"),
    [
        ('{"answer": " CCO "}', "CCO"),
        ('First {"answer": "C"}, on reflection {"answer": "CC"}', "CC"),  # the rightmost
        ('```json\n{"answer": "CCN"}\n```\nThat is it.', "CCN"),
        ('```json\n{"answer": "CCN"}\n```\nCorrection: {"answer": "CCO"}', "CCO"),  # by position, not kind
        ('{"answer": "CCO"} and later {"note": 1}', "CCO"),
    ],
)
def test_the_answer_object_is_found(text, answer):
    assert extract_answer(text) == answer


@pytest.mark.parametrize("text", ["CCO", '{"answer": ""}', '{"answer": 3}', '["CCO"]', '{"smiles": "CCO"}'])
def test_no_answer_object_reads_as_none(text):
    assert extract_answer(text) is None


@pytest.mark.parametrize("text", ["```" * 1_000_000, "{" * 2_000_000, "[" * 2_000_000, '{"a": 1}' * 300_000])
def test_extraction_is_linear(text):
    found, seconds = cpu_time_of(extract_answer, text)
    assert found is None and seconds < LINEAR_CPU_BUDGET_S, seconds


# --- scoring (RDKit) --------------------------------------------------------------------------------


def test_another_writing_of_the_gold_molecule_matches_exactly():
    scores = score_answer("N#Cc1ccc(C)cc1", GOLD, TOXIC)
    assert scores["exact_match"] == 1.0 and scores["validity"] == 1.0 and scores["levenshtein"] == 0.0
    assert scores["tanimoto_morgan"] == scores["tanimoto_rdk"] == scores["tanimoto_maccs"] == 1.0
    assert scores["is_input_copy"] is False


def test_copying_the_toxic_input_is_valid_similar_and_wrong():
    scores = score_answer(TOXIC, GOLD, TOXIC)
    assert scores["exact_match"] == 0.0 and scores["validity"] == 1.0 and scores["is_input_copy"] is True
    assert 0.0 < scores["tanimoto_morgan"] < 1.0 and scores["levenshtein"] > 0


def test_an_invalid_smiles_scores_0_with_validity_0():
    scores = score_answer("c1ccc", GOLD, TOXIC)
    assert scores == {"status": "scored", "validity": 0.0, "exact_match": 0.0, "levenshtein": 9.0}


def test_stereo_and_charge_matter():
    assert score_answer("C[C@H](N)O", "C[C@@H](N)O", None)["exact_match"] == 0.0
    assert score_answer("CC(=O)[O-]", "CC(=O)O", None)["exact_match"] == 0.0


def test_a_gold_that_is_no_molecule_is_bad_gold():
    assert score_answer("CCO", "not a molecule", None) == {"status": "bad_gold"}


# --- /verify ----------------------------------------------------------------------------------------


async def test_the_gold_molecule_earns_1(server):
    body = await verify(
        server, "The nitro group is the alert; a nitrile keeps the shape.\n" + said("N#Cc1ccc(C)cc1")
    )
    assert (
        body["reward"] == 1.0 and body["status"] == "scored" and body["extracted_answer"] == "N#Cc1ccc(C)cc1"
    )
    assert body["endpoint"] == "AMES mutagenicity" and body["dataset_name"] == "TDC/AMES"
    assert body["mask_sample"] is False and body["is_input_copy"] is False


async def test_a_wrong_molecule_scores_0_with_its_similarities(server):
    body = await verify(server, said("Cc1ccc(N)cc1"))
    assert body["reward"] == 0.0 and body["validity"] == 1.0 and 0 < body["tanimoto_morgan"] < 1


@pytest.mark.parametrize(
    ("text", "status"),
    [(None, "empty_output"), ("Cc1ccc(C#N)cc1", "no_answer"), (said("C" * 301), "answer_too_long")],
)
async def test_unscorable_answers_score_0_and_are_measured(server, text, status):
    body = await verify(server, text)
    assert body["reward"] == 0.0 and body["status"] == status and body["mask_sample"] is False
    assert body["validity"] is None and body["tanimoto_morgan"] is None


async def test_a_long_chain_below_the_cap_is_scored_and_the_server_keeps_answering(server):
    body = await verify(server, said("C" * 300))
    assert body["status"] == "scored" and body["reward"] == 0.0
    assert (await verify(server, said(GOLD)))["reward"] == 1.0


@pytest.mark.parametrize(
    ("change", "status"),
    [({"scoring_mode": "safe"}, "unsupported_mode"), ({"answer": "not a molecule"}, "bad_gold")],
)
async def test_rows_that_cannot_be_scored_are_masked(server, change, status):
    row = {**NITRO, "verifier_metadata": {**NITRO["verifier_metadata"], **change}}
    body = await verify(server, said(GOLD), row)
    assert body["status"] == status and body["reward"] == 0.0
    assert body["mask_sample"] is True and body["failure_kind"] == "verifier_error" and body["failure_reason"]


@pytest.mark.parametrize(
    ("meta", "loc"),
    [
        (None, ["body", "verifier_metadata"]),
        ({"scoring_mode": "smiles"}, ["body", "verifier_metadata", "answer"]),
        ({"answer": ""}, ["body", "verifier_metadata", "answer"]),
        ({"answer": 5}, ["body", "verifier_metadata", "answer"]),
        ({"answer": "CC", "scoring_mode": "selfies"}, ["body", "verifier_metadata", "scoring_mode"]),
        ({"answer": "CC", "endpoint": ["AMES"]}, ["body", "verifier_metadata", "endpoint"]),
    ],
)
async def test_a_malformed_row_is_a_422_naming_the_field(server, meta, loc):
    row = {**NITRO, "verifier_metadata": meta, "response": response_with(message_item(said("C")))}
    status, body = await post_json(server.url + "/verify", row)
    assert status == 422 and loc in [error["loc"] for error in body["detail"]], body


async def test_key_metrics_are_accuracy_and_tokens_only(server):
    rollouts = [
        {
            **NITRO,
            "response": response_with(),
            "reward": reward,
            "tanimoto_morgan": 0.7,
            "validity": 1.0,
            "_ng_task_index": index,
            "_ng_rollout_index": 0,
        }  # fmt: skip
        for index, reward in enumerate([1.0, 0.0])
    ]
    status, answer = await post_json(server.url + "/aggregate_metrics", {"verify_responses": rollouts})
    assert status == 200, answer
    assert answer["agent_metrics"]["mean/tanimoto_morgan"] == 0.7
    assert answer["key_metrics"] == {"mean/reward": 0.5}


# --- recorded data, config --------------------------------------------------------------------------


@pytest.mark.parametrize("rollout", ROLLOUTS, ids=lambda rollout: rollout["verifier_metadata"]["id"])
async def test_recorded_rollouts_verify_to_their_recorded_answer(server, rollout):
    row = next(row for row in ROWS if row["verifier_metadata"]["id"] == rollout["verifier_metadata"]["id"])
    status, body = await post_json(server.url + "/verify", {**row, "response": rollout["response"]})
    assert status == 200, body
    recorded = {
        key: value for key, value in rollout.items() if key != "agent_ref" and not key.startswith("_ng_")
    }
    assert without_verify_flags(body) == without_verify_flags(recorded)


def test_the_recordings_include_a_copy_of_the_toxic_input():
    assert {rollout["reward"] for rollout in ROLLOUTS} == {0.0, 1.0}
    assert any(rollout["is_input_copy"] for rollout in ROLLOUTS)


def test_config_declares_the_environment_and_its_agent():
    _, resources, _ = check_environment_config(FOLDER, INSTANCE, "knowledge")
    assert resources.model_extra["max_answer_chars"] == 2000
    assert {row["agent_ref"]["name"] for row in ROWS} == {"moldetox_simple_agent"}
