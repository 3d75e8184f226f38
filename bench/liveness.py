"""Does `GET /` stay fast while a server is flooded with rollouts?

Starts the benchmark deployment (bench/run_gym.sh: example_single_tool_call + simple_agent + openai_model
in front of the harness's fake upstream), probes `GET /` of the agent and of the resources server on a new
connection every PROBE_INTERVAL_S from a thread of this process, first while the stack is idle (the
baseline), then during BURSTS bursts of N concurrent `/run` sent by the harness's load generator in a
process of its own. Prints and writes `bench/results/<time>/liveness.json`: p50/p99/max per phase.

    .venv/bin/python bench/liveness.py --harness-python .venv-bench/bin/python [--baseline <other checkout>]
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import statistics
import subprocess
import threading
import time
from pathlib import Path

from run_bench import AGENT_PORT, DATA, HARNESS, HERE, SCRATCH, log, wait_for_http

UPSTREAM_PORT = 21202
RESOURCES_PORT = 21101
PROBE_INTERVAL_S = 0.02
PROBE_TIMEOUT_S = 10.0
BASELINE_S = 5.0


class Prober(threading.Thread):
    """Times `GET /` on a fresh connection to each port, until stopped; a failed probe counts as its timeout."""

    def __init__(self, ports: list[int]) -> None:
        super().__init__(daemon=True)
        self.ports = ports
        self.samples: dict[int, list[float]] = {port: [] for port in ports}
        self.failures = 0
        self.stopping = threading.Event()

    def run(self) -> None:
        while not self.stopping.wait(PROBE_INTERVAL_S):
            for port in self.ports:
                self.samples[port].append(self.probe(port))

    def probe(self, port: int) -> float:
        started = time.perf_counter()
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=PROBE_TIMEOUT_S)
        try:
            connection.request("GET", "/")
            if connection.getresponse().status != 200:
                self.failures += 1
        except OSError:
            self.failures += 1
            return PROBE_TIMEOUT_S
        finally:
            connection.close()
        return time.perf_counter() - started

    def take(self) -> dict[int, list[float]]:
        taken, self.samples = self.samples, {port: [] for port in self.ports}
        return taken


def percentiles(samples: list[float]) -> dict[str, float]:
    ordered = sorted(samples)
    return {
        "probes": len(ordered),
        "p50_ms": round(statistics.median(ordered) * 1000, 2),
        "p99_ms": round(ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))] * 1000, 2),
        "max_ms": round(ordered[-1] * 1000, 2),
    }


def run_burst(harness_python: str, size: int, out: Path) -> dict:
    result_file = out / "burst.json"
    result_file.unlink(missing_ok=True)
    subprocess.run(
        [harness_python, str(HARNESS / "load.py"), "run", "--agent-url", f"http://127.0.0.1:{AGENT_PORT}",
         "--data", str(DATA), "-n", str(size), "-c", str(size), "--max-seconds", "120", "--timeout", "110",
         "--out", str(result_file)],
        stdout=subprocess.DEVNULL, check=True, timeout=180,
    )  # fmt: skip
    result = json.loads(result_file.read_text().splitlines()[-1])
    return {key: result.get(key) for key in ("ok", "errors", "rollouts_per_s", "wall_s")}


def measure(args: argparse.Namespace, root: Path, out: Path) -> dict:
    """One fresh stack from the checkout at `root` (its bench/run_gym.sh and its nemo_gym): idle, then bursts."""
    state = SCRATCH / "state" / "gym_liveness"
    state.mkdir(parents=True, exist_ok=True)
    upstream = subprocess.Popen(
        [args.harness_python, str(HARNESS / "fake_upstream.py"), "--port", str(UPSTREAM_PORT),
         "--latency-ms", str(args.latency_ms), "--max-seconds", "900"],
        stdout=open(out / "liveness_upstream.log", "a"), stderr=subprocess.STDOUT, start_new_session=True,
    )  # fmt: skip
    env = {**os.environ, "STATE_DIR": str(state), "BENCH_PY": args.harness_python, "GYM_VENV": str(HERE.parent / ".venv"),
           "PYTHONPATH": str(root), "UPSTREAM_URL": f"http://127.0.0.1:{UPSTREAM_PORT}/v1",
           "AGENT_PORT": str(AGENT_PORT), "RESOURCES_PORT": str(RESOURCES_PORT)}  # fmt: skip
    launcher = root / "bench" / ("run_gym_separate.sh" if args.separate else "run_gym.sh")
    report: dict = {"checkout": str(root)}
    try:
        wait_for_http(f"http://127.0.0.1:{UPSTREAM_PORT}/v1/models", 30)
        subprocess.run(["bash", str(launcher), "start", "--wait"], env=env, check=True)
        prober = Prober([AGENT_PORT, RESOURCES_PORT])
        prober.start()
        time.sleep(BASELINE_S)  # the idle baseline is a span of time, not a synchronisation
        idle = prober.take()
        report["loads"] = [run_burst(args.harness_python, args.n, out) for _ in range(args.bursts)]
        loaded = prober.take()
        prober.stopping.set()
        prober.join(PROBE_TIMEOUT_S * 2)
        report["failed_probes"] = prober.failures
        report["ports"] = {
            name: {"idle": percentiles(idle[port]), "under_load": percentiles(loaded[port])}
            for name, port in (("agent", AGENT_PORT), ("resources_server", RESOURCES_PORT))
        }
    finally:
        subprocess.run(["bash", str(launcher), "stop"], env=env, check=False)
        upstream.terminate()
        upstream.wait(timeout=30)
    return report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--harness-python", required=True)
    parser.add_argument("-n", type=int, default=2000, help="concurrent /run per burst (default 2000)")
    parser.add_argument("--bursts", type=int, default=3)
    parser.add_argument("--latency-ms", type=float, default=200.0, help="fake upstream latency (default 200)")
    parser.add_argument("--baseline", type=Path, help="another checkout (e.g. a git worktree) measured alike")
    parser.add_argument("--separate", action="store_true", help="one process per server (gym run's default)")
    args = parser.parse_args()
    out = HERE / "results" / time.strftime("%Y%m%d-%H%M%S")
    out.mkdir(parents=True)
    report = {
        "n": args.n,
        "bursts": args.bursts,
        "upstream_latency_ms": args.latency_ms,
        "separate": args.separate,
    }
    report["gym"] = measure(args, HERE.parent, out)
    if args.baseline:
        report["baseline"] = measure(args, args.baseline.resolve(), out)
    (out / "liveness.json").write_text(json.dumps(report, indent=2))
    log(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
