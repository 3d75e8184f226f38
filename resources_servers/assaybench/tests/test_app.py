"""assaybench over HTTP: the server runs as a real process started from its app.py; the metrics are also
checked as plain functions against hand-computed values."""

from __future__ import annotations

import math
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from pydantic import ValidationError

from nemo_gym.testing import (
    StartedServer,
    check_environment_config,
    message_item,
    post_json,
    read_jsonl,
    response_with,
    run_resources_server,
)
from resources_servers.assaybench.app import AssayBenchConfig
from resources_servers.assaybench.ranking import adjusted_ndcg, extract_genes, ndcg, ranking_metrics

FOLDER = Path(__file__).resolve().parents[1]
NAME = "assaybench"
ROWS = read_jsonl(FOLDER / "data" / "example.jsonl")
ROLLOUTS = read_jsonl(FOLDER / "data" / "example_rollouts.jsonl")
SHIPPED = yaml.safe_load((FOLDER / "configs" / f"{NAME}.yaml").read_text())[NAME]["resources_servers"][NAME]
ROW = ROWS[0]  # nutlin-3a: hits TP53 > CDKN1A > BAX > BBC3, MDM2 opposite


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StartedServer]:
    with run_resources_server(NAME, tmp_path_factory.mktemp(NAME), **SHIPPED) as started:
        yield started


def answer(genes: str) -> str:
    return f"[[ ## reasoning ## ]]\nbecause\n\n[[ ## answer ## ]]\n{genes}\n\n[[ ## completed ## ]]"


async def verify(server: StartedServer, text: str | None, **row) -> dict:
    items = [message_item(text)] if text is not None else []
    status, result = await post_json(
        server.url + "/verify", {**ROW, **row, "response": response_with(*items)}
    )
    assert status == 200, result
    return result


async def test_the_ideal_ranking_earns_1(server):
    result = await verify(server, answer("TP53, CDKN1A, BAX, BBC3"))
    assert result["reward"] == pytest.approx(1.0)
    assert (result["extraction_mode"], result["failure_reason"]) == ("answer_field", None)
    assert result["metrics"]["recall@5"] == 1.0
    assert result["phenotype_group"] == "fitness_proliferation_viability"


async def test_a_wrong_ranking_earns_0_and_an_opposite_hit_on_top_costs_score(server):
    wrong = await verify(server, answer("KRAS, MYC, EGFR, MDM2, PTEN"))
    assert wrong["reward"] == 0.0 and wrong["failure_reason"] is None
    assert wrong["metrics"]["precision@5"] == 0.0 and wrong["metrics"]["fdr@5"] == pytest.approx(0.2)
    good = await verify(server, answer("TP53, CDKN1A, BAX, BBC3, KRAS"))
    spoiled = await verify(server, answer("MDM2, TP53, CDKN1A, BAX, BBC3"))
    assert 0.0 < spoiled["reward"] < good["reward"]


async def test_aliases_numbering_and_case_are_normalized_and_genes_outside_the_screen_are_unscored(server):
    result = await verify(server, answer("1. TP53\n2. CDKN1A (p21)\n3. FAKE1\n4. Bax"))
    assert result["predicted_genes"] == ["TP53", "CDKN1A", "FAKE1", "Bax"]
    # FAKE1 was not assayed: dropped after the cut, so Bax (as BAX) moves up to the third rank.
    assert result["metrics"]["ndcg@5"] == pytest.approx(ndcg([3.0, 2.0, 1.5], ROW["relevance_scores"], 5))
    assert result["metrics"]["unscored_rate"] == pytest.approx(1 / 4)


@pytest.mark.parametrize(
    "text", [None, "", "I cannot predict this screen.", answer("no idea, sorry")], ids=str
)
async def test_a_reply_without_a_gene_list_earns_0_with_a_reason(server, text):
    result = await verify(server, text)
    assert (result["reward"], result["num_predicted"], result["extraction_mode"]) == (0.0, 0, "none")
    assert result["failure_reason"] == "no gene list could be read from the reply"
    assert result["mask_sample"] is False


async def test_a_reply_without_the_answer_field_is_scanned_whole(server):
    result = await verify(server, "The hits should be TP53 and then CDKN1A.")
    assert (result["extraction_mode"], result["predicted_genes"]) == ("raw_fallback", ["TP53", "CDKN1A"])
    assert result["reward"] > 0.5


async def test_a_think_block_is_not_read(server):
    result = await verify(server, "<think>MDM2 KRAS MYC</think>The hits: TP53, CDKN1A")
    assert result["predicted_genes"] == ["TP53", "CDKN1A"]


async def test_fields_nested_under_verifier_metadata_are_read(server):
    row = {k: v for k, v in ROW.items() if k not in ("relevance_genes", "relevance_scores")}
    metadata = {"relevance_genes": ROW["relevance_genes"], "relevance_scores": ROW["relevance_scores"]}
    status, result = await post_json(
        server.url + "/verify",
        {**row, "verifier_metadata": metadata, "response": response_with(message_item(answer("TP53")))},
    )
    assert status == 200, result
    assert result["reward"] > 0


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"relevance_scores": [1.0]}, None),
        ({"relevance_genes": []}, "relevance_genes"),
        ({"relevance_genes": "TP53"}, "relevance_genes"),
    ],
)
async def test_a_malformed_row_is_a_422(server, change, field):
    status, result = await post_json(
        server.url + "/verify", {**ROW, **change, "response": response_with(message_item("TP53"))}
    )
    assert status == 422, result
    if field is not None:
        assert any(field in error["loc"] for error in result["detail"])


async def test_metrics_average_the_headline_columns_per_phenotype(server):
    rollouts = [{**r, "_ng_task_index": i, "_ng_rollout_index": 0} for i, r in enumerate(ROLLOUTS)]
    status, result = await post_json(server.url + "/aggregate_metrics", {"verify_responses": rollouts})
    assert status == 200, result
    metrics = result["agent_metrics"]
    mean = 100 * sum(r["reward"] for r in ROLLOUTS) / len(ROLLOUTS)
    assert metrics["pass@1[avg-of-1]/adjusted_ndcg@100"] == pytest.approx(mean)
    assert metrics["pass@1[avg-of-1]/empty_prediction"] == pytest.approx(20.0)
    assert "fitness_proliferation_viability/pass@1[avg-of-1]/adjusted_ndcg@100" in metrics
    assert result["key_metrics"]["pass@1[avg-of-1]/adjusted_ndcg@100"] == pytest.approx(mean)


@pytest.mark.parametrize("rollout", ROLLOUTS, ids=lambda r: r["source_id"])
async def test_recorded_rollouts_reproduce_their_answer(server, rollout):
    row = next(row for row in ROWS if row["source_id"] == rollout["source_id"])
    status, result = await post_json(server.url + "/verify", {**row, "response": rollout["response"]})
    assert status == 200, result
    assert result == {key: rollout[key] for key in result}, "the recorded line holds the /verify answer"


# ---- the metrics as functions ---------------------------------------------------------------------------


def test_adjusted_ndcg_by_hand():
    scores = [2.0, 1.0, 0.0, 0.0]
    ideal = 2.0 + 1.0 / math.log2(3)
    random_gain = sum(0.75 / math.log2(i + 2) for i in range(2))  # mean relevance at both ranks
    got = ndcg([1.0, 2.0], scores, 2)
    assert got == pytest.approx((1.0 + 2.0 / math.log2(3)) / ideal)
    expected = (got - random_gain / ideal) / (1 - random_gain / ideal)
    assert adjusted_ndcg([1.0, 2.0], scores, 2) == pytest.approx(expected)
    assert adjusted_ndcg([0.0, 0.0], scores, 2) == 0.0


def test_precision_and_fdr_need_k_distinct_genes():
    metrics = ranking_metrics(["A", "B", "A"], ["A", "B", "C"], [1.0, -1.0, 0.0], [2, 3], True)
    assert (metrics["precision@2"], metrics["fdr@2"], metrics["normalized_precision@2"]) == (0.5, 0.5, 1.0)
    assert "precision@3" not in metrics and "fdr@3" not in metrics


def test_the_quality_gate_rescans_a_thin_answer_field():
    text = "TP53 CDKN1A BAX look right.\n[[ ## answer ## ]]\nTP53"
    assert extract_genes(text) == (["TP53"], "answer_field")
    assert extract_genes(text, min_expected_genes=2) == (["TP53", "CDKN1A", "BAX"], "quality_gate_fallback")


def test_config_declares_the_environment():
    check_environment_config(FOLDER, NAME, "knowledge")


@pytest.mark.parametrize("reward_metric", ["adjusted_ndcg@7", "auroc@100", "ndcg"])
def test_a_reward_metric_that_is_never_computed_is_refused(reward_metric):
    base = {"name": NAME, "host": "127.0.0.1", "port": 0, **SHIPPED}
    with pytest.raises(ValidationError, match="reward_metric"):
        AssayBenchConfig.model_validate({**base, "reward_metric": reward_metric})
