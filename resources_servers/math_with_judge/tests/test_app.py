"""math_with_judge over HTTP: the server runs as a real process; for the judge, an openai_model instance
forwards to the scripted upstream (the one test double), so judge calls cross two real servers."""

from __future__ import annotations

import asyncio
import statistics
import time
import uuid
from collections.abc import Iterator
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from nemo_gym.testing import (
    BASE_VERIFY_FIELDS,
    EMPTY_AGGREGATE_METRICS,
    JUDGE_MODEL_REF,
    ScriptedJudge,
    StartedServer,
    check_environment_config,
    instance_config,
    post_json,
    read_jsonl,
    response_with,
    run_instance,
    run_resources_server,
    run_scripted_judge,
)
from tests.helpers import cpu_seconds, worker_pids
from tests.upstream_script import ScriptedUpstream, assistant_message, reasoning

FOLDER = Path(__file__).resolve().parents[1]
IMPLEMENTATION = "math_with_judge"
ROWS = read_jsonl(FOLDER / "data" / "example.jsonl")
ROLLOUTS = read_jsonl(FOLDER / "data" / "example_rollouts.jsonl")
A_RESPONSE = ROLLOUTS[0]["response"]
VERIFY_FIELDS = {
    *BASE_VERIFY_FIELDS,
    "expected_answer",
    "extracted_answer",
    "library_reward",
    "judge_evaluations",
    "judge_failure",
}
EQUAL, NOT_EQUAL = "[[A=B]]", "[[A!=B]]"
SHORT_DEADLINE_S = 0.5
REPLAY_DEADLINE_S = 60.0
LOAD_REQUESTS = 1000


# ---- servers --------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp(IMPLEMENTATION)


@pytest.fixture(scope="module")
def server(workdir: Path) -> Iterator[StartedServer]:
    """Judge off, as the shipped config has it; a symbolic deadline generous enough for the slowest recorded
    check (seconds of sympy) on a loaded machine."""
    inner = {"domain": "math", "grading_timeout_s": REPLAY_DEADLINE_S}
    with run_resources_server("math", workdir, implementation=IMPLEMENTATION, **inner) as started:
        yield started


@pytest.fixture(scope="module")
def hurried_server(workdir: Path) -> Iterator[StartedServer]:
    """A symbolic-check deadline short enough for a slow but legitimate check to miss it."""
    inner = {"domain": "math", "grading_timeout_s": SHORT_DEADLINE_S}
    with run_resources_server("hurried", workdir, implementation=IMPLEMENTATION, **inner) as started:
        yield started


@dataclass
class JudgeStack:
    url: str
    model: ScriptedJudge


@pytest.fixture(scope="module")
def judge(scripted_upstream: ScriptedUpstream, workdir: Path) -> Iterator[JudgeStack]:
    with ExitStack() as servers:
        model = servers.enter_context(run_scripted_judge(scripted_upstream, workdir))
        resources = instance_config(
            "resources_servers",
            IMPLEMENTATION,
            domain="math",
            should_use_judge=True,
            judge_model_server=JUDGE_MODEL_REF,
            judge_responses_create_params={"input": [], "temperature": 0.0, "max_output_tokens": 256},
            judge_max_attempts=2,
            judge_backoff_base_s=0.05,
            judge_backoff_max_s=0.1,
            judge_failure_reward=-1.0,
        )
        started = servers.enter_context(
            run_instance({**model.config, "judged": resources}, "judged", workdir)
        )
        yield JudgeStack(url=started.url, model=model)


# ---- helpers --------------------------------------------------------------------------------------------


def answer(*texts: str, leading: list[dict] | None = None) -> dict:
    """A recorded response whose output is `leading` items then one assistant message per text."""
    return response_with(*(leading or []), *(assistant_message(text) for text in texts), **A_RESPONSE)


def verify_body(expected: str, *texts: str, question: str = "Compute it.", **extra: Any) -> dict:
    return {
        "responses_create_params": {"input": [{"role": "user", "content": question}]},
        "question": question,
        "expected_answer": expected,
        "response": answer(*texts, **extra),
    }


async def verify(url: str, body: dict) -> dict:
    status, result = await post_json(url + "/verify", body)
    assert status == 200, result
    return result


def error_locations(body: dict) -> list[list]:
    return [error["loc"] for error in body["detail"]]


def user_prompt(judge_request: dict) -> str:
    return next(item["content"] for item in judge_request["input"] if item["role"] == "user")


def judge_block(first: str, second: str, question: str = "Compute it.") -> str:
    return (
        f"<|Problem|>\n{question}\n\n"
        f"<|Start of Assistant A's Answer|>\n{first}\n<|End of Assistant A's Answer|>\n\n"
        f"<|Start of Assistant B's Answer|>\n{second}\n<|End of Assistant B's Answer|>"
    )


# ---- symbolic check -------------------------------------------------------------------------------------


async def test_a_correct_boxed_answer_earns_1_with_the_declared_fields(server):
    result = await verify(server.url, verify_body("\\(\\sqrt{2}\\)", "So it is \\boxed{\\sqrt{2}}."))
    assert set(result) == VERIFY_FIELDS, "the question is not echoed; the grading fields are"
    assert result["reward"] == 1.0 and result["library_reward"] == 1.0
    assert result["extracted_answer"] == "sqrt(2)"
    assert result["expected_answer"] == "\\(\\sqrt{2}\\)"
    assert result["judge_evaluations"] is None


async def test_a_wrong_answer_earns_0_and_reports_what_was_extracted(server):
    result = await verify(server.url, verify_body("-3", "\\boxed{-4}"))
    assert (result["reward"], result["library_reward"], result["extracted_answer"]) == (0.0, 0.0, "-4")
    assert result["judge_evaluations"] is None, "the judge is off: no second opinion"


@pytest.mark.parametrize(
    ("expected", "text"),
    [
        ("$\\frac{1}{2}$", "The answer is \\boxed{0.5}"),
        ("\\(x^2-1\\)", "\\boxed{(x-1)(x+1)}"),
        ("\\frac{1}{2}", "\\boxed{\\frac{2}{4}}"),
        ("32", "There are 32 of them."),
        ("\\{1, 2\\}", "\\boxed{\\{2, 1\\}}"),
    ],
)
async def test_equivalent_forms_are_accepted(server, expected, text):
    result = await verify(server.url, verify_body(expected, text))
    assert result["reward"] == 1.0, result["extracted_answer"]


async def test_the_messages_are_joined_without_separator(server):
    result = await verify(server.url, verify_body("12", "\\boxed{1", "2}"))
    assert (result["reward"], result["extracted_answer"]) == (1.0, "12")


async def test_reasoning_items_are_not_graded(server):
    body = verify_body("5", "I am not sure.", leading=[reasoning("it is \\boxed{5}")])
    result = await verify(server.url, body)
    assert (result["reward"], result["extracted_answer"]) == (0.0, None)


@pytest.mark.parametrize("texts", [(), ("I do not know.",)], ids=["no_message", "no_math"])
async def test_no_answer_scores_0_with_no_extracted_answer(server, texts):
    result = await verify(server.url, verify_body("5", *texts))
    assert (result["reward"], result["library_reward"], result["extracted_answer"]) == (0.0, 0.0, None)


@pytest.mark.parametrize("expected", ["", "\\(\\)"])
async def test_an_unreadable_expected_answer_scores_0(server, expected):
    result = await verify(server.url, verify_body(expected, "\\boxed{3}"))
    assert (result["reward"], result["extracted_answer"]) == (0.0, None)


async def test_a_check_past_its_deadline_scores_0_without_a_500_and_the_server_carries_on(hurried_server):
    # Symbolic expansion of a high power of sqrt(3) takes seconds; a fresh exponent defeats any cache.
    power = 3000 + uuid.uuid4().int % 1000
    expected = f"\\frac{{(3-\\sqrt{{3}})(2-\\sqrt{{3}})^{{{power}}}+(3+\\sqrt{{3}})(2+\\sqrt{{3}})^{{{power}}}}}{{6}}"
    text = f"\\boxed{{\\frac{{(1+\\sqrt{{3}})^{{{2 * power + 1}}}-(1-\\sqrt{{3}})^{{{2 * power + 1}}}}}{{2^{{{power + 1}}}\\sqrt{{3}}}}}}"
    warm = await verify(hurried_server.url, verify_body("6", "\\boxed{6}"))
    assert warm["reward"] == 1.0, "the worker pool is up"
    result = await verify(hurried_server.url, verify_body(expected, text))
    assert (result["reward"], result["library_reward"], result["extracted_answer"]) == (0.0, 0.0, None)
    assert "math-verify gave up" in hurried_server.log()
    after = await verify(hurried_server.url, verify_body("7", "\\boxed{7}"))
    assert after["reward"] == 1.0, "the worker that timed out is usable again"


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({k: v for k, v in verify_body("1", "1").items() if k != "expected_answer"}, "expected_answer"),
        ({k: v for k, v in verify_body("1", "1").items() if k != "question"}, "question"),
        ({k: v for k, v in verify_body("1", "1").items() if k != "response"}, "response"),
        ({**verify_body("1", "1"), "expected_answer": ["1"]}, "expected_answer"),
        ({**verify_body("1", "1"), "question": None}, "question"),
    ],
    ids=["no_expected", "no_question", "no_response", "expected_not_str", "question_null"],
)
async def test_a_bad_body_is_a_422_naming_the_field(server, body, field):
    status, result = await post_json(server.url + "/verify", body)
    assert status == 422
    assert ["body", field] in error_locations(result)


# ---- the judge ------------------------------------------------------------------------------------------


async def test_the_judge_is_not_asked_when_the_symbolic_check_passes(judge):
    judge.model.script(NOT_EQUAL)
    result = await verify(judge.url, verify_body("\\frac{1}{2}", "\\boxed{0.5}"))
    assert (result["reward"], result["judge_evaluations"]) == (1.0, None)
    assert judge.model.requests() == []


async def test_two_equal_verdicts_rescue_a_failed_check_with_the_answers_swapped(judge):
    judge.model.script(f"Same value. {EQUAL}", f"Verdict: {EQUAL}")
    text = "Thus the set is \\boxed{\\text{all even numbers}}."
    result = await verify(judge.url, verify_body("\\text{the even integers}", text))
    assert (result["reward"], result["library_reward"]) == (1.0, 0.0)
    first, second = judge.model.requests()
    assert user_prompt(first) == judge_block("\\text{the even integers}", text)
    assert user_prompt(second) == judge_block(text, "\\text{the even integers}")
    system = first["input"][0]
    assert system["role"] == "system" and system["content"].rstrip().endswith(f'{NOT_EQUAL}".')
    assert EQUAL in system["content"] and NOT_EQUAL in system["content"]
    assert first["temperature"] == 0.0 and first["max_output_tokens"] == 256, "judge settings are sent"
    evaluations = result["judge_evaluations"]
    assert len(evaluations) == 2
    assert evaluations[0]["responses_create_params"]["input"][1]["content"] == user_prompt(first)
    assert evaluations[1]["response"]["output"][-1]["content"][0]["text"] == f"Verdict: {EQUAL}"


async def test_a_first_not_equal_verdict_ends_judging_with_0(judge):
    judge.model.script(f"They differ {NOT_EQUAL}", EQUAL)
    result = await verify(judge.url, verify_body("-3", "\\boxed{-4}"))
    assert result["reward"] == 0.0 and len(result["judge_evaluations"]) == 1
    assert len(judge.model.requests()) == 1


async def test_an_equal_verdict_overturned_when_swapped_earns_0(judge):
    judge.model.script(EQUAL, NOT_EQUAL)
    result = await verify(judge.url, verify_body("-3", "\\boxed{-4}"))
    assert result["reward"] == 0.0 and len(result["judge_evaluations"]) == 2


@pytest.mark.parametrize(
    ("verdicts", "reward"),
    [
        ((f"Not {NOT_EQUAL}, despite looking like {EQUAL}", EQUAL), 0.0),
        ((f"{EQUAL} (not {NOT_EQUAL})", f"{EQUAL} and not {NOT_EQUAL}"), 1.0),
        (("I cannot decide.",), 0.0),
        (({"output": [reasoning(f"thinking... {EQUAL}")]},), 0.0),
        (({"output": [assistant_message(EQUAL), reasoning("done")]},), 0.0),
        (({"output": [reasoning("hmm"), assistant_message(EQUAL)]}, EQUAL), 1.0),
        (({"output": [{"type": "message", "role": "assistant", "content": EQUAL}]}, EQUAL), 1.0),
    ],
    ids=[
        "not_equal_first",
        "equal_first",
        "no_label",
        "no_message",
        "last_not_a_message",
        "reasoning_then_message",
        "plain_string_content",
    ],
)
async def test_the_verdict_is_the_first_label_of_the_final_message(judge, verdicts, reward):
    judge.model.script(*verdicts)
    result = await verify(judge.url, verify_body("-3", "\\boxed{-4}"))
    assert result["reward"] == reward


async def test_an_answer_without_math_goes_to_the_judge_as_written(judge):
    judge.model.script(EQUAL, EQUAL)
    result = await verify(judge.url, verify_body("2", "Two."))
    assert (result["reward"], result["library_reward"], result["extracted_answer"]) == (1.0, 0.0, None)
    assert user_prompt(judge.model.requests()[0]) == judge_block("2", "Two.")


async def test_a_failing_judge_is_a_typed_failure_not_a_wrong_answer(judge):
    judge.model.script(
        EQUAL, {"status": 500, "body": {"error": {"message": "judge upstream is down"}}, "repeat": 2}
    )
    result = await verify(judge.url, verify_body("-3", "\\boxed{-4}"))
    assert result["reward"] == -1.0, "judge_failure_reward, not a verdict"
    failure = result["judge_failure"]
    assert (failure["kind"], failure["attempts"]) == ("upstream_error", 2)
    assert "judge upstream is down" in failure["message"]
    assert len(result["judge_evaluations"]) == 1, "the first comparison is kept; the swapped one failed"
    assert len(judge.model.requests()) == 3
    rollout = {**result, "_ng_task_index": 0, "_ng_rollout_index": 0}
    status, metrics = await post_json(judge.url + "/aggregate_metrics", {"verify_responses": [rollout]})
    assert status == 200, metrics
    assert metrics["agent_metrics"]["judge_failure_rate"] == 1.0
    assert metrics["key_metrics"]["judge_failure_rate"] == 1.0
    assert not [name for name in metrics["agent_metrics"] if "judge_accuracy" in name], "no verdict to score"


def test_judging_without_a_judge_model_is_refused_at_startup(workdir):
    config = {
        "no_judge": instance_config("resources_servers", IMPLEMENTATION, domain="math", should_use_judge=True)
    }
    with pytest.raises(RuntimeError, match="judge_model_server"):
        with run_instance(config, "no_judge", workdir):
            pass


@pytest.mark.parametrize(
    ("field", "value"), [("grading_timeout_s", 0), ("library_verifier_max_concurrency", 0)]
)
def test_nonpositive_limits_are_refused_at_startup(workdir, field, value):
    config = {"bad": instance_config("resources_servers", IMPLEMENTATION, domain="math", **{field: value})}
    with pytest.raises(RuntimeError, match=field):
        with run_instance(config, "bad", workdir):
            pass


# ---- recorded data --------------------------------------------------------------------------------------


def row_for(rollout: dict) -> dict:
    return next(row for row in ROWS if row["question"] == rollout_question(rollout))


def rollout_question(rollout: dict) -> str:
    prompt = rollout["responses_create_params"]["input"][-1]["content"]
    return next(row["question"] for row in ROWS if row["question"] in prompt)


@pytest.mark.parametrize("rollout", ROLLOUTS, ids=lambda rollout: rollout["response"]["id"][-8:])
async def test_recorded_rollouts_reproduce_their_symbolic_grade(server, rollout):
    """With the judge off, the reward is the library reward; the recorded judge verdicts all agree (0)."""
    row = row_for(rollout)
    result = await verify(server.url, {**row, "response": rollout["response"]})
    assert result["library_reward"] == rollout["library_reward"]
    assert result["extracted_answer"] == rollout["extracted_answer"]
    assert result["reward"] == rollout["reward"]


JUDGED = [rollout for rollout in ROLLOUTS if rollout["judge_evaluations"]]


@pytest.mark.parametrize("rollout", JUDGED, ids=lambda rollout: rollout["response"]["id"][-8:])
async def test_recorded_judged_rollouts_reproduce_with_the_recorded_verdicts(judge, rollout):
    """The judge sees the same comparison as recorded, and the recorded verdicts give the recorded reward."""
    recorded = rollout["judge_evaluations"]
    judge.model.script(*({"output": evaluation["response"]["output"]} for evaluation in recorded))
    result = await verify(judge.url, {**row_for(rollout), "response": rollout["response"]})
    assert result["reward"] == rollout["reward"]
    assert len(result["judge_evaluations"]) == len(recorded)
    for sent, evaluation in zip(judge.model.requests(), recorded, strict=True):
        assert user_prompt(sent) == evaluation["responses_create_params"]["input"][1]["content"]


def test_each_example_prompt_contains_its_question():
    for row in ROWS:
        assert row["question"] in row["responses_create_params"]["input"][-1]["content"]
        assert row["expected_answer"]


def test_config_declares_the_environment_with_the_judge_off():
    _, resources, _ = check_environment_config(FOLDER, IMPLEMENTATION, "math")
    assert resources.model_extra["should_use_judge"] is False
    assert resources.model_extra["judge_model_server"] == {
        "type": "responses_api_models",
        "name": "policy_model",
    }


# ---- metrics --------------------------------------------------------------------------------------------


def scored(
    task: int, rollout: int, reward: float, library: float, extracted: str | None, judged: bool
) -> dict:
    return {
        **verify_body("1", "x"),
        "reward": reward,
        "library_reward": library,
        "extracted_answer": extracted,
        "judge_evaluations": [] if judged else None,
        "_ng_task_index": task,
        "_ng_rollout_index": rollout,
    }


async def test_aggregate_metrics_scores_symbolic_and_judge_accuracy(server):
    rollouts = [
        scored(0, 0, 1.0, 1.0, "1", judged=False),
        scored(0, 1, 1.0, 0.0, "one", judged=True),  # the judge rescued it
        scored(1, 0, 0.0, 0.0, None, judged=False),
        scored(1, 1, 0.0, 0.0, "7", judged=True),
    ]
    status, result = await post_json(server.url + "/aggregate_metrics", {"verify_responses": rollouts})
    assert status == 200, result
    metrics, key = result["agent_metrics"], result["key_metrics"]
    assert metrics["pass@1[avg-of-2]/symbolic_accuracy"] == 25.0
    assert metrics["pass@2/symbolic_accuracy"] == 50.0
    # judge_accuracy counts only the two judged rollouts, each task's second: 1 and 0. The avg-of-k and
    # majority@k look at a task's first k rollouts (as NeMo Gym does), so k=1 sees no judge score.
    assert metrics["pass@1[avg-of-2]/judge_accuracy"] == 50.0
    assert "pass@1[avg-of-1]/judge_accuracy" not in metrics
    assert metrics["majority@1/judge_accuracy"] == 0.0 and metrics["majority@2/judge_accuracy"] == 50.0
    assert metrics["pass@1/judge_accuracy"] == 50.0 and "pass@2/judge_accuracy" not in metrics
    assert metrics["pass@1[avg-of-2]/no_answer"] == 25.0
    assert metrics["mean/library_reward"] == 0.25
    assert "majority@2/symbolic_accuracy" in metrics
    assert key["pass@2/symbolic_accuracy"] == 50.0
    assert key["pass@1[avg-of-2]/symbolic_accuracy"] == 25.0
    assert "majority@2/symbolic_accuracy" in key
    assert "pass@1[avg-of-2]/no_answer" in key
    assert not [
        name for name in key if name.startswith(("pass@2/", "majority@")) and name.endswith("no_answer")
    ]
    assert not [name for name in key if name.startswith("pass@1/") or name.startswith("pass@1[avg-of-1]")]
    assert {"mean/input_tokens", "mean/output_tokens"} <= set(key)


async def test_aggregate_metrics_scores_a_library_reward_that_is_not_a_number_as_0(server):
    rollouts = [
        {**scored(0, 0, 1.0, 1.0, "1", judged=False), "library_reward": library} for library in ("n/a", None)
    ]
    rollouts[1]["_ng_rollout_index"] = 1
    status, result = await post_json(server.url + "/aggregate_metrics", {"verify_responses": rollouts})
    assert status == 200, result
    assert result["agent_metrics"]["pass@1[avg-of-2]/symbolic_accuracy"] == 0.0


async def test_aggregate_metrics_of_nothing_is_empty(server):
    status, result = await post_json(server.url + "/aggregate_metrics", {"verify_responses": []})
    assert status == 200
    assert result == EMPTY_AGGREGATE_METRICS


# ---- responsiveness under load --------------------------------------------------------------------------


def load_body(index: int) -> dict:
    """Distinct answers (no cache hits); one in twenty is a polynomial expansion, the rest rational arithmetic."""
    n = index + 2
    if index % 20 == 0:
        return verify_body(f"(x+{n})^{{3}}", f"\\boxed{{x^3+{3 * n}x^2+{3 * n * n}x+{n**3}}}")
    correct = index % 2 == 0
    value = f"{n}+1-\\frac{{1}}{{{n}+1}}" if correct else f"{n}+2"
    return verify_body(f"\\frac{{{n}}}{{{n}+1}}+\\sqrt{{{n}^2}}", f"\\boxed{{{value}}}")


async def test_liveness_answers_while_a_thousand_verifies_are_in_flight(server):
    """The grading runs in the CPU pool's workers, not in the server's event loop (how fast `GET /` answers
    meanwhile is measured by bench/liveness.py)."""
    connector = aiohttp.TCPConnector(limit=0)
    async with aiohttp.ClientSession(connector=connector) as load, aiohttp.ClientSession() as probe:

        async def one_verify(index: int) -> float:
            async with load.post(server.url + "/verify", json=load_body(index)) as response:
                assert response.status == 200, await response.text()
                return (await response.json())["reward"]

        async def liveness() -> float:
            started = time.perf_counter()
            async with probe.get(server.url + "/") as response:
                assert response.status == 200 and await response.json() == {"status": "ok"}
            return time.perf_counter() - started

        await liveness()  # open the probe's connection before the load starts
        await one_verify(0)  # the pool's workers are up
        server_cpu, workers_cpu = cpu_split(server.process.pid)
        started = time.perf_counter()
        verifies = [asyncio.create_task(one_verify(index)) for index in range(LOAD_REQUESTS)]
        # Start probing once the server is demonstrably busy: the first answers have come back.
        await asyncio.wait(verifies, return_when=asyncio.FIRST_COMPLETED)
        samples: list[tuple[float, int]] = []
        while pending := sum(not task.done() for task in verifies):
            samples.append((await liveness(), pending))
            await asyncio.sleep(0.02)  # pacing of the probe, not synchronisation
        rewards = await asyncio.gather(*verifies)
        load_s = time.perf_counter() - started
        server_after, workers_after = cpu_split(server.process.pid)
        server_cpu, workers_cpu = server_after - server_cpu, workers_after - workers_cpu

    latencies = [latency for latency, _ in samples]
    ms = sorted(latency * 1000 for latency in latencies)
    print(
        f"\nGET / under {LOAD_REQUESTS} concurrent /verify ({load_s:.1f} s of load): {len(ms)} probes, "
        f"median {statistics.median(ms):.1f} ms, p95 {ms[int(0.95 * (len(ms) - 1))]:.1f} ms, "
        f"max {ms[-1]:.1f} ms; in flight at the first probe: {samples[0][1]}; CPU: server {server_cpu:.1f} s, "
        f"workers {workers_cpu:.1f} s"
    )
    assert rewards == [1.0 if index % 2 == 0 else 0.0 for index in range(LOAD_REQUESTS)]
    assert samples[0][1] >= LOAD_REQUESTS * 0.9, "the probes must start while most verifies are in flight"
    assert len(samples) >= 10, "the server kept answering GET / while the verifies were in flight"
    assert workers_cpu > server_cpu, (
        f"the grading ran in the server ({server_cpu:.1f} s) not the pool ({workers_cpu:.1f} s)"
    )


def cpu_split(pid: int) -> tuple[float, float]:
    """CPU seconds of the server process, and of the worker processes it forked."""
    return cpu_seconds(pid), sum(cpu_seconds(worker) for worker in worker_pids(pid))
