"""proof_judge over HTTP: the server runs as a real process and judges through a real openai_model server in
front of the scripted upstream (the one test double)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from nemo_gym.config_types import ConfigError
from nemo_gym.prompt import load_judge_prompt_file
from nemo_gym.testing import (
    JUDGE_MODEL_REF,
    ScriptedJudge,
    StartedServer,
    check_environment_config,
    instance_config,
    post_json,
    read_jsonl,
    response_with,
    run_instance,
    run_scripted_judge,
    without_verify_flags,
)
from resources_servers.proof_judge.app import ProofJudgeConfig
from resources_servers.proof_judge.scoring import SelfEvaluatedProof, read_score, read_self_evaluated_proof
from tests.upstream_script import ScriptedUpstream, assistant_message

FOLDER = Path(__file__).resolve().parents[1]
NAME = "proof_judge"
ROWS = read_jsonl(FOLDER / "data" / "example.jsonl")
ROLLOUTS = read_jsonl(FOLDER / "data" / "example_rollouts.jsonl")
SHIPPED = yaml.safe_load((FOLDER / "configs" / f"{NAME}.yaml").read_text())[NAME]["resources_servers"][NAME]
ALPHA, BETA = SHIPPED["alpha"], SHIPPED["beta"]
ROW = ROWS[0]
PROOF = "Odd integers are 2a+1 and 2b+1; their sum 2(a+b+1) is even."
CRITIQUE = "Every step is an identity."


def answer(self_score: str = "1", proof: str = PROOF, critique: str = CRITIQUE) -> str:
    return f"## Solution\n{proof}\n\n## Self Evaluation\n{critique}\n\\boxed{{{self_score}}}"


@dataclass
class Judged:
    server: StartedServer
    judge: ScriptedJudge

    @property
    def url(self) -> str:
        return self.server.url


@pytest.fixture(scope="module")
def judge(
    scripted_upstream: ScriptedUpstream, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ScriptedJudge]:
    with run_scripted_judge(scripted_upstream, tmp_path_factory.mktemp(f"{NAME}_judge")) as started:
        yield started


def start(judge: ScriptedJudge, workdir: Path, **overrides: Any) -> Any:
    settings = {**SHIPPED, "judge_model_server": JUDGE_MODEL_REF, **overrides}
    config = {**judge.config, NAME: instance_config("resources_servers", NAME, **settings)}
    return run_instance(config, NAME, workdir)


@pytest.fixture(scope="module")
def judged(judge: ScriptedJudge, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Judged]:
    with ExitStack() as servers:
        yield Judged(servers.enter_context(start(judge, tmp_path_factory.mktemp(NAME))), judge)


async def verify(judged: Judged, text: str, row: dict | None = None) -> dict:
    body = {**(row or ROW), "response": response_with(assistant_message(text))}
    status, result = await post_json(judged.url + "/verify", body)
    assert status == 200, result
    return result


def expected_reward(
    self_score: float, r_y: float, r_meta: float, alpha: float = ALPHA, beta: float = BETA
) -> float:
    return alpha * r_y + beta * (1 - abs(self_score - r_y)) * r_meta


def test_the_shipped_weights_are_deepseekmath_v2s():
    assert (ALPHA, BETA) == (0.76, 0.24)


async def test_when_the_judges_agree_with_a_right_self_evaluation_the_reward_is_full(judged):
    judged.judge.script("All steps check out.\n\\boxed{1}", "The assessment is accurate.\n\\boxed{1}")
    result = await verify(judged, "<think>try a = b</think>" + answer("1"))
    assert result["reward"] == pytest.approx(1.0)
    assert (result["r_y"], result["r_meta"], result["r_z"], result["self_score"]) == (1.0, 1.0, 1.0, 1.0)
    assert (result["r_format"], result["format_error"], result["judge_failure"]) == (1.0, None, None)
    assert result["proof"] == PROOF
    verifier, meta = judged.judge.requests()
    verifier_prompt, meta_prompt = verifier["input"][-1]["content"], meta["input"][-1]["content"]
    assert f"Problem:\n{ROW['problem']}\n" in verifier_prompt and f"Solution:\n{PROOF}" in verifier_prompt
    assert CRITIQUE not in verifier_prompt and "try a = b" not in verifier_prompt
    assert f"Solution:\n{PROOF}\n" in meta_prompt
    assert f"Author's assessment:\n{CRITIQUE}\n\\boxed{{1}}" in meta_prompt
    assert (verifier["temperature"], verifier["top_p"], verifier["max_output_tokens"]) == (0.6, 0.95, 100000)
    assert [len(result["judge_evaluations"]), result["verifier_output"]] == [
        2,
        "All steps check out.\n\\boxed{1}",
    ]


@pytest.mark.parametrize(
    ("self_score", "verifier", "meta", "reward"),
    [
        ("1", "0", "1", 0.0),  # an overconfident self-evaluation of a wrong proof earns nothing
        ("1", "0.5", "1", 0.5),  # 0.76 * 0.5 + 0.24 * 0.5
        ("0.5", "1", "0.5", 0.82),  # 0.76 + 0.24 * 0.5 * 0.5
        ("0", "0", "1", 0.24),  # a wrong proof honestly scored 0 keeps the self-evaluation reward
        ("0.5", "0.5", "0", 0.38),  # the meta-verifier rejects the assessment
    ],
)
async def test_when_the_judges_disagree_the_reward_is_the_formulas(
    judged, self_score, verifier, meta, reward
):
    judged.judge.script(f"Verdict.\n\\boxed{{{verifier}}}", f"Rating.\n\\boxed{{{meta}}}")
    result = await verify(judged, answer(self_score))
    assert result["reward"] == pytest.approx(reward)
    assert result["reward"] == pytest.approx(expected_reward(float(self_score), float(verifier), float(meta)))
    assert (result["r_y"], result["r_meta"]) == (float(verifier), float(meta))
    assert result["r_z"] == pytest.approx((1 - abs(float(self_score) - float(verifier))) * float(meta))


@pytest.fixture(scope="module")
def verifier_only(judge: ScriptedJudge, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Judged]:
    with start(judge, tmp_path_factory.mktemp(f"{NAME}_beta0"), alpha=1.0, beta=0.0) as server:
        yield Judged(server, judge)


async def test_with_beta_0_the_reward_is_alpha_r_y_and_the_meta_verifier_is_not_asked(verifier_only):
    verifier_only.judge.script("Minor gap.\n\\boxed{0.5}", "unused\n\\boxed{1}")
    result = await verify(verifier_only, answer("1"))
    assert (result["reward"], result["r_y"], result["r_meta"], result["r_z"]) == (0.5, 0.5, None, None)
    assert len(verifier_only.judge.requests()) == 1 and len(result["judge_evaluations"]) == 1


@pytest.mark.parametrize(
    "judge_text", ["Looks right to me.", "\\boxed{0.7}", "\\boxed{correct}", "\\boxed{1"]
)
async def test_a_verifier_answer_without_a_score_is_a_judge_failure(judged, judge_text):
    judged.judge.script(judge_text)
    result = await verify(judged, answer("1"))
    failure = result["judge_failure"]
    assert (failure["kind"], failure["attempts"]) == ("bad_response", 1)
    assert "no \\boxed{} score" in failure["message"]
    assert (result["reward"], result["r_y"], result["judge_evaluations"]) == (0.0, None, [])
    assert len(judged.judge.requests()) == 1


async def test_a_meta_verifier_answer_without_a_score_is_a_judge_failure(judged):
    judged.judge.script("\\boxed{1}", "The assessment is fine, I would say 2.")
    result = await verify(judged, answer("1"))
    assert (result["judge_failure"]["kind"], result["reward"]) == ("bad_response", 0.0)
    assert (result["r_y"], result["r_meta"], result["r_z"]) == (1.0, None, None)
    assert len(result["judge_evaluations"]) == 1, "the verifier's judgment is kept for the record"


async def test_a_failing_judge_is_a_judge_failure(judged):
    judged.judge.script(
        {"status": 403, "body": {"error": {"message": "this model is not enabled for the project"}}}
    )
    result = await verify(judged, answer("1"))
    failure = result["judge_failure"]
    assert (failure["kind"], failure["attempts"]) == ("upstream_error", 1)
    assert "not enabled for the project" in failure["message"]
    assert result["reward"] == SHIPPED["judge_failure_reward"] == 0.0


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("", "empty_response"),
        ("The sum is even because 2 divides it.\n\\boxed{1}", "missing_solution_header"),
        (f"## Solution\n{PROOF}\n\\boxed{{1}}", "missing_self_eval_header"),
        (f"## Self Evaluation\nfine \\boxed{{1}}\n## Solution\n{PROOF}", "missing_self_eval_header"),
        (answer("high"), "invalid_boxed_score"),
        (answer("0.3"), "invalid_boxed_score"),
        (f"## Solution\n{PROOF}\n## Self Evaluation\nI am confident.", "invalid_boxed_score"),
    ],
)
async def test_a_malformed_policy_answer_earns_0_without_asking_the_judges(judged, text, reason):
    judged.judge.script("\\boxed{1}", "\\boxed{1}")
    result = await verify(judged, text)
    assert (result["reward"], result["r_format"], result["format_error"]) == (0.0, 0.0, reason)
    assert (result["judge_failure"], result["judge_evaluations"], result["r_y"]) == (None, [], None)
    assert judged.judge.requests() == []


def rollout(task: int, reward: float, r_y: float | None, r_z: float | None, **fields: Any) -> dict:
    return {
        **ROW,
        "response": response_with(),
        "reward": reward,
        "r_y": r_y,
        "r_z": r_z,
        "format_error": None,
        "judge_failure": None,
        "_ng_task_index": task,
        "_ng_rollout_index": 0,
        **fields,
    }


async def test_metrics(judged):
    rollouts = [
        rollout(0, 1.0, 1.0, 1.0),
        rollout(1, 0.5, 0.5, 0.5),
        rollout(2, 0.0, None, None, format_error="missing_self_eval_header"),
        rollout(3, 0.0, None, None, judge_failure={"kind": "timeout", "message": "late", "attempts": 1}),
    ]
    status, result = await post_json(judged.url + "/aggregate_metrics", {"verify_responses": rollouts})
    assert status == 200, result
    metrics = result["agent_metrics"]
    assert metrics["pass@1/accuracy"] == pytest.approx(50.0)
    assert metrics["pass@1/verifier_score"] == pytest.approx(50.0)
    assert metrics["pass@1/self_eval_reward"] == pytest.approx(75.0)
    assert metrics["pass@1/well_formed"] == pytest.approx(75.0)
    assert metrics["judge_failure_rate"] == pytest.approx(0.25)
    assert result["key_metrics"]["judge_failure_rate"] == pytest.approx(0.25)


@pytest.mark.parametrize("recorded", ROLLOUTS, ids=lambda recorded: recorded["problem"][:30])
async def test_recorded_rollouts_reproduce_their_reward(judged, recorded):
    row = next(row for row in ROWS if row["problem"] == recorded["problem"])
    judged.judge.script(*(last_text(evaluation["response"]) for evaluation in recorded["judge_evaluations"]))
    status, result = await post_json(judged.url + "/verify", {**row, "response": recorded["response"]})
    assert status == 200, result
    assert result["reward"] == recorded["reward"]
    assert without_judge_ids(without_verify_flags(result)) == without_judge_ids(recorded)


def test_the_recordings_cover_agreement_disagreement_and_a_malformed_answer():
    rewards = sorted(recorded["reward"] for recorded in ROLLOUTS)
    assert rewards == pytest.approx([0.0, 0.0, 0.5, 0.62, 1.0])
    assert [recorded["format_error"] for recorded in ROLLOUTS].count("missing_self_eval_header") == 1


def without_judge_ids(record: dict) -> dict:
    reduced = [
        (evaluation["responses_create_params"], last_text(evaluation["response"]))
        for evaluation in record["judge_evaluations"]
    ]
    return {**record, "judge_evaluations": reduced}


def last_text(response: dict) -> str:
    return response["output"][-1]["content"][-1]["text"]


def test_config_declares_the_environment():
    _, resources, _ = check_environment_config(FOLDER, NAME, "math")
    assert resources.model_extra["verifier_prompt_path"] == "prompts/verifier.yaml"


def test_nemo_gyms_flat_judge_keys_set_the_judge_request():
    base = {
        "name": NAME,
        "host": "127.0.0.1",
        "port": 0,
        "entrypoint": "app.py",
        "judge_model_server": JUDGE_MODEL_REF,
    }
    config = ProofJudgeConfig.model_validate(
        {**base, "temperature": 0.2, "max_tokens": 512, "judge_model_name": "big-judge"}
    )
    params = config.judge_responses_create_params
    assert (params.temperature, params.max_output_tokens, params.model) == (0.2, 512, "big-judge")
    assert (config.alpha, config.beta, config.assert_think_end) == (1.0, 0.0, False), "NeMo Gym's defaults"


@pytest.mark.parametrize("content", ["user: 'Judge {problem} {answer}'", "system: hi", "user: '{0}'"])
def test_a_broken_prompt_file_is_a_config_error(tmp_path, content):
    (tmp_path / "verifier.yaml").write_text(content)
    with pytest.raises(ConfigError, match="verifier.yaml"):
        load_judge_prompt_file(tmp_path, "verifier.yaml", ("problem", "proof"))


@pytest.mark.parametrize(
    ("text", "score"),
    [
        ("\\boxed{1}", 1.0),
        ("\\boxed{ 0.50 }", 0.5),
        ("\\boxed{0} then \\boxed{1.0}", 1.0),
        ("\\boxed{1} then \\boxed{2}", None),
        ("\\boxed{1/2}", None),
        ("score: 1", None),
    ],
)
def test_read_score(text, score):
    assert read_score(text) == score


def test_assert_think_end_makes_an_unclosed_reasoning_malformed():
    assert read_self_evaluated_proof(answer("1"), assert_think_end=True) == "missing_think_end"
    parsed = read_self_evaluated_proof(
        "<think>## Solution draft</think>" + answer("0.5"), assert_think_end=True
    )
    assert parsed == SelfEvaluatedProof(
        proof=PROOF, self_evaluation=f"{CRITIQUE}\n\\boxed{{0.5}}", self_score=0.5
    )
