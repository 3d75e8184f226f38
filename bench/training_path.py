"""What does training mode cost the vllm_model server? (`make bench-training`)

Part 1, rollouts: two vllm_model servers in front of one fake vLLM (tests/vllm_upstream.py: real aiohttp,
real BPE token ids), one plain (`return_token_id_information: false`), one in training mode, each driven
with the same 5-turn tool rollouts, `--concurrency` in flight, the way an agent drives `POST /v1/responses`:
every turn posts the growing `input` (the output items as returned, token fields included, plus a
`function_call_output` per call), one cookie jar per rollout. The modes alternate in rounds, so both see
the same machine; only the ratios between them mean something on a noisy host.

The fake serves a model's scripted steps from one FIFO queue and the served model name is fixed per
vllm_model instance, so concurrent rollouts share the queue in arrival order. Every step is therefore the
same valid turn: reasoning, a line of text and one `get_weather` call. Each rollout makes five calls and
stops; turns 1-4 answer the call, the fifth reply's text is the final answer (its call is not answered).

Every reply is checked: status 200; in training mode the last output item carries non-empty
prompt_token_ids / generation_token_ids / generation_log_probs, each prompt starts with the previous
prompt + generation, and no `token_continuity` appears. Any failure is printed loudly and exits 1.

Part 2, break search: `tokens.splice_point` in-process on a synthetic 50-turn, ~77,000-token history whose
prompts chain exactly, intact and with one template segment edited (the failing path).

    .venv/bin/python bench/training_path.py [--quick] [--rollouts 1024] [--concurrency 256]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import os
import random
import statistics
import sys
import tempfile
import time
import urllib.request
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import aiohttp
import orjson

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))  # `responses_api_models` and `tests` live at the repo root

from nemo_gym.testing import instance_config, run_instance, run_server  # noqa: E402
from responses_api_models.vllm_model import tokens  # noqa: E402
from responses_api_models.vllm_model.tests.test_training import WEATHER_TOOL  # noqa: E402

TURNS = 5
CPU_RATIO_GOAL = 1.3
BREAK_GOAL_MS = 2.0
REQUEST_TIMEOUT_S = 120
PATHS = ("/v1/chat/completions", "/v1/completions", "/tokenize", "/detokenize")
TOKEN_FIELDS = ("prompt_token_ids", "generation_token_ids", "generation_log_probs")
SYSTEM = "You are a helpful assistant. Answer the question of the user and call a tool when you need one."
QUESTION = "What is the weather like in Paris, London, Berlin and Tokyo today? Which city is the sunniest?"
# Valid at any position of any rollout, since concurrent rollouts take steps from one shared queue.
STEP = {
    "reasoning": "The user asks about the weather. I should call the get_weather function with the city.",
    "text": "Let me check the weather for you with the weather tool.",
    "tool_calls": [{"name": "get_weather", "arguments": {"city": "Paris"}}],
}


# ---- the fake vLLM, counting calls instead of logging them ------------------------------------------


def serve_upstream() -> None:
    """tests/vllm_upstream.py as is, except that requests are counted per model and path instead of
    logged (the log would grow by every body for the whole run) and access logging is off."""
    from aiohttp import web

    from tests import local_service, vllm_upstream

    calls: dict[str, Counter[str]] = {}

    class CountingUpstream(vllm_upstream.Upstream):
        def record(self, model: str, request: web.Request, body: Any) -> dict[str, Any]:
            calls.setdefault(model, Counter())[request.path] += 1
            return {}

    async def counted(request: web.Request) -> web.Response:
        return web.json_response(calls)

    vllm_upstream.Upstream = CountingUpstream  # make_app builds its state from the module's name
    app = vllm_upstream.make_app()
    app.router.add_get("/_bench/calls", counted)
    logging.getLogger("aiohttp.access").setLevel(logging.WARNING)
    local_service.serve(app)


def control(url: str, method: str, path: str, body: Any = None) -> Any:
    data = None if body is None else orjson.dumps(body)
    request = urllib.request.Request(url + path, data, {"Content-Type": "application/json"}, method=method)
    with urllib.request.urlopen(request, timeout=30) as answer:
        return orjson.loads(answer.read())


# ---- CPU of a process tree ------------------------------------------------------------------------------


def tree_cpu_s(pid: int) -> float:
    """utime + stime of `pid`, its reaped children and its live descendants (a server may fork workers)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    ticks = sum(int(value) for value in fields[11:15])
    seconds = ticks / os.sysconf("SC_CLK_TCK")
    with contextlib.suppress(OSError):
        for child in Path(f"/proc/{pid}/task/{pid}/children").read_text().split():
            with contextlib.suppress(OSError):
                seconds += tree_cpu_s(int(child))
    return seconds


# ---- the rollouts -------------------------------------------------------------------------------------


class RolloutFailure(Exception):
    """A reply that a trainer could not use; the rollout stops there."""


@dataclass
class Phase:
    """One mode's measured batch: what finished, what failed, and what it cost."""

    mode: str
    ok: int = 0
    failures: Counter[str] = field(default_factory=Counter)
    seconds: float = 0.0
    server_cpu_s: float = 0.0
    upstream_cpu_s: float = 0.0
    calls: Counter[str] = field(default_factory=Counter)
    last_prompt_tokens: list[int] = field(default_factory=list)
    capped: bool = False
    batch_cpu_ms: list[float] = field(default_factory=list)  # server CPU per rollout of each measured batch

    @property
    def attempted(self) -> int:
        return self.ok + sum(self.failures.values())


def check_tokens(response: dict[str, Any], previous: list[int] | None) -> list[int]:
    """The training checks of one reply; returns prompt + generation, which the next prompt must extend."""
    if "token_continuity" in response or any("token_continuity" in item for item in response["output"]):
        raise RolloutFailure("token_continuity present")
    last = response["output"][-1]
    for name in TOKEN_FIELDS:
        if not isinstance(last.get(name), list) or not last[name]:
            raise RolloutFailure(f"last output item has no {name}")
    if len(last["generation_log_probs"]) != len(last["generation_token_ids"]):
        raise RolloutFailure("generation_log_probs and generation_token_ids differ in length")
    prompt = last["prompt_token_ids"]
    if previous is not None and prompt[: len(previous)] != previous:
        raise RolloutFailure("prompt does not extend the previous prompt + generation")
    return prompt + last["generation_token_ids"]


async def rollout(url: str, connector: aiohttp.BaseConnector, training: bool) -> int:
    """Five turns as an agent sends them; returns the last prompt's length (0 in plain mode)."""
    history: list[dict[str, Any]] = [{"role": "user", "content": QUESTION}]
    previous: list[int] | None = None
    jar = aiohttp.CookieJar(unsafe=True)
    timeout = aiohttp.ClientTimeout(total=REQUEST_TIMEOUT_S)
    async with aiohttp.ClientSession(
        connector=connector, connector_owner=False, cookie_jar=jar, timeout=timeout
    ) as session:
        for turn in range(1, TURNS + 1):
            body = orjson.dumps({"instructions": SYSTEM, "input": history, "tools": [WEATHER_TOOL]})
            headers = {"Content-Type": "application/json"}
            async with session.post(f"{url}/v1/responses", data=body, headers=headers) as answer:
                status, raw = answer.status, await answer.read()
            if status != 200:
                raise RolloutFailure(f"HTTP {status}: {raw[:200].decode(errors='replace')}")
            response = orjson.loads(raw)
            output = response.get("output") or []
            if not output:
                raise RolloutFailure("empty output")
            if training:
                previous = check_tokens(response, previous)
            elif any(name in item for item in output for name in TOKEN_FIELDS):
                raise RolloutFailure("token fields in plain mode")
            calls = [item for item in output if item.get("type") == "function_call"]
            if turn == TURNS:
                if not any(item.get("type") == "message" for item in output):
                    raise RolloutFailure("final turn has no text")
                break
            if not calls:
                raise RolloutFailure(f"turn {turn} has no function call")
            history.extend(output)
            history.extend(
                {
                    "type": "function_call_output",
                    "call_id": call["call_id"],
                    "output": f"Paris: sunny, {turn}",
                }
                for call in calls
            )
    return len(previous or [])


async def run_batch(
    url: str, count: int, concurrency: int, training: bool, max_s: float, phase: Phase
) -> None:
    """`count` rollouts with `concurrency` in flight; none is started after `max_s` seconds."""
    connector = aiohttp.TCPConnector(limit=concurrency, force_close=False)
    deadline = time.monotonic() + max_s
    started = 0

    async def worker() -> None:
        nonlocal started
        while started < count:
            if time.monotonic() > deadline:
                phase.capped = True
                return
            started += 1
            try:
                phase.last_prompt_tokens.append(await rollout(url, connector, training))
                phase.ok += 1
            except RolloutFailure as error:
                phase.failures[str(error)] += 1
            except (aiohttp.ClientError, TimeoutError, ValueError, KeyError, TypeError) as error:
                phase.failures[f"{type(error).__name__}: {error}"[:200]] += 1

    try:
        await asyncio.gather(*(worker() for _ in range(min(concurrency, count))))
    finally:
        await connector.close()


@dataclass
class Stack:
    upstream_url: str
    upstream_pid: int
    servers: dict[str, tuple[str, int, str]]  # mode -> (url, pid, served model)


async def measure(stack: Stack, mode: str, count: int, args: argparse.Namespace, phase: Phase) -> None:
    """One batch of `mode`, with the CPU and the upstream calls it cost added to `phase`."""
    url, pid, model = stack.servers[mode]
    control(
        stack.upstream_url, "POST", f"/_script/{model}", {"steps": [{**STEP, "repeat": TURNS * count + 1}]}
    )
    calls_before = Counter(control(stack.upstream_url, "GET", "/_bench/calls").get(model, {}))
    cpu_before, upstream_before = tree_cpu_s(pid), tree_cpu_s(stack.upstream_pid)
    attempted_before, started = phase.attempted, time.perf_counter()
    await run_batch(url, count, args.concurrency, mode == "training", args.max_seconds, phase)
    phase.seconds += time.perf_counter() - started
    server_cpu_s = tree_cpu_s(pid) - cpu_before
    phase.server_cpu_s += server_cpu_s
    phase.batch_cpu_ms.append(server_cpu_s * 1000 / max(phase.attempted - attempted_before, 1))
    phase.upstream_cpu_s += tree_cpu_s(stack.upstream_pid) - upstream_before
    phase.calls += Counter(control(stack.upstream_url, "GET", "/_bench/calls").get(model, {})) - calls_before
    control(stack.upstream_url, "DELETE", f"/_script/{model}")


def server_config(upstream_url: str, model: str, training: bool) -> dict[str, Any]:
    inner = {
        "base_url": f"{upstream_url}/v1",
        "api_key": "sk-bench-training-path",
        "model": model,
        "uses_reasoning_parser": True,
        "return_token_id_information": training,
    }
    return {"policy_model": instance_config("responses_api_models", "vllm_model", **inner)}


async def rollout_part(args: argparse.Namespace, workdir: Path) -> dict[str, Phase]:
    """Both modes, alternating round by round (ABBA...), after a warm-up of each."""
    phases = {mode: Phase(mode) for mode in ("plain", "training")}
    with contextlib.ExitStack() as stack:
        upstream = stack.enter_context(
            run_server([str(Path(__file__)), "--serve-upstream"], workdir, cwd=ROOT)
        )
        servers = {}
        for mode in phases:
            model = f"bench-{mode}-{os.getpid()}"
            config = server_config(upstream.url, model, mode == "training")
            server = stack.enter_context(run_instance(config, "policy_model", workdir))
            servers[mode] = (server.url, server.process.pid, model)
        running = Stack(upstream.url, upstream.process.pid, servers)
        for mode in phases:
            await measure(running, mode, args.warmup, args, Phase(mode))
        per_round = -(-args.rollouts // args.rounds)
        for number in range(args.rounds):
            order = list(phases) if number % 2 == 0 else list(reversed(phases))
            for mode in order:
                await measure(running, mode, per_round, args, phases[mode])
                print(f"round {number + 1} {mode}: {phases[mode].attempted} rollouts so far", flush=True)
    return phases


# ---- the break search -----------------------------------------------------------------------------------

EOS, NEWLINE, IM_START, ASSISTANT = 151645, 198, 151644, 77091
FACTS = tokens.TemplateFacts(EOS)


@dataclass
class History:
    turns: list[tokens.TokenTurn]
    full: list[int]


def synthetic_history(turn_count: int, first_prompt: int, generation: int, segment: int) -> History:
    """Prompts that chain exactly (P_k+1 = P_k + G_k + S_k+1), ChatML-shaped: each G ends with EOS, each
    template segment S starts with "\\n" and ends with the next assistant header; random ids between."""
    chooser = random.Random(0)

    def ids(count: int) -> list[int]:
        return [chooser.randrange(1000, 150000) for _ in range(count)]

    def template_segment() -> list[int]:
        return [NEWLINE, IM_START, *ids(segment - 7), EOS, NEWLINE, IM_START, ASSISTANT, NEWLINE]

    prompt = [IM_START, *ids(first_prompt - 4), IM_START, ASSISTANT, NEWLINE]
    turns = []
    for number in range(1, turn_count + 1):
        generated = [*ids(generation - 1), EOS]
        turns.append(tokens.TokenTurn(number, 2 * number, prompt, generated))
        if number < turn_count:
            prompt = prompt + generated + template_segment()
    last = turns[-1]
    return History(turns, last.prompt_token_ids + last.generation_token_ids + template_segment())


def edited(history: History, turn_number: int) -> History:
    """The same history with one token of the template segment before `turn_number` changed in the
    conversation sent (the caller edited that tool output); the recorded turns keep the old ids."""
    earlier = history.turns[turn_number - 2]
    position = len(earlier.prompt_token_ids) + len(earlier.generation_token_ids) + 10
    full = list(history.full)
    full[position] = 999
    return History(history.turns, full)


def time_splice_point(history: History, repetitions: int, max_s: float) -> tuple[float, Any]:
    """Median ms per call (stopping early after `max_s`), and the call's result."""
    times, deadline = [], time.perf_counter() + max_s
    result = None
    for _ in range(repetitions):
        started = time.perf_counter()
        _, result = tokens.splice_point(history.turns, history.full, FACTS)
        times.append((time.perf_counter() - started) * 1000)
        if time.perf_counter() > deadline:
            break
    return statistics.median(times), result


def break_part(args: argparse.Namespace) -> tuple[list[str], bool]:
    """The markdown rows of the break search, and whether the results were the expected ones."""
    history = synthetic_history(50, first_prompt=1200, generation=560, segment=960)
    intact_ms, intact = time_splice_point(history, args.break_reps, 30)
    broken_ms, broken = time_splice_point(edited(history, 2), args.break_reps, 30)
    correct = intact is None and broken is not None and broken.broken_at_turn == 2
    turn_count = len(history.turns)
    rows = [
        f"History: {turn_count} turns, {len(history.full):,} tokens; median of up to {args.break_reps} calls.",
        "",
        "| history | result | ms per call (one call per rollout turn) | ms per history turn | "
        f"goal < {BREAK_GOAL_MS:g} ms per call |",
        "|---|---|---|---|---|",
    ]
    cases = (("intact", intact_ms, intact), ("one segment edited, at turn 2 (worst case)", broken_ms, broken))
    for label, ms, result in cases:
        shown = "no break" if result is None else f"break at turn {result.broken_at_turn}"
        verdict = "met" if ms < BREAK_GOAL_MS else "MISSED"
        rows.append(f"| {label} | {shown} | {ms:.2f} | {ms / turn_count:.3f} | {verdict} |")
    if not correct:
        rows.append("")
        rows.append(f"**WRONG RESULT**: intact gave {intact!r}, edited gave {broken!r}")
    return rows, correct


# ---- the report -----------------------------------------------------------------------------------------


def per_rollout(value: float, phase: Phase) -> float:
    return value / phase.attempted if phase.attempted else float("nan")


def rollout_rows(phases: dict[str, Phase], args: argparse.Namespace) -> list[str]:
    rows = [
        f"{args.rollouts} rollouts per mode of {TURNS} turns, {args.concurrency} in flight, {args.rounds} "
        f"round(s), alternating; warm-up {args.warmup} per mode.",
        "",
        "| mode | ok | failed | s | rollouts/s | server CPU ms/rollout | fake vLLM CPU ms/rollout | "
        + " | ".join(f"`{path}`/rollout" for path in PATHS)
        + " | last prompt tokens (median) |",
        "|---" * (8 + len(PATHS)) + "|",
    ]
    for phase in phases.values():
        rate = phase.ok / phase.seconds if phase.seconds else 0.0
        prompt = int(statistics.median(phase.last_prompt_tokens)) if any(phase.last_prompt_tokens) else "-"
        rows.append(
            f"| {phase.mode} | {phase.ok} | {sum(phase.failures.values())} | {phase.seconds:.1f} | {rate:.1f} | "
            f"{per_rollout(phase.server_cpu_s * 1000, phase):.2f} | {per_rollout(phase.upstream_cpu_s * 1000, phase):.2f} | "
            + " | ".join(f"{per_rollout(phase.calls[path], phase):.2f}" for path in PATHS)
            + f" | {prompt} |"
        )
    plain, training = phases["plain"], phases["training"]
    plain_cpu = per_rollout(plain.server_cpu_s, plain)
    cpu_ratio = per_rollout(training.server_cpu_s, training) / plain_cpu if plain_cpu else float("nan")
    rate_ratio = (
        (training.ok / training.seconds) / (plain.ok / plain.seconds) if plain.ok and training.ok else 0
    )
    verdict = "met" if cpu_ratio <= CPU_RATIO_GOAL else "MISSED"
    if plain.failures or training.failures:
        verdict = "not judged: rollouts failed"
    rows += [
        "",
        f"- Server CPU per rollout, training / plain: **{cpu_ratio:.2f}x** (goal <= {CPU_RATIO_GOAL}x): {verdict}",
        f"- Rollouts/s, training / plain: {rate_ratio:.2f}x (the fake vLLM shares the 2 cores and answers "
        "more calls per rollout in training mode, so this is the whole path, not the server alone)",
        "- Server CPU ms/rollout per round (the spread is the noise): "
        + "; ".join(
            f"{phase.mode} " + " / ".join(f"{ms:.2f}" for ms in phase.batch_cpu_ms)
            for phase in phases.values()
        ),
    ]
    for phase in phases.values():
        if phase.capped:
            rows.append(
                f"- {phase.mode}: stopped at the {args.max_seconds:.0f} s cap before all rollouts started"
            )
        for reason, count in phase.failures.most_common(5):
            rows.append(f"- **FAILED** {phase.mode}: {count} x {reason}")
    return rows


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small counts: a smoke run of about a minute")
    parser.add_argument("--rollouts", type=int, help="rollouts per mode (default 1024; quick 128)")
    parser.add_argument("--concurrency", type=int, help="rollouts in flight (default 256; quick 64)")
    parser.add_argument("--rounds", type=int, help="alternations of the two modes (default 2; quick 1)")
    parser.add_argument(
        "--warmup", type=int, help="unmeasured rollouts per mode first (default 64; quick 16)"
    )
    parser.add_argument(
        "--max-seconds", type=float, help="per batch: no rollout starts after it (default 300)"
    )
    parser.add_argument("--break-reps", type=int, help="splice_point calls timed per history (default 50)")
    parser.add_argument("--serve-upstream", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    defaults = {
        "rollouts": 1024,
        "concurrency": 256,
        "rounds": 2,
        "warmup": 64,
        "max_seconds": 300,
        "break_reps": 50,
    }
    if args.quick:
        defaults |= {
            "rollouts": 128,
            "concurrency": 64,
            "rounds": 1,
            "warmup": 16,
            "max_seconds": 60,
            "break_reps": 5,
        }
    for name, value in defaults.items():
        if getattr(args, name) is None:
            setattr(args, name, value)
    return args


def main() -> int:
    args = parse_args()
    if args.serve_upstream:
        serve_upstream()
        return 0
    with tempfile.TemporaryDirectory(prefix="bench-training-") as scratch:
        phases = asyncio.run(rollout_part(args, Path(scratch)))
    break_rows, break_correct = break_part(args)
    stamp = datetime.now(UTC).strftime("%Y-%m-%dT%H-%M-%SZ")
    failed = sum(sum(phase.failures.values()) for phase in phases.values())
    lines = [
        f"# Training path (`vllm_model`, training vs plain), {stamp}",
        "",
        *rollout_rows(phases, args),
        "",
        "## Break search (`tokens.splice_point`, in-process)",
        "",
        *break_rows,
    ]
    if failed or not break_correct:
        lines = [f"**FAILED: {failed} rollout(s) failed; break search correct: {break_correct}**", "", *lines]
    report = "\n".join(lines) + "\n"
    out = HERE / "results" / stamp
    out.mkdir(parents=True, exist_ok=True)
    (out / "training_path.md").write_text(report)
    print(report + f"\nwritten to {out / 'training_path.md'}")
    return 1 if failed or not break_correct else 0


if __name__ == "__main__":
    sys.exit(main())
