"""nemo_gym.envkit.judged_env: the helpers judged environments share around nemo_gym.judge."""

from __future__ import annotations

from typing import Any

import pytest
from omegaconf import OmegaConf
from pydantic import ValidationError

from nemo_gym.base_resources_server import SimpleResourcesServer
from nemo_gym.config_types import BaseServerConfig
from nemo_gym.envkit.judged_env import (
    JudgedEnvConfig,
    JudgedResourcesServer,
    PromptJudge,
    final_item_text,
    first_label,
    judged_key_metrics,
    unusable_unless,
)
from nemo_gym.envkit.pass_at_k_metrics import pass_at_k_key_metrics
from nemo_gym.judge import JUDGE_FAILURE_RATE_KEY, Judge, JudgeConfig, JudgeFailed, last_assistant_text
from nemo_gym.openai_utils import NeMoGymResponse
from nemo_gym.reward_profile import AggregateMetricsBody
from nemo_gym.server_utils import ServerClient
from nemo_gym.testing import message_item, response_with
from tests.upstream_script import ScriptedUpstream, as_step, fresh_model


def judge_answer(*texts: str) -> NeMoGymResponse:
    items = [message_item(text, id=f"msg_{index}") for index, text in enumerate(texts)]
    return NeMoGymResponse.model_validate(response_with(*items))


def yes_or_no(text: str) -> bool | None:
    word = text.strip().upper()
    return {"YES": True, "NO": False}.get(word)


def test_an_answer_the_parser_reads_is_usable_even_when_it_reads_a_falsy_value():
    unusable = unusable_unless(yes_or_no, "has no YES or NO")
    assert unusable(judge_answer("YES")) is None
    assert unusable(judge_answer("no")) is None  # False is a reading; only None refuses


def test_an_unreadable_answer_is_refused_with_its_first_100_characters():
    unusable = unusable_unless(yes_or_no, "has no YES or NO")
    text = "maybe " * 30
    assert unusable(judge_answer(text)) == f"the judge's answer has no YES or NO: {text.strip()[:100]!r}"


def test_only_the_last_assistant_message_counts():
    unusable = unusable_unless(yes_or_no, "is neither yes nor no")
    assert unusable(judge_answer("YES", "perhaps")) == "the judge's answer is neither yes nor no: 'perhaps'"
    assert unusable(judge_answer("perhaps", "YES")) is None


def test_an_answer_without_text_is_refused():
    unusable = unusable_unless(yes_or_no, "has no YES or NO")
    assert (
        unusable(NeMoGymResponse.model_validate(response_with())) == "the judge's answer has no YES or NO: ''"
    )


def test_the_key_metrics_lead_with_token_means_and_judge_failures_then_the_best_pass_at_k():
    agent_metrics = {
        "mean/input_tokens": 10.0,
        "mean/output_tokens": 5.0,
        JUDGE_FAILURE_RATE_KEY: 0.25,
        "mean/reward": 0.5,
        "pass@1[avg-of-2]/accuracy": 0.5,
        "pass@1[avg-of-4]/accuracy": 0.6,
        "pass@2/accuracy": 0.7,
        "pass@4/accuracy": 0.8,
        "pass@4/no_answer": 0.1,
        "majority@4/accuracy": 0.9,
    }
    assert judged_key_metrics(agent_metrics) == {
        "mean/input_tokens": 10.0,
        "mean/output_tokens": 5.0,
        JUDGE_FAILURE_RATE_KEY: 0.25,
        "pass@1[avg-of-4]/accuracy": 0.6,
        "pass@4/accuracy": 0.8,
    }
    assert list(judged_key_metrics(agent_metrics))[:3] == [
        "mean/input_tokens",
        "mean/output_tokens",
        JUDGE_FAILURE_RATE_KEY,
    ]
    assert "majority@4/accuracy" in pass_at_k_key_metrics(agent_metrics)  # the default it narrows
    with_majority = judged_key_metrics(agent_metrics, best_of=("pass@{k}", "majority@{k}"))
    assert with_majority["majority@4/accuracy"] == 0.9 and with_majority["pass@4/accuracy"] == 0.8
    assert "pass@4/accuracy" not in judged_key_metrics(agent_metrics, best_of=())


# PromptJudge against a real judge model server: the scripted upstream, named in the deployment config.

UPSTREAM_NAME = "judge_upstream"


def judge_settings(model: str, **extra: object) -> dict:
    return {
        "judge_model_server": {"type": "responses_api_models", "name": UPSTREAM_NAME},
        "judge_responses_create_params": {"input": [], "model": model},
        "judge_max_attempts": 1,
        "judge_circuit_breaker_failures": None,
        **extra,
    }


def server_client(upstream: ScriptedUpstream) -> ServerClient:
    deployment = {
        UPSTREAM_NAME: {
            "responses_api_models": {
                "scripted": {"entrypoint": "app.py", "host": upstream.host, "port": upstream.port}
            }
        }
    }
    return ServerClient(
        head_server_config=BaseServerConfig(host="127.0.0.1", port=1),
        global_config_dict=OmegaConf.create(deployment),
    )


def prompt_judge(upstream: ScriptedUpstream, model: str, **extra: object) -> PromptJudge:
    config = JudgeConfig(**judge_settings(model, **extra))
    return PromptJudge(config, Judge(config, server_client(upstream), "test_judged_env"))


def sent_messages(upstream: ScriptedUpstream, model: str) -> list[list[tuple[str, str]]]:
    return [
        [(message["role"], message["content"]) for message in entry["body"]["input"]]
        for entry in upstream.requests(model)
    ]


async def test_a_filled_prompt_is_asked_after_the_system_message_and_its_verdict_read(scripted_upstream):
    model = fresh_model("prompt-judge")
    scripted_upstream.script(model, [as_step(" YES\n")])
    judge = prompt_judge(scripted_upstream, model)
    judgment = await judge.ask("Is 2 + 2 four?", yes_or_no, system="Answer YES or NO.")
    assert (judgment.text, judgment.verdict) == ("YES", True)
    assert sent_messages(scripted_upstream, model) == [
        [("system", "Answer YES or NO."), ("user", "Is 2 + 2 four?")]
    ]
    evaluation = judgment.evaluation
    assert evaluation.responses_create_params.model == model
    assert last_assistant_text(evaluation.response) == judgment.text


async def test_messages_are_sent_as_given_and_without_read_there_is_no_verdict(scripted_upstream):
    model = fresh_model("prompt-judge")
    scripted_upstream.script(model, [as_step("NO")])
    judge = prompt_judge(scripted_upstream, model)
    messages = [{"role": "user", "content": "first"}, {"role": "assistant", "content": "second"}]
    judgment = await judge.ask(messages)
    assert (judgment.text, judgment.verdict) == ("NO", None)
    assert sent_messages(scripted_upstream, model) == [[("user", "first"), ("assistant", "second")]]


async def test_an_answer_read_as_none_fails_the_judgment_and_becomes_the_failure_reward(scripted_upstream):
    model = fresh_model("prompt-judge")
    scripted_upstream.script(model, [as_step("I cannot decide.")])
    judge = prompt_judge(scripted_upstream, model, judge_failure_reward=-1.0)
    with pytest.raises(JudgeFailed) as failed:
        await judge.ask("Is it?", yes_or_no, missing="has no YES or NO")
    assert failed.value.failure.model_dump() == {
        "kind": "bad_response",
        "message": "the judge's answer has no YES or NO: 'I cannot decide.'",
        "attempts": 1,
    }
    fields = {"reward": -1.0, "judge_failure": failed.value.failure}
    assert judge.failure_fields(failed.value) == judge.failure_fields(failed.value.failure) == fields


async def test_missing_needs_a_reader_and_no_check_of_its_own(scripted_upstream):
    judge = prompt_judge(scripted_upstream, fresh_model("prompt-judge"))
    with pytest.raises(ValueError, match="missing"):
        await judge.ask("Is it?", missing="has no YES or NO")
    check = unusable_unless(yes_or_no, "has no YES or NO")
    with pytest.raises(ValueError, match="missing"):
        await judge.ask("Is it?", yes_or_no, missing="has no YES or NO", unusable=check)


def test_a_server_judges_with_its_config_under_its_name(scripted_upstream):
    settings = {"host": "127.0.0.1", "port": 0, "entrypoint": "app.py", "name": "graded", "domain": "other"}
    config = JudgedEnvConfig(**settings, **judge_settings(fresh_model("prompt-judge")))
    server = SimpleResourcesServer(config=config, server_client=server_client(scripted_upstream))
    judge = PromptJudge.of(server)
    assert (judge.config, judge.judge.owner, judge.judge.server) == (config, "graded", UPSTREAM_NAME)
    other = JudgeConfig(**judge_settings(fresh_model("simulator")))
    simulator = PromptJudge.of(server, other, "graded tool simulator")
    assert (simulator.config, simulator.judge.owner) == (other, "graded tool simulator")


class AnsweringServer(JudgedResourcesServer):
    """A judged environment whose own `compute_metrics` says nothing about its judge."""

    def compute_metrics(self, tasks: list[list[dict[str, Any]]]) -> dict[str, Any]:
        return {"answered": sum(len(rollouts) for rollouts in tasks)}


class MajorityServer(AnsweringServer):
    key_metric_best_of = ("pass@{k}", "majority@{k}")


def judged_rollout(task: int, index: int, reward: float, failure_kind: str | None = None) -> dict[str, Any]:
    failure = {"kind": failure_kind, "message": "no verdict", "attempts": 2} if failure_kind else None
    return {
        "_ng_task_index": task,
        "_ng_rollout_index": index,
        "reward": reward,
        "agent_ref": {"name": "a"},
        "judge_failure": failure,
    }


@pytest.mark.parametrize("server_class", [AnsweringServer, MajorityServer])
async def test_a_judged_server_builds_its_judge_and_adds_its_failures_to_the_environments_metrics(
    scripted_upstream, server_class
):
    settings = {"host": "127.0.0.1", "port": 0, "entrypoint": "app.py", "name": "graded", "domain": "other"}
    config = JudgedEnvConfig(**settings, **judge_settings(fresh_model("prompt-judge")))
    server = server_class(config=config, server_client=server_client(scripted_upstream))
    server.setup_webserver()
    assert (server._judge.config, server._judge.judge.owner) == (config, "graded")
    rollouts = [
        judged_rollout(0, 0, 1.0),
        judged_rollout(0, 1, 0.0, "timeout"),
        judged_rollout(1, 0, 1.0),
        judged_rollout(1, 1, 0.0, "bad_response"),
    ]
    metrics = await server.aggregate_metrics(AggregateMetricsBody(verify_responses=rollouts))
    agent = metrics.agent_metrics
    assert agent["answered"] == 4
    assert (agent[JUDGE_FAILURE_RATE_KEY], agent["judge_failures/timeout"]) == (0.5, 1)
    assert agent["judge_failures/bad_response"] == 1
    assert metrics.key_metrics == judged_key_metrics(agent, server_class.key_metric_best_of)
    assert JUDGE_FAILURE_RATE_KEY in metrics.key_metrics


def test_a_judged_env_config_without_a_judge_model_server_is_refused():
    settings = {"host": "127.0.0.1", "port": 0, "entrypoint": "app.py", "name": "graded", "domain": "other"}
    with pytest.raises(ValidationError, match="judge_model_server"):
        JudgedEnvConfig(**settings)
    assert JudgeConfig().judge_model_server is None  # the plain judge settings leave it optional


def test_an_unreadable_answer_can_be_shown_by_its_end():
    unusable = unusable_unless(yes_or_no, "has no verdict", from_end=True)
    text = "x" * 150 + " the end"
    assert unusable(judge_answer(text)) == f"the judge's answer has no verdict: {text[-100:]!r}"


def test_the_label_written_first_is_the_verdict():
    labels = ("[[A=B]]", "[[A!=B]]")
    assert first_label("[[A!=B]] then [[A=B]]", labels) == "[[A!=B]]"
    assert first_label("equal: [[A=B]]", labels) == "[[A=B]]"
    assert first_label("no label here", labels) is None
    assert first_label("YES!", ("YES!", "YES")) == "YES"  # same start: the one sorting first


def test_the_final_item_text_is_the_last_text_of_the_final_output_item():
    assert final_item_text(judge_answer("[[A=B]]", "no label here")) == "no label here"
    reasoning_last = response_with(message_item("[[A=B]]", id="msg_0"), {
        "type": "reasoning", "id": "rs_0", "summary": [{"type": "summary_text", "text": "[[A=B]]"}],
    })  # fmt: skip
    assert final_item_text(NeMoGymResponse.model_validate(reasoning_last)) == ""
    assert final_item_text(NeMoGymResponse.model_validate(response_with())) == ""


async def test_a_request_the_environment_built_from_params_for_is_sent_as_it_is(scripted_upstream):
    model = fresh_model("prompt-judge")
    scripted_upstream.script(model, [as_step("YES")])
    judge = prompt_judge(scripted_upstream, model)
    params = judge.params_for("Is it?", "Be brief.").model_copy(update={"max_output_tokens": 7})
    judgment = await judge.ask(params, yes_or_no)
    assert (judgment.verdict, judgment.evaluation.responses_create_params) == (True, params)
    assert sent_messages(scripted_upstream, model) == [[("system", "Be brief."), ("user", "Is it?")]]
    assert scripted_upstream.requests(model)[0]["body"]["max_output_tokens"] == 7
