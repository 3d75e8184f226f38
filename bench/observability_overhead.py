"""What `/metrics` and tracing cost: server CPU per rollout with metrics off, metrics on, and metrics and
tracing on, in the same run.

    .venv/bin/python bench/observability_overhead.py [--rollouts 1500] [--concurrency 64] [--repeats 3] [--separate]
        [--profile]

The bench workload (the deployment of `make bench`: example_single_tool_call + simple_agent + openai_model
co-hosted in one process forked into two workers, two upstream calls per rollout, the harness's fake
upstream; with `--separate`, one process per server, so every call between servers is an HTTP request)
runs in rounds: in each, every mode gets a deployment of its own, started for the round, warmed up,
measured over one `gym collect` of the same rows, and stopped (the order reversed every other round), so a
slower stretch of this shared machine, or a deployment's own luck, hits every mode alike. A second copy of
the baseline ("metrics off, again") shows how far two identical configs differ in the same run: an
overhead within that is noise. A mode's figure is the median over its rounds of the CPU time (utime +
stime, /proc/<pid>/stat) of its serving processes and their workers, divided by the rollouts; the paired
overhead is the median of the rounds' own ratios to the baseline (steadier when the load drifts). Each
mode is the YAML appended to the deployment's config (one more entry in MODES adds a mode). With tracing
on, every server exports its spans over OTLP/HTTP to a sink in this process that reads and drops them, so
the figure holds the servers' whole cost of tracing (spans, batching, encoding, sending) and none of a
collector's.
With `--profile`, one more collection runs on the traced deployment under py-spy, and the report adds
tracing's share of its serving processes' samples (`tracing_share.py`), a figure the machine's load does not
move. The report is printed and written to bench/results/<UTC time>/observability_overhead.md.
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import tempfile
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import tracing_share
from ray_shards import (
    Deployment,
    fake_upstream,
    measured_collection,
    median_figures,
    rows_file,
    with_descendants,
)

HERE = Path(__file__).resolve().parent
COHOSTED = "colocate: true\ncolocate_num_workers: 2\n"
SINK_ADDRESS = "SINK_ADDRESS"
METRICS_OFF = "telemetry:\n  metrics_enabled: false\n"
MODES = {
    "metrics off": METRICS_OFF,
    "metrics off, again": METRICS_OFF,  # the noise control: what two identical deployments differ by
    "metrics on": "",  # the default
    "metrics and tracing on": f"telemetry:\n  enabled: true\n  otlp_endpoint: http://{SINK_ADDRESS}\n",
}
# mode: (the mode it is compared with, the goal in percent)
TRACED = "metrics and tracing on"
GOALS = {"metrics on": ("metrics off", 5.0), TRACED: ("metrics off", 20.0)}
CONTROLS = {"metrics off, again": "metrics off"}
WARM_UP_ROLLOUTS = 64


class _DroppingSink(BaseHTTPRequestHandler):
    """An OTLP/HTTP endpoint that reads each export and answers an empty (successful) response, keeping the
    connection open as a collector does."""

    protocol_version = "HTTP/1.1"

    def do_POST(self) -> None:  # noqa: N802 (http.server's name)
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *_: object) -> None:
        pass


@contextlib.contextmanager
def span_sink() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _DroppingSink)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rollouts", type=int, default=1500, help="rollouts per mode and round")
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=3, help="interleaved rounds of each mode")
    parser.add_argument("--separate", action="store_true", help="one process per server, not co-hosted")
    parser.add_argument("--profile", action="store_true", help="also tracing's share of py-spy's samples")
    args = parser.parse_args()
    rounds: dict[str, list[dict]] = {name: [] for name in MODES}
    profile: dict[str, float] | None = None
    with (
        tempfile.TemporaryDirectory(prefix="gym-bench-observability-") as folder,
        fake_upstream() as upstream,
        span_sink() as sink,
    ):
        workdir = Path(folder)
        rows, warm_up = rows_file(workdir, args.rollouts), rows_file(workdir, WARM_UP_ROLLOUTS)
        placement = "" if args.separate else COHOSTED
        configs = {name: placement + extra.replace(SINK_ADDRESS, sink) for name, extra in MODES.items()}
        order = list(enumerate(configs.items()))
        for number in range(args.repeats):
            for index, (name, config) in order if number % 2 == 0 else reversed(order):
                run_dir = workdir / f"{number}-{index}"
                with fresh_deployment(run_dir, upstream, config, warm_up) as deployment:
                    measured = measured_collection(deployment, rows, args.rollouts, run_dir, args.concurrency)
                rounds[name].append(measured)
                print(f"round {number + 1}: {name}: {measured['serving_ms']:.3f} ms/rollout", flush=True)
        if args.profile:
            with fresh_deployment(workdir / "profile", upstream, configs[TRACED], warm_up) as deployment:
                profile = profiled_collection(deployment, rows, workdir / "profile", args)
    write_report(rounds, args, profile)


@contextlib.contextmanager
def fresh_deployment(run_dir: Path, upstream: str, config: str, warm_up: Path) -> Iterator[Deployment]:
    """A deployment started for one round and warmed up (connections opened, lazy set-up done), stopped
    after it: a deployment's own luck (which cores its processes share, its memory layout) then varies
    from round to round instead of weighing on every round of its mode, and the median sees it as noise."""
    run_dir.mkdir(parents=True)
    deployment = Deployment(run_dir, upstream, config)
    try:
        measured_collection(deployment, warm_up, WARM_UP_ROLLOUTS, run_dir, WARM_UP_ROLLOUTS)
        yield deployment
    finally:
        deployment.stop()


def profiled_collection(deployment: Deployment, rows: Path, run_dir: Path, args: argparse.Namespace) -> dict:
    """Tracing's share of the traced deployment's samples over one more collection."""
    recorders = tracing_share.record(with_descendants(deployment.server_pids()), run_dir)
    try:
        measured_collection(deployment, rows, args.rollouts, run_dir, args.concurrency)
    finally:
        profiles = tracing_share.stop(recorders)
    return tracing_share.shares(profiles)


def paired_overhead(mode: list[dict], baseline: list[dict]) -> float:
    """The median over rounds of a mode's CPU per rollout against the baseline's in the same round: on a
    machine whose load drifts during the run, rounds run side by side compare better than the medians."""
    ratios = sorted(
        ours["serving_ms"] / theirs["serving_ms"] for ours, theirs in zip(mode, baseline, strict=True)
    )
    return 100 * (statistics.median(ratios) - 1)


def write_report(rounds: dict[str, list[dict]], args: argparse.Namespace, profile: dict | None) -> None:
    figures = {name: median_figures(measured) for name, measured in rounds.items()}
    lines = [
        f"# Observability overhead ({time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())})",
        "",
        f"{args.rollouts} rollouts per round at {args.concurrency} in flight, fake upstream, "
        f"{'one process per server' if args.separate else 'co-hosted in 2 workers'}; medians of "
        f"{args.repeats} interleaved rounds.",
        "",
        "| mode | server CPU ms/rollout | overhead (goal) | paired overhead | rollouts/s | failures | rounds (ms/rollout) |",
        "|---|---|---|---|---|---|---|",
    ]
    for name, f in figures.items():
        per_round = ", ".join(f"{measured['serving_ms']:.3f}" for measured in rounds[name])
        overhead = paired = "-"
        if name in CONTROLS:
            baseline = CONTROLS[name]
            percent = 100 * (f["serving_ms"] / figures[baseline]["serving_ms"] - 1)
            overhead = f"{percent:+.1f} % over {baseline} (the same config: noise)"
            paired = f"{paired_overhead(rounds[name], rounds[baseline]):+.1f} %"
        if name in GOALS:
            baseline, goal = GOALS[name]
            percent = 100 * (f["serving_ms"] / figures[baseline]["serving_ms"] - 1)
            verdict = "met" if percent <= goal else "MISSED"
            overhead = f"{percent:+.1f} % over {baseline} (<= {goal:g} %: {verdict})"
            paired = f"{paired_overhead(rounds[name], rounds[baseline]):+.1f} %"
        lines.append(
            f"| {name} | {f['serving_ms']:.3f} | {overhead} | {paired} | {f['rate']:.0f} | "
            f"{sum(measured['failures'] for measured in rounds[name])} | {per_round} |"
        )
    if profile is not None:
        lines += [
            "",
            f"Profile of `{TRACED}` ({profile['samples']:.0f} py-spy samples of its serving processes): spans "
            f"{profile['spans']:.1f} %, span export thread {profile['export']:.1f} %, the rest "
            f"{profile['other']:.1f} %; tracing's cost in serving CPU is at least "
            f"{100 * (profile['spans'] + profile['export']) / max(profile['other'], 1e-9):.1f} % of the rest.",
        ]
    report = "\n".join(lines) + "\n"
    print(report)
    out = HERE / "results" / time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    out.mkdir(parents=True, exist_ok=True)
    (out / "observability_overhead.md").write_text(report)
    print(f"written to {out / 'observability_overhead.md'}")


if __name__ == "__main__":
    main()
