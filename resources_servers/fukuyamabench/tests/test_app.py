"""fukuyamabench: pathway extraction and RDKit scoring in-process; /verify and /aggregate_metrics over HTTP
against one real server started from its app.py."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from rdkit import Chem

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
from resources_servers.fukuyamabench.pathway import extract_pathway
from resources_servers.fukuyamabench.scoring import Limits, score_answer

FOLDER = Path(__file__).resolve().parents[1]
INSTANCE = "fukuyamabench"
ROWS = read_jsonl(FOLDER / "data" / "example.jsonl")
ROLLOUTS = read_jsonl(FOLDER / "data" / "example_rollouts.jsonl")
LIMITS = Limits(max_smiles_chars=200, max_components=8, max_steps=50, max_total_chars=2000)
ESTERIFICATION = ROWS[2]  # 5 gold steps, checkpoints [[2], [3, 4], [5]]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StartedServer]:
    with run_resources_server(
        INSTANCE, tmp_path_factory.mktemp("fukuyamabench"), domain="knowledge", max_smiles_chars=200
    ) as started:
        yield started


def answer(*products: str | list[str], key: str = "product_smiles") -> str:
    steps = [{"step_id": index + 1, key: value} for index, value in enumerate(products)]
    return "## Reasoning\nThinking.\n\n## Result\n\n```json\n" + json.dumps(steps, indent=2) + "\n```\n"


def gold_answer(row: dict) -> str:
    return answer(*[".".join(step["products"]) for step in row["verifier_metadata"]["gt_pathway"]])


def score(text: str, row: dict = ESTERIFICATION, lenient: bool = True, limits: Limits = LIMITS) -> dict:
    meta = row["verifier_metadata"]
    return score_answer(text, meta["gt_pathway"], meta["checkpoints"], lenient, limits)


# --- extraction -------------------------------------------------------------------------------------


def test_the_last_fenced_pathway_is_read():
    text = answer("CC") + "On reflection:\n" + answer("CCC")
    assert extract_pathway(text) == [{"step_id": 1, "product_smiles": "CCC"}]


def test_without_a_fenced_array_the_array_after_the_result_header_is_read():
    text = 'Early [{"step_id": 1, "product_smiles": "C"}]\n## Result\nSteps: [{"step_id": 1, "product_smiles": "CC"}]'
    assert extract_pathway(text) == [{"step_id": 1, "product_smiles": "CC"}]


def test_loose_step_objects_are_collected_last():
    text = 'Step {"step_id": 1, "product_smiles": "C"} then {"step_id": 2, "products": ["CC"]} and {"x": 1}'
    assert extract_pathway(text) == [
        {"step_id": 1, "product_smiles": "C"},
        {"step_id": 2, "products": ["CC"]},
    ]


@pytest.mark.parametrize("text", ["", "no steps", "```json\n[1, 2]\n```", '[{"step_id": 1}]'])
def test_no_pathway_reads_as_none(text):
    assert extract_pathway(text) is None


@pytest.mark.parametrize(
    "text",
    ["```" * 1_000_000, "[" * 2_000_000, "[{" * 1_000_000, "{" * 2_000_000, '[{"step_id": 1}]' * 200_000],
    ids=["fences", "brackets", "array-objects", "braces", "many-arrays"],
)
def test_extraction_is_linear_on_pathological_texts(text):
    found, seconds = cpu_time_of(extract_pathway, text)
    assert found is None and seconds < LINEAR_CPU_BUDGET_S, seconds


# --- scoring (RDKit) --------------------------------------------------------------------------------


@pytest.mark.parametrize("row", ROWS, ids=lambda row: row["verifier_metadata"]["case_id"])
def test_every_gold_pathway_scores_as_its_own_prediction(row):
    assert score(gold_answer(row), row)["exact_match"] is True


def test_other_writings_of_the_same_species_match():
    """Atom maps, another atom order, separate list entries for a dotted gold string."""
    text = answer(
        "[CH3:1][C:2]([OH:4])=[OH+:3]", "C[OH+]C(C)(O)O", ["O", "C[O:6]C(=[OH+])C"], "COC(C)=O.[OH3+]"
    )
    scores = score(text)
    assert scores["exact_match"] is True and scores["checkpoints_correct"] == 3 and scores["pred_length"] == 4


def test_finer_steps_than_gold_are_not_penalised_but_order_is():
    fine = answer("CC(O)=[OH+]", "CCO", "C[OH+]C(C)(O)O", "COC(C)(O)[OH2+]", "CCCC", "COC(C)=O.[OH3+]")
    assert score(fine)["exact_match"] is True
    backwards = answer("COC(C)=O.[OH3+]", "COC(C)(O)[OH2+]", "C[OH+]C(C)(O)O")
    scores = score(backwards)
    assert scores["exact_match"] is False and scores["checkpoints_correct"] == 1


def test_a_missed_checkpoint_fails_every_later_one():
    scores = score(answer("C[OH+]C(C)(O)O", "CCCC", "COC(C)=O.[OH3+]"))
    assert scores["checkpoints_correct"] == 1 and scores["checkpoint_accuracy"] == pytest.approx(1 / 3)
    assert scores["any_checkpoint_correct"] is True and scores["exact_match"] is False


def test_lenient_accepts_a_subset_of_gold_and_strict_does_not():
    text = answer("C[OH+]C(C)(O)O", "COC(C)(O)[OH2+]", "COC(C)=O")  # the last step omits H3O+
    assert score(text)["exact_match"] is True
    assert score(text, lenient=False)["exact_match"] is False
    assert score(answer("C[OH+]C(C)(O)O", "COC(C)(O)[OH2+]", "COC(C)=O.[OH3+].CC"))["exact_match"] is False


@pytest.mark.parametrize(
    "last",
    [
        "COC(C)=O.[OH3+].C1CC",
        "COC(C)=O.[OH3+].not_smiles",
        "COC(C)=O." + "C" * 201,
        ".".join(["COC(C)=O"] * 9),
    ],
    ids=["unclosed-ring", "garbage", "too-long", "too-many-species"],
)
def test_an_unreadable_or_oversized_component_fails_its_step(last):
    assert score(answer("C[OH+]C(C)(O)O", "COC(C)(O)[OH2+]", last))["exact_match"] is False


def test_steps_past_the_limit_are_not_read():
    text = answer(*(["CCCC"] * 50), "C[OH+]C(C)(O)O", "COC(C)(O)[OH2+]", "COC(C)=O.[OH3+]")
    assert score(text)["exact_match"] is False and score(text)["pred_length"] == 53


def test_products_past_the_character_budget_are_not_read():
    padding = ["C" * 100 + "O"] * 20  # 2020 characters: past the budget of 2000
    text = answer(*padding, "C[OH+]C(C)(O)O", "COC(C)(O)[OH2+]", "COC(C)=O.[OH3+]")
    assert score(text)["exact_match"] is False
    assert (
        score(answer(*padding[:15], "C[OH+]C(C)(O)O", "COC(C)(O)[OH2+]", "COC(C)=O.[OH3+]"))["exact_match"]
        is True
    )


def test_species_over_rdkits_valence_model_parse_without_the_valence_check():
    """RDKit's valence model rejects five chlorines on aluminium (as it does ligand counts of some metal
    centres in older releases); such gold must stay matchable, and distinct from its neighbours."""
    assert Chem.MolFromSmiles("Cl[Al](Cl)(Cl)(Cl)Cl") is None
    row = {
        "verifier_metadata": {"gt_pathway": [{"products": ["Cl[Al](Cl)(Cl)(Cl)Cl"]}], "checkpoints": [[1]]}
    }
    assert score(answer("[Al](Cl)(Cl)(Cl)(Cl)Cl"), row)["exact_match"] is True
    assert score(answer("[Al](Cl)(Cl)(Cl)(Cl)(Cl)Cl"), row)["exact_match"] is False


@pytest.mark.parametrize(
    "gold",
    [
        {"gt_pathway": [{"products": ["not_smiles"]}], "checkpoints": [[1]]},
        {"gt_pathway": [{"products": ["C"]}], "checkpoints": [[2]]},
    ],
    ids=["unparseable", "out-of-range"],
)
def test_gold_that_nothing_could_match_is_bad_gold(gold):
    assert score(answer("C"), {"verifier_metadata": gold}) == {"status": "bad_gold", "bad_checkpoints": [1]}


# --- /verify ----------------------------------------------------------------------------------------


async def verify(server: StartedServer, text: str | None, row: dict = ESTERIFICATION) -> dict:
    items = [message_item(text)] if text is not None else []
    status, body = await post_json(server.url + "/verify", {**row, "response": response_with(*items)})
    assert status == 200, body
    return body


async def test_a_right_mechanism_earns_1_with_its_checkpoints(server):
    body = await verify(server, gold_answer(ESTERIFICATION))
    assert body["reward"] == 1.0 and body["status"] == "scored" and body["mask_sample"] is False
    assert (body["checkpoints_correct"], body["checkpoints_total"], body["gt_steps"]) == (3, 3, 5)
    assert body["case_id"] == "X03" and body["case_set"] == "B"


async def test_a_wrong_mechanism_scores_0_with_partial_credit(server):
    body = await verify(server, answer("C[OH+]C(C)(O)O", "CCCC"))
    assert body["reward"] == 0.0 and body["checkpoint_accuracy"] == pytest.approx(1 / 3)


@pytest.mark.parametrize(("text", "status"), [(None, "empty_output"), ("I do not know.", "no_pathway")])
async def test_no_pathway_scores_0_without_scores(server, text, status):
    body = await verify(server, text)
    assert body["reward"] == 0.0 and body["status"] == status and body["checkpoints_total"] is None
    assert body["mask_sample"] is False


async def test_bad_gold_is_masked(server):
    row = {
        **ESTERIFICATION,
        "verifier_metadata": {"gt_pathway": [{"products": ["xx"]}], "checkpoints": [[1]]},
    }
    body = await verify(server, answer("C"), row)
    assert (
        body["status"] == "bad_gold"
        and body["mask_sample"] is True
        and body["failure_kind"] == "verifier_error"
    )


async def test_a_flood_of_distinct_species_is_scored_and_the_server_keeps_answering(server):
    flood = answer(*["C" * length + "O" for length in range(100, 199)] * 2)
    body = await verify(server, flood)
    assert body["reward"] == 0.0 and body["status"] == "scored" and body["mask_sample"] is False
    assert (await verify(server, gold_answer(ESTERIFICATION)))["reward"] == 1.0


@pytest.mark.parametrize(
    ("meta", "loc"),
    [
        (None, ["body", "verifier_metadata"]),
        ({"checkpoints": [[1]]}, ["body", "verifier_metadata", "gt_pathway"]),
        ({"gt_pathway": [], "checkpoints": [[1]]}, ["body", "verifier_metadata", "gt_pathway"]),
        (
            {"gt_pathway": [{"products": ["C"]}], "checkpoints": []},
            ["body", "verifier_metadata", "checkpoints"],
        ),
        (
            {"gt_pathway": [{"products": ["C"]}], "checkpoints": [["one"]]},
            ["body", "verifier_metadata", "checkpoints", 0, 0],
        ),
        (
            {"gt_pathway": [{"products": ["C"]}], "checkpoints": [[1]], "lenient": "maybe"},
            ["body", "verifier_metadata", "lenient"],
        ),
    ],
)
async def test_a_malformed_row_is_a_422_naming_the_field(server, meta, loc):
    row = {**ESTERIFICATION, "verifier_metadata": meta, "response": response_with(message_item("x"))}
    status, body = await post_json(server.url + "/verify", row)
    assert status == 422 and loc in [error["loc"] for error in body["detail"]], body


async def test_metrics_are_per_tier_and_the_pooled_reward_is_not_a_key_metric(server):
    def rollout(task: int, case_set: str, reward: float) -> dict:
        return {**ESTERIFICATION, "response": response_with(), "reward": reward, "case_set": case_set,
                "_ng_task_index": task, "_ng_rollout_index": 0}  # fmt: skip

    rollouts = [rollout(0, "A", 1.0), rollout(1, "A", 0.0), rollout(2, "B", 0.0)]
    status, answer_ = await post_json(server.url + "/aggregate_metrics", {"verify_responses": rollouts})
    assert status == 200, answer_
    assert (
        answer_["agent_metrics"]["A/pass@1/accuracy"] == 50.0
        and answer_["agent_metrics"]["B/pass@1/accuracy"] == 0.0
    )
    assert "A/pass@1/accuracy" in answer_["key_metrics"] and "mean/reward" not in answer_["key_metrics"]


# --- recorded data, config --------------------------------------------------------------------------


@pytest.mark.parametrize("rollout", ROLLOUTS, ids=lambda rollout: rollout["case_id"])
async def test_recorded_rollouts_verify_to_their_recorded_answer(server, rollout):
    row = next(row for row in ROWS if row["verifier_metadata"]["case_id"] == rollout["case_id"])
    status, body = await post_json(server.url + "/verify", {**row, "response": rollout["response"]})
    assert status == 200, body
    recorded = {
        key: value for key, value in rollout.items() if key != "agent_ref" and not key.startswith("_ng_")
    }
    assert without_verify_flags(body) == without_verify_flags(recorded)


def test_config_declares_the_environment_and_its_agent():
    _, resources, _ = check_environment_config(FOLDER, INSTANCE, "knowledge")
    assert (
        resources.model_extra["max_smiles_chars"] == 1000 and resources.model_extra["grading_timeout_s"] == 20
    )
    assert {row["agent_ref"]["name"] for row in ROWS} == {"fukuyamabench_simple_agent"}
