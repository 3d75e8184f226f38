"""The shared LLM-judge layer (nemo_gym/envkit/judge.py) under a judge that misbehaves.

Real processes: equivalence_llm_judge environments whose judge is an openai_model server in front of the
scripted upstream, each with its own limits so that one scenario's failures never trip another's circuit
breaker: `storm` (cap 4, long deadline), `strict` (1 s deadline, rate limit), `fragile` (circuit breaker
after 3 failures, 1 s cool-down). For `direct` the scripted upstream itself stands as the judge model
server, so that its `Retry-After` headers reach the layer (openai_model does not pass them on).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from contextlib import ExitStack
from dataclasses import dataclass
from itertools import pairwise

import pytest
from omegaconf import OmegaConf
from pydantic import ValidationError

from nemo_gym.config_types import BaseServerConfig, ConfigError
from nemo_gym.judge import CircuitBreaker, Judge, JudgeConfig, JudgeFailed, shared_gate
from nemo_gym.server_utils import ServerClient
from nemo_gym.testing import StartedServer, instance_config, post_json, response_with, run_instance
from tests.helpers import running_deployment, script_the_attempt_schedule, write_config
from tests.shared_fixtures import closed_port
from tests.upstream_script import ScriptedUpstream, assistant_message, fresh_model

EQUAL = "Same thing. [[A=B]]"
STORM_CAP = 4
STORM_ATTEMPTS = 10
STRICT_DEADLINE_S = 1.0
STRICT_RPS = 10.0
COOLDOWN_S = 1.0
WAIT_LIMIT_S = 60.0  # how long a test polls for a state before failing (a bound on waiting, not a speed)
BREAKER_FAILURES = 3
JUDGE_REF = {"type": "responses_api_models", "name": "judge_model"}


@dataclass
class Env:
    server: StartedServer
    model: str
    upstream: ScriptedUpstream
    seen_before: int = 0

    @property
    def url(self) -> str:
        return self.server.url

    def script(self, *steps: dict) -> None:
        """Forget unserved steps, remember where this test's requests start, and queue `steps`."""
        self.upstream.clear(self.model)
        self.seen_before = len(self.upstream.requests(self.model))
        self.upstream.script(self.model, list(steps))

    def received(self) -> list[dict]:
        return self.upstream.requests(self.model)[self.seen_before :]


@dataclass
class Stack:
    storm: Env
    strict: Env
    fragile: Env
    direct: Env


def equivalence_env(**inner: object) -> dict:
    settings = {"domain": "knowledge", "judge_backoff_base_s": 0.05, "judge_backoff_max_s": 0.1, **inner}
    return instance_config("resources_servers", "equivalence_llm_judge", **settings)


@pytest.fixture(scope="module")
def stack(scripted_upstream: ScriptedUpstream, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    workdir = tmp_path_factory.mktemp("judge_layer")
    model, direct_model = fresh_model("judge"), fresh_model("direct-judge")
    config = {
        "judge_model": instance_config(
            "responses_api_models",
            "openai_model",
            openai_base_url=scripted_upstream.base_url,
            openai_api_key="sk-judge-layer",
            openai_model=model,
            max_attempts=1,  # the judge layer owns the retries
            timeout_s=5,
        ),
        "raw_upstream": {
            "responses_api_models": {
                "scripted": {
                    "entrypoint": "app.py",
                    "host": scripted_upstream.host,
                    "port": scripted_upstream.port,
                }
            }
        },
    }
    with ExitStack() as servers:
        judge_model = servers.enter_context(run_instance(config, "judge_model", workdir))
        config["judge_model"]["responses_api_models"]["openai_model"]["port"] = judge_model.port
        config["storm"] = equivalence_env(
            judge_model_server=JUDGE_REF,
            judge_endpoint_max_concurrency=STORM_CAP,
            judge_deadline_s=10,
            judge_max_attempts=STORM_ATTEMPTS,
            judge_circuit_breaker_failures=None,
        )
        config["strict"] = equivalence_env(
            judge_model_server=JUDGE_REF,
            judge_deadline_s=STRICT_DEADLINE_S,
            judge_max_attempts=2,
            judge_rate_limit_rps=STRICT_RPS,
            judge_circuit_breaker_failures=None,
        )
        config["direct"] = equivalence_env(
            judge_model_server={"type": "responses_api_models", "name": "raw_upstream"},
            judge_responses_create_params={"input": [], "model": direct_model},
            judge_deadline_s=3,
            judge_max_attempts=3,
            judge_circuit_breaker_failures=None,
        )
        config["fragile"] = equivalence_env(
            judge_model_server=JUDGE_REF,
            judge_deadline_s=3,
            judge_circuit_breaker_failures=BREAKER_FAILURES,
            judge_circuit_breaker_window_s=30,
            judge_circuit_breaker_cooldown_s=COOLDOWN_S,
        )
        envs = {
            name: servers.enter_context(run_instance(config, name, workdir))
            for name in ("storm", "strict", "fragile", "direct")
        }
        yield Stack(
            storm=Env(envs["storm"], model, scripted_upstream),
            strict=Env(envs["strict"], model, scripted_upstream),
            fragile=Env(envs["fragile"], model, scripted_upstream),
            direct=Env(envs["direct"], direct_model, scripted_upstream),
        )


def row(expected: str = "the sun", answer: str = "The Sun.") -> dict:
    return {
        "responses_create_params": {"input": [{"role": "user", "content": "What heats surface waters?"}]},
        "expected_answer": expected,
        "response": response_with(assistant_message(answer)),
    }


async def verify(env: Env, body: dict | None = None) -> dict:
    status, result = await post_json(env.url + "/verify", body or row())
    assert status == 200, result
    return result


def max_overlap(requests: list[dict], hold_s: list[float]) -> int:
    """The most requests provably in flight at the upstream at once: request i was held at least
    `hold_s[i]` (its step's delay) from its arrival."""
    intervals = [
        (entry["received_at"], entry["received_at"] + hold)
        for entry, hold in zip(requests, hold_s, strict=True)
    ]
    return max(sum(start <= at < end for start, end in intervals) for at, _ in intervals)


# ---- a 429 storm ---------------------------------------------------------------------------------------


async def test_a_429_storm_is_ridden_out_within_the_deadline_the_attempts_and_the_cap(stack):
    judgments, rate_limited = 16, 24
    stack.storm.script(
        {"status": 429, "retry_after": 0.1, "repeat": rate_limited, "delay_s": 0.05},
        {"output": [assistant_message(EQUAL)], "repeat": judgments, "delay_s": 0.15},
    )
    results = await asyncio.gather(
        *(verify(stack.storm, row(f"answer-{n}", f"answer-{n}")) for n in range(judgments))
    )

    # Every judgment succeeded within its deadline.
    assert [result["judge_failure"] for result in results] == [None] * judgments
    assert [result["reward"] for result in results] == [1.0] * judgments
    received = stack.storm.received()
    assert len(received) == rate_limited + judgments, "each call reached the upstream once: no hidden retries"
    for n in range(judgments):
        calls = [entry for entry in received if f"answer-{n}\n" in entry["body"]["input"][-1]["content"]]
        assert 1 <= len(calls) <= STORM_ATTEMPTS
    holds = [0.05] * rate_limited + [0.15] * judgments
    assert max_overlap(received, holds) == STORM_CAP, "the cap was reached and never exceeded"


# ---- a hung judge, a broken judge ----------------------------------------------------------------------


async def test_a_hung_judge_fails_the_judgment_at_its_deadline_as_a_timeout(stack):
    stack.strict.script({"hang": True})
    started = time.monotonic()
    result = await verify(stack.strict)
    assert time.monotonic() - started >= STRICT_DEADLINE_S  # the judgment waited its whole deadline
    failure = result["judge_failure"]
    assert failure["kind"] == "timeout" and failure["attempts"] == 1
    assert "deadline" in failure["message"]
    assert result["reward"] == 0.0 and result["judge_evaluations"] == []
    log = stack.strict.server.log()
    assert "failed: timeout after 1 call(s)" in log and "Traceback" not in log


@pytest.mark.parametrize(
    ("step", "kind", "detail"),
    [
        (
            {"status": 500, "body": {"error": {"message": "judge upstream is down"}}},
            "upstream_error",
            "judge upstream is down",
        ),
        ({"malformed": True}, "bad_response", "invalid JSON"),
        (
            {"response": {"id": "resp_1", "output": "not a list"}},
            "bad_response",
            "invalid Responses API response",
        ),
    ],
    ids=["http_500", "malformed_json", "not_a_response"],
)
async def test_a_broken_judge_is_retried_then_reported_with_its_kind(stack, step, kind, detail):
    stack.strict.script({**step, "repeat": 2})
    result = await verify(stack.strict)
    failure = result["judge_failure"]
    assert (failure["kind"], failure["attempts"]) == (kind, 2)
    assert detail in failure["message"] and "\n" not in failure["message"]
    assert "sk-judge-layer" not in failure["message"]
    assert len(stack.strict.received()) == 2


async def test_a_judge_refusing_the_request_is_not_retried(stack):
    stack.strict.script({"status": 400, "body": {"error": {"message": "max_output_tokens too large"}}})
    failure = (await verify(stack.strict))["judge_failure"]
    assert (failure["kind"], failure["attempts"]) == ("upstream_error", 1)
    assert "HTTP 400" in failure["message"] and "max_output_tokens" in failure["message"]
    assert len(stack.strict.received()) == 1


async def test_the_rate_limit_spaces_the_calls(stack):
    count = 5
    stack.strict.script({"output": [assistant_message(EQUAL)], "repeat": count})
    results = await asyncio.gather(*(verify(stack.strict) for _ in range(count)))
    assert [result["reward"] for result in results] == [1.0] * count
    arrivals = sorted(entry["received_at"] for entry in stack.strict.received())
    spread = arrivals[-1] - arrivals[0]
    assert spread >= 0.8 * (count - 1) / STRICT_RPS, f"{count} calls started within {spread:.2f} s"


# ---- the circuit breaker -------------------------------------------------------------------------------


async def close_the_circuit(env: Env) -> None:
    """Judge until a judgment succeeds (the breaker may be open from an earlier failure), within a bound."""
    env.script({"output": [assistant_message(EQUAL)], "repeat": 1000})
    deadline = time.monotonic() + COOLDOWN_S + WAIT_LIMIT_S
    while (await verify(env))["judge_failure"] is not None:
        assert time.monotonic() < deadline, "the circuit never closed"
        await asyncio.sleep(0.05)


async def open_the_circuit(env: Env) -> None:
    env.script({"status": 400, "repeat": BREAKER_FAILURES})
    for _ in range(BREAKER_FAILURES):
        assert (await verify(env))["judge_failure"]["kind"] == "upstream_error"


async def test_the_circuit_opens_fails_fast_without_calling_and_closes_after_the_cooldown(stack):
    env = stack.fragile
    await close_the_circuit(env)
    await open_the_circuit(env)
    opened = time.monotonic()
    env.script({"output": [assistant_message(EQUAL)], "repeat": 1000})
    failure = (await verify(env))["judge_failure"]
    assert failure["kind"] == "circuit_open" and failure["attempts"] == 0
    assert env.received() == [], "an open circuit does not call the judge"

    while (result := await verify(env))["judge_failure"] is not None:
        assert result["judge_failure"]["kind"] == "circuit_open"
        assert time.monotonic() - opened < COOLDOWN_S + WAIT_LIMIT_S, "the circuit never closed"
        await asyncio.sleep(0.05)
    assert time.monotonic() - opened >= COOLDOWN_S - 0.1, "the circuit stayed open for the whole cool-down"
    assert result["reward"] == 1.0
    assert len(env.received()) == 1, "the trial judgment was the first call after the cool-down"
    assert (await verify(env))["judge_failure"] is None, "closed again: judgments go through"
    assert "circuit opened" in env.server.log() and "circuit closed" in env.server.log()


async def test_one_trial_at_a_time_and_a_failed_trial_reopens_the_circuit(stack):
    env = stack.fragile
    await close_the_circuit(env)
    await open_the_circuit(env)
    opened = time.monotonic()
    env.script({"status": 400, "delay_s": 0.3})
    cooled_down_in = opened + COOLDOWN_S + 0.05 - time.monotonic()
    await asyncio.sleep(max(0.0, cooled_down_in))  # waiting out the cool-down is the behaviour under test
    trial, *others = await asyncio.gather(*(verify(env) for _ in range(4)))
    kinds = sorted(result["judge_failure"]["kind"] for result in [trial, *others])
    assert kinds == ["circuit_open"] * 3 + ["upstream_error"], "only one trial goes through half-open"
    assert len(env.received()) == 1
    assert (await verify(env))["judge_failure"]["kind"] == "circuit_open", "the failed trial reopened it"
    await close_the_circuit(env)


# ---- Retry-After (the upstream itself is the judge model server) ---------------------------------------


async def test_retry_after_is_honoured_between_calls(stack):
    stack.direct.script(
        {"status": 429, "retry_after": 0.4, "repeat": 2}, {"output": [assistant_message(EQUAL)]}
    )
    result = await verify(stack.direct)
    assert result["reward"] == 1.0 and result["judge_failure"] is None
    arrivals = [entry["received_at"] for entry in stack.direct.received()]
    assert len(arrivals) == 3
    assert all(later - earlier >= 0.38 for earlier, later in pairwise(arrivals)), arrivals


async def test_a_retry_after_beyond_the_deadline_fails_at_once_as_rate_limited(stack):
    stack.direct.script({"status": 429, "retry_after": 60})
    failure = (await verify(stack.direct))["judge_failure"]
    # No point waiting for a retry the deadline cannot hold: one attempt, and rate_limited rather than the
    # timeout that waiting out the deadline would have given.
    assert (failure["kind"], failure["attempts"]) == ("rate_limited", 1)


async def test_a_model_server_passes_the_upstream_retry_after_on_to_the_judge(stack):
    """openai_model answers the upstream's 429 with its Retry-After, so a wait past the deadline is known at
    once; without the header the layer would back off briefly and succeed on its second call."""
    stack.storm.script({"status": 429, "retry_after": 60}, {"output": [assistant_message(EQUAL)]})
    failure = (await verify(stack.storm))["judge_failure"]
    assert (failure["kind"], failure["attempts"]) == ("rate_limited", 1), failure
    assert len(stack.storm.received()) == 1


async def test_the_judge_calls_again_only_as_the_http_clients_attempt_schedule_says(
    scripted_upstream, monkeypatch
):
    """In process, so the schedule can be scripted: it says stop after the first 429, although the judge's
    own attempts (3) and deadline would allow more; the layer asks it with the call count and Retry-After."""
    model = fresh_model("scheduled-judge")
    upstream = {"entrypoint": "app.py", "host": scripted_upstream.host, "port": scripted_upstream.port}
    client = ServerClient(
        head_server_config=BaseServerConfig(host="127.0.0.1", port=closed_port()),
        global_config_dict=OmegaConf.create(
            {"scheduled_judge": {"responses_api_models": {"scripted": upstream}}}
        ),
    )
    config = JudgeConfig(
        judge_model_server={"type": "responses_api_models", "name": "scheduled_judge"},
        judge_responses_create_params={"input": [], "model": model},
        judge_max_attempts=3,
        judge_deadline_s=30,
        judge_circuit_breaker_failures=None,
    )
    judge = Judge(config, client, owner="test")
    scripted_upstream.script(
        model, [{"status": 429, "retry_after": 0.25}, {"output": [assistant_message(EQUAL)]}]
    )
    asked = script_the_attempt_schedule(monkeypatch, [None])
    with pytest.raises(JudgeFailed) as raised:
        await judge.ask(judge.params_for([{"role": "user", "content": "Same?"}]))
    assert (raised.value.failure.kind, raised.value.failure.attempts) == ("rate_limited", 1)
    assert [(entry.max_attempts, entry.attempts, entry.retry_after_s) for entry in asked] == [(3, 1, 0.25)]
    assert 0 < asked[0].remaining_s <= 30
    assert len(scripted_upstream.requests(model)) == 1


# ---- shared limits, config -----------------------------------------------------------------------------


async def test_co_hosted_environments_share_one_cap_per_judge(scripted_upstream, tmp_path):
    model, cap, per_env = fresh_model("shared-judge"), 2, 4
    judge = {
        "entrypoint": "app.py",
        "openai_base_url": scripted_upstream.base_url,
        "openai_api_key": "sk-shared",
        "openai_model": model,
        "max_retries": 1,
    }
    env = {"entrypoint": "app.py", "domain": "knowledge", "judge_model_server": JUDGE_REF}
    env["judge_endpoint_max_concurrency"] = cap
    config = {
        "judge_model": {"responses_api_models": {"openai_model": judge}},
        "env_a": {"resources_servers": {"equivalence_llm_judge": env}},
        "env_b": {"resources_servers": {"equivalence_llm_judge": env}},
        "colocate": True,
    }
    scripted_upstream.script(
        model, [{"output": [assistant_message(EQUAL)], "repeat": 2 * per_env, "delay_s": 0.3}]
    )
    with running_deployment([write_config(tmp_path, config)], tmp_path) as deployment:
        bodies = [
            (deployment.url(name) + "/verify", row()) for name in ("env_a", "env_b") for _ in range(per_env)
        ]
        answers = await asyncio.gather(*(post_json(url, body) for url, body in bodies))
    assert [(status, result["reward"]) for status, result in answers] == [(200, 1.0)] * (2 * per_env)
    received = scripted_upstream.requests(model)
    assert max_overlap(received, [0.3] * len(received)) == cap


def test_environments_sharing_a_judge_must_agree_on_its_limits():
    shared_gate("judge-of-this-test", JudgeConfig(judge_endpoint_max_concurrency=8))
    assert shared_gate(
        "judge-of-this-test", JudgeConfig(judge_endpoint_max_concurrency=8, judge_deadline_s=5)
    )
    with pytest.raises(ConfigError, match="judge_endpoint_max_concurrency is 9 here but 8"):
        shared_gate("judge-of-this-test", JudgeConfig(judge_endpoint_max_concurrency=9))


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("judge_rate_limit_rps", 0),
        ("judge_endpoint_max_concurrency", 0),
        ("judge_deadline_s", -1),
        ("judge_max_attempts", 0),
        ("judge_circuit_breaker_cooldown_s", 0),
        ("judge_backoff_max_s", 0.5),
    ],
)
def test_a_bad_judge_setting_is_refused_naming_its_key(key, value):
    with pytest.raises(ValidationError, match=key):
        JudgeConfig(**{key: value})


def test_an_environment_with_a_bad_judge_setting_refuses_to_start(tmp_path):
    config = {
        "judge_model": instance_config(
            "responses_api_models",
            "openai_model",
            openai_base_url="http://127.0.0.1:9/v1",
            openai_api_key="sk-x",
            openai_model="m",
        ),
        "bad": equivalence_env(judge_model_server=JUDGE_REF, judge_circuit_breaker_window_s=0),
    }
    with pytest.raises(RuntimeError, match="judge_circuit_breaker_window_s"):
        with run_instance(config, "bad", tmp_path):
            pass


def test_breaker_counts_failures_in_a_sliding_window_and_lets_one_trial_through():
    now = [0.0]
    breaker = CircuitBreaker(failures=3, window_s=10, cooldown_s=5, clock=lambda: now[0])
    for at in (0.0, 6.0, 12.0):  # never three within 10 s
        now[0] = at
        breaker.record(breaker.admit(), succeeded=False)
    assert breaker.admit() == "normal"
    for at in (17.0, 18.0):
        now[0] = at
        breaker.record(breaker.admit(), succeeded=False)
    assert breaker.admit() is None, "12, 17, 18: three failures within the window"
    now[0] = 22.9
    assert breaker.admit() is None
    now[0] = 23.0
    assert breaker.admit() == "trial"
    assert breaker.admit() is None, "one trial at a time"
    breaker.record("trial", succeeded=None)
    assert breaker.admit() == "trial", "an abandoned trial frees the place"
    breaker.record("trial", succeeded=True)
    assert breaker.admit() == "normal"
