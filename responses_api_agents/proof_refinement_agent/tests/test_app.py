"""ProofRefinementAgent over HTTP against the shipped proof_judge environment: the environment, its judge
model (openai_model), the policy model (openai_model) and the agent are real server processes on
127.0.0.1; the scripted upstream (the one test double) plays both the policy and the judge."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path

import orjson
import pytest

from nemo_gym.http.client import get_response_json, request
from nemo_gym.testing import JUDGE_MODEL_REF, ScriptedJudge, run_scripted_judge
from tests.helpers import instance_config, run_instance
from tests.upstream_script import ScriptedUpstream, assistant_message, fresh_model

ROWS = Path(__file__).resolve().parents[3] / "resources_servers" / "proof_judge" / "data" / "example.jsonl"
ROW = orjson.loads(ROWS.read_bytes().splitlines()[0])
ROLLOUT_DEADLINE_S = 3.0
MAX_CORRECTION_TURNS = 2


def proof(text: str, self_score: str = "1") -> str:
    return f"## Solution\n{text}\n\n## Self Evaluation\nChecked.\n\\boxed{{{self_score}}}"


@dataclass
class Stack:
    agent_url: str
    plain_agent_url: str
    policy: str
    upstream: ScriptedUpstream
    judge: ScriptedJudge
    requests_before_script: int = 0

    def script(self, *answers: str | dict, judge: tuple[str, ...] = ()) -> None:
        """The policy's answers (texts, or raw steps) and the judge's, one per call."""
        self.upstream.clear(self.policy)
        self.requests_before_script = len(self.upstream.requests(self.policy))
        steps = [
            a if isinstance(a, dict) else {"output": [assistant_message(a)], "usage": {"input_tokens": 10}}
            for a in answers
        ]
        self.upstream.script(self.policy, steps)
        self.judge.script(*judge)

    def policy_requests(self) -> list[dict]:
        return [entry["body"] for entry in self.upstream.requests(self.policy)[self.requests_before_script :]]


@pytest.fixture(scope="module")
def stack(scripted_upstream: ScriptedUpstream, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    workdir = tmp_path_factory.mktemp("proof_refinement_agent")
    policy = fresh_model("prover")
    with ExitStack() as servers:
        judge = servers.enter_context(run_scripted_judge(scripted_upstream, workdir))
        config = {
            **judge.config,
            # beta 0: one judge call per verify, reward = r_y (the verifier's 0 / 0.5 / 1).
            "proof_judge": instance_config(
                "resources_servers",
                "proof_judge",
                domain="math",
                judge_model_server=JUDGE_MODEL_REF,
                alpha=1.0,
                beta=0.0,
                judge_max_attempts=1,
            ),
            "policy_model": instance_config(
                "responses_api_models",
                "openai_model",
                openai_base_url=scripted_upstream.base_url,
                openai_api_key="sk-prover-test",
                openai_model=policy,
            ),
        }
        for name, server_type, folder in (
            ("proof_judge", "resources_servers", "proof_judge"),
            ("policy_model", "responses_api_models", "openai_model"),
        ):
            started = servers.enter_context(run_instance(config, name, workdir))
            config[name][server_type][folder]["port"] = started.port
        refs = {
            "resources_server": {"type": "resources_servers", "name": "proof_judge"},
            "model_server": {"type": "responses_api_models", "name": "policy_model"},
            "rollout_deadline_s": ROLLOUT_DEADLINE_S,
        }
        config["agent"] = instance_config(
            "responses_api_agents",
            "proof_refinement_agent",
            **refs,
            max_correction_turns=MAX_CORRECTION_TURNS,
            feedback_fields=["format_error", "verifier_output"],
        )
        # NeMo Gym's defaults but one correction turn: only a `needs_correction` answer asks for another try.
        config["plain"] = instance_config(
            "responses_api_agents",
            "proof_refinement_agent",
            **refs,
            max_correction_turns=1,
            include_all_attempts=False,
        )
        agent = servers.enter_context(run_instance(config, "agent", workdir))
        plain = servers.enter_context(run_instance(config, "plain", workdir))
        yield Stack(agent.url, plain.url, policy, scripted_upstream, judge)


async def run(url: str, row: dict = ROW) -> tuple[int, dict]:
    response = await request("POST", url + "/run", json=row)
    return response.status, await get_response_json(response)


async def test_feedback_of_a_failed_attempt_leads_to_a_corrected_proof(stack):
    stack.script(
        proof("Odd plus odd is odd."),
        proof("Odd integers are 2a+1 and 2b+1; their sum is 2(a+b+1)."),
        judge=("Step 1 is false: 3 + 5 = 8 is even.\n\\boxed{0}", "Correct.\n\\boxed{1}"),
    )
    status, result = await run(stack.agent_url)
    assert status == 200, result
    assert (result["reward"], result["total_turns"]) == (1.0, 2), "early success: no third attempt"
    assert result["proof"].startswith("Odd integers are 2a+1"), "the result is the last attempt's verdict"
    first, second = result["all_attempts"]
    assert [first["reward"], second["reward"]] == [0.0, 1.0]
    assert [first["turn_index"], second["turn_index"]] == [0, 1]
    assert first["generation"] == proof("Odd plus odd is odd.")
    assert "3 + 5 = 8" in first["correction_prompt"] and first["proof_status"] == "unknown"
    assert second["response"]["output"] == result["response"]["output"]
    assert result["total_usage"]["input_tokens"] == 20, "usage summed over both attempts"
    asked_first, asked_second = stack.policy_requests()
    task_input = ROW["responses_create_params"]["input"]
    assert asked_first["input"] == task_input
    # The retry continues the conversation: the task, the rejected answer, then the feedback.
    assert asked_second["input"][: len(task_input)] == task_input
    rejected, feedback = asked_second["input"][len(task_input) :]
    assert rejected["role"] == "assistant" and rejected["content"][0]["text"] == proof("Odd plus odd is odd.")
    assert feedback["role"] == "user" and "Step 1 is false: 3 + 5 = 8 is even." in feedback["content"]
    assert "(reward 0.0)" in feedback["content"]
    assert (
        first["input"]["input"] == asked_first["input"] and second["input"]["input"] == asked_second["input"]
    )


async def test_attempts_stop_when_exhausted_and_the_last_verdict_counts(stack):
    stack.script(
        proof("a"),
        proof("b"),
        proof("c"),
        proof("never asked for"),
        judge=("Wrong.\n\\boxed{0}", "Still a gap.\n\\boxed{0.5}", "Wrong again.\n\\boxed{0}"),
    )
    status, result = await run(stack.agent_url)
    assert status == 200, result
    assert result["total_turns"] == MAX_CORRECTION_TURNS + 1 == len(result["all_attempts"])
    assert [attempt["reward"] for attempt in result["all_attempts"]] == [0.0, 0.5, 0.0]
    assert result["reward"] == 0.0 and result["proof"] == "c"
    assert len(stack.policy_requests()) == MAX_CORRECTION_TURNS + 1


async def test_a_first_attempt_that_passes_ends_the_rollout(stack):
    stack.script(proof("fine"), proof("never asked for"), judge=("Correct.\n\\boxed{1}",))
    status, result = await run(stack.agent_url)
    assert status == 200 and (result["reward"], result["total_turns"]) == (1.0, 1), result
    assert len(stack.policy_requests()) == 1


async def test_a_malformed_answer_is_retried_with_its_format_error_and_no_judge_call(stack):
    stack.script("I think it is true.", proof("fine"), judge=("Correct.\n\\boxed{1}",))
    status, result = await run(stack.agent_url)
    assert status == 200 and (result["reward"], result["total_turns"]) == (1.0, 2), result
    assert result["all_attempts"][0]["correction_prompt"] == "missing_solution_header"
    assert len(stack.judge.requests()) == 1, "only the well-formed attempt was judged"


async def test_without_a_correction_protocol_the_plain_agent_makes_one_attempt(stack):
    """NeMo Gym's rule: proof_judge's answers carry no `needs_correction`, so a failure is final."""
    stack.script(proof("wrong"), proof("never asked for"), judge=("Wrong.\n\\boxed{0}",))
    status, result = await run(stack.plain_agent_url)
    assert status == 200, result
    assert (result["reward"], result["total_turns"], result["all_attempts"]) == (0.0, 1, None)


async def test_a_verify_answer_asking_for_correction_replaces_the_conversation(stack):
    """NeMo Gym's protocol, through proof_judge's echo of the row's own fields: every verdict says
    `needs_correction` with a `correction_prompt`, which becomes the whole input of the next attempt."""
    row = {**ROW, "needs_correction": True, "correction_prompt": "Fix step 2, then write the proof again."}
    stack.script(proof("a"), proof("b"), judge=("Wrong.\n\\boxed{0}", "Wrong.\n\\boxed{0}"))
    status, result = await run(stack.plain_agent_url, row)
    assert status == 200 and result["total_turns"] == 2, result
    _, retry = stack.policy_requests()
    assert retry["input"] == [
        {"role": "user", "content": "Fix step 2, then write the proof again.", "type": "message"}
    ]


async def test_a_failing_verify_is_a_clear_error_at_once(stack):
    stack.script(proof("a"), judge=("Correct.\n\\boxed{1}",))
    started = time.monotonic()
    status, result = await run(stack.agent_url, {**ROW, "problem": {"not": "text"}})
    assert time.monotonic() - started < ROLLOUT_DEADLINE_S, "no waiting for the deadline"
    assert status == 422, result
    error = result["error"]
    assert error["message"].endswith("/verify"), "the error names the failing call"
    assert error["cause"]["detail"][0]["loc"] == ["body", "problem"], "and the verifier's reason"


async def test_a_hanging_model_fails_the_rollout_at_its_deadline(stack):
    stack.script({"hang": True})
    started = time.monotonic()
    status, result = await run(stack.agent_url)
    assert status == 504 and result["error"]["type"] == "timeout", result
    assert ROLLOUT_DEADLINE_S <= time.monotonic() - started < ROLLOUT_DEADLINE_S + 5


async def test_responses_route_is_one_attempt_without_verify(stack):
    stack.script(proof("x"))
    response = await request("POST", stack.agent_url + "/v1/responses", json={"input": "prove it"})
    result = await get_response_json(response)
    assert response.status == 200, result
    assert result["output"][0]["content"][0]["text"] == proof("x")
    assert stack.policy_requests()[0]["input"] == [{"role": "user", "content": "prove it", "type": "message"}]
    assert stack.judge.requests() == []
