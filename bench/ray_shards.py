"""The weather deployment on Ray shards: throughput and CPU against plain `gym run`, placement, node loss.

    .venv/bin/python bench/ray_shards.py [--rollouts 4000] [--concurrency 128] [--big 100000] [--quick]

On this machine, with a local two-node Ray cluster (ray.cluster_utils, every address on 127.0.0.1), the
weather deployment of `make bench` (example_single_tool_call + simple_agent + openai_model, two upstream
calls per rollout, the harness's fake upstream) runs `gym collect` over the same rows in three
placements, measured in the same run so the ratios hold on a noisy machine:

- plain: `gym run` with `colocate: true` (one co-hosting process, what one shard replica is),
- 1 shard: the three servers as one shard replica on the Ray cluster,
- 2 shards: two replicas, STRICT_SPREAD over the two nodes.

For each: rollouts/s, and CPU seconds per rollout of the serving processes (the co-hosting process; for
shards also the replica actors) and of Ray's own processes (raylets, GCS, workers) during the collection.
Then the time to place a shard (as the launcher prints it), the recovery from a node loss (node b killed
while rollouts are in flight: time until the collection has re-dispatched them, and until the launcher
marks the replica lost), and `--big` rollouts through two shards with the peak memory of each node's
processes. A report is printed and written to bench/results/<UTC time>/ray_shards.md.
"""

from __future__ import annotations

import argparse
import os
import re
import secrets
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections import Counter
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import orjson

REPO_ROOT = Path(__file__).resolve().parents[1]
GYM = str(Path(sys.executable).parent / "gym")
ROWS = REPO_ROOT / "bench/harness/data/example_single_tool_call.jsonl"
AGENT = "example_single_tool_call_simple_agent"
SERVERS = ["example_single_tool_call", AGENT, "policy_model"]
DEADLINE_S = 600.0
RAY_ENV = {
    "RAY_USAGE_STATS_ENABLED": "0",
    "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0",  # single-machine mode: every address on 127.0.0.1
    "RAY_AUTH_MODE": "token",
    "RAY_AUTH_TOKEN": secrets.token_hex(16),
}
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS


def peak_rss_mib(pid: int) -> float:
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return 0.0
    match = re.search(r"VmHWM:\s+(\d+) kB", status)
    return int(match[1]) / 1024 if match else 0.0


def with_descendants(pids: list[int]) -> list[int]:
    """`pids` and every process below them (a co-hosting process's forked workers)."""
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                parents[int(entry.name)] = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except OSError:
                continue
    found = set(pids)
    grew = True
    while grew:
        below = {pid for pid, parent in parents.items() if parent in found} - found
        found |= below
        grew = bool(below)
    return sorted(found)


def ray_pids() -> list[int]:
    """Every process of this machine's Ray nodes started by this benchmark (they carry its token)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            environ = (entry / "environ").read_bytes()
        except OSError:
            continue
        if f"RAY_AUTH_TOKEN={RAY_ENV['RAY_AUTH_TOKEN']}".encode() in environ:
            found.append(int(entry.name))
    return found


def free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextmanager
def fake_upstream(latency_ms: float = 0.0) -> Any:
    port = free_port()
    process = subprocess.Popen(
        [
            sys.executable, str(REPO_ROOT / "bench/harness/fake_upstream.py"), "--port", str(port),
            "--latency-ms", str(latency_ms),
        ],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=2).close()
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)
        yield f"http://127.0.0.1:{port}/v1"
    finally:
        process.terminate()
        process.wait(timeout=10)


class Deployment:
    """A `gym run` of the weather deployment, its output followed line by line."""

    def __init__(self, workdir: Path, upstream: str, extra: str) -> None:
        config = workdir / "deployment.yaml"
        config.write_text(
            "config_paths:\n"
            f"  - {REPO_ROOT}/resources_servers/example_single_tool_call/configs/example_single_tool_call.yaml\n"
            f"  - {REPO_ROOT}/configs/policy_model.yaml\n"
            f"policy_base_url: {upstream}\npolicy_api_key: sk-bench\npolicy_model_name: bench\n"
            f"{AGENT}:\n  responses_api_agents:\n    simple_agent:\n      max_concurrent_rollouts: 4096\n"
            + extra
        )
        self.head_port = free_port()
        self.started = time.monotonic()
        self.process = subprocess.Popen(
            [GYM, "run", f"+config_paths=[{config}]", f"++head_server.port={self.head_port}"],
            cwd=REPO_ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
            env={**os.environ, **RAY_ENV}, start_new_session=True,
        )  # fmt: skip
        self.lines: list[str] = []
        self.up = threading.Event()
        threading.Thread(target=self._follow, daemon=True).start()
        if not self.up.wait(DEADLINE_S) or self.process.poll() is not None:
            self.stop()
            raise RuntimeError("the deployment did not come up:\n" + "\n".join(self.lines[-30:]))
        self.startup_s = time.monotonic() - self.started

    def _follow(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.append(line.rstrip())
            if "server(s) are up" in line:
                self.up.set()

    def instances(self) -> list[dict[str, Any]]:
        with urllib.request.urlopen(
            f"http://127.0.0.1:{self.head_port}/server_instances", timeout=10
        ) as answer:
            return orjson.loads(answer.read())

    def server_pids(self) -> list[int]:
        return sorted({entry["pid"] for entry in self.instances() if entry.get("pid")})

    def placement_s(self) -> float | None:
        for line in self.lines:
            match = re.search(r"Placed \d+ shard replica\(s\) on \d+ Ray node\(s\) in ([\d.]+)s", line)
            if match:
                return float(match[1])
        return None

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)
            try:
                self.process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait()


def rows_file(workdir: Path, count: int) -> Path:
    template = ROWS.read_text().splitlines()[0]
    path = workdir / f"rows_{count}.jsonl"
    with path.open("w") as out:
        for number in range(count):
            out.write(template.replace("what's it like in sf?", f"what's it like in city {number}?") + "\n")
    return path


def collect(
    deployment: Deployment, rows: Path, output: Path, concurrency: int, *extra: str
) -> subprocess.Popen:
    return subprocess.Popen(
        [
            GYM, "collect", f"++head_server.port={deployment.head_port}", "-a", AGENT, "-i", str(rows),
            "-o", str(output), "--concurrency", str(concurrency), "+overwrite=true", *extra,
        ],
        cwd=REPO_ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip


def line_count(path: Path) -> int:
    try:
        with path.open("rb") as lines:
            return sum(1 for _ in lines)
    except FileNotFoundError:
        return 0


def measured_collection(
    deployment: Deployment, rows: Path, count: int, workdir: Path, concurrency: int, *extra: str
) -> dict:
    servers = with_descendants(deployment.server_pids())
    ray = [pid for pid in ray_pids() if pid not in servers]
    before = {pid: cpu_seconds(pid) for pid in servers + ray}
    started = time.monotonic()
    run = collect(deployment, rows, workdir / "results.jsonl", concurrency, *extra)
    report, _ = run.communicate(timeout=DEADLINE_S)
    elapsed = time.monotonic() - started
    if run.returncode != 0:
        raise RuntimeError(f"gym collect failed:\n{report}")
    results = line_count(workdir / "results.jsonl")
    failures = line_count(workdir / "results_failures.jsonl")
    serving = sum(cpu_seconds(pid) - before[pid] for pid in servers)
    ray_cpu = sum(cpu_seconds(pid) - before.get(pid, 0.0) for pid in ray_pids() if pid not in servers)
    return {
        "rollouts": results,
        "failures": failures,
        "rate": results / elapsed,
        "serving_ms": 1000 * serving / max(results, 1),
        "ray_ms": 1000 * ray_cpu / max(results, 1),
        "startup_s": deployment.startup_s,
        "placement_s": deployment.placement_s(),
    }


def median_figures(measured: list[dict]) -> dict:
    """Each numeric figure's median over the rounds; the others as in the first round."""
    return {
        key: statistics.median(round_[key] for round_ in measured)
        if isinstance(value, int | float)
        else value
        for key, value in measured[0].items()
    }


def shard_block(replicas: int, strategy: str) -> str:
    return (
        f"shards:\n  weather:\n    servers: [{', '.join(SERVERS)}]\n    replicas: {replicas}\n"
        f"    num_cpus: 1\n    placement_strategy: {strategy}\n"
    )


def node_loss(cluster: Any, node_b: Any, upstream: str, workdir: Path, concurrency: int) -> dict:
    """Kill node b while rollouts are in flight on both replicas; how long until they run elsewhere."""
    deployment = Deployment(
        workdir, upstream, f"ray_head_node_address: {cluster.address}\n" + shard_block(2, "STRICT_SPREAD")
    )
    try:
        rows = rows_file(workdir, 20 * concurrency)
        output = workdir / "loss.jsonl"
        run = collect(deployment, rows, output, concurrency)
        while line_count(output) < 2 * concurrency:
            time.sleep(0.05)
        killed = time.monotonic()
        cluster.remove_node(node_b, allow_graceful=False)
        failures = workdir / "loss_failures.jsonl"
        while line_count(failures) == 0 and run.poll() is None:
            time.sleep(0.01)
        redispatched_s = time.monotonic() - killed
        marked_s = None
        while marked_s is None and time.monotonic() - killed < 120:
            if any(entry.get("status") == "lost" for entry in deployment.instances()):
                marked_s = time.monotonic() - killed
            time.sleep(0.1)
        report, _ = run.communicate(timeout=DEADLINE_S)
        keys = [line for line in output.read_text().splitlines()]
        return {
            "redispatched_s": redispatched_s,
            "marked_s": marked_s,
            "lost_attempts": line_count(failures),
            "results": len(keys),
            "expected": 20 * concurrency,
            "exit": run.returncode,
        }
    finally:
        deployment.stop()


def big_run(cluster: Any, upstream: str, workdir: Path, count: int, concurrency: int) -> dict:
    deployment = Deployment(
        workdir, upstream, f"ray_head_node_address: {cluster.address}\n" + shard_block(2, "STRICT_SPREAD")
    )
    try:
        # Without `/aggregate_metrics`, which takes every result in one request: the serving memory alone.
        measured = measured_collection(
            deployment, rows_file(workdir, count), count, workdir, concurrency, "+disable_aggregation=true"
        )
        measured["split"] = dict(
            Counter(
                orjson.loads(line).get("_ng_shard_replica") for line in (workdir / "results.jsonl").open("rb")
            )
        )
        by_node: dict[str, float] = {}
        for entry in deployment.instances():
            if "node_id" in entry:
                by_node.setdefault(entry["node_id"][:8], peak_rss_mib(entry["pid"]))
        measured["replica_peak_mib"] = by_node
        measured["ray_processes_peak_mib"] = sum(peak_rss_mib(pid) for pid in ray_pids())
        return measured
    finally:
        deployment.stop()


def upstream_arrivals(upstream: str) -> int:
    with urllib.request.urlopen(upstream.removesuffix("/v1") + "/stats", timeout=10) as answer:
        return orjson.loads(answer.read())["responses"]


def inflight_run(cluster: Any, workdir: Path, count: int, latency_s: float) -> dict:
    """`count` rollouts started at once (two collectors, each all its rows in flight) through four shard
    replicas, the model answering each call after `latency_s`: how many were in flight together (model
    calls that arrived before any could have been answered), failures, and peak memory per node."""
    pool = "++global_aiohttp_connector_limit_per_host=20000"
    with fake_upstream(latency_s * 1000) as upstream:
        extra = f"ray_head_node_address: {cluster.address}\n{pool[2:].replace('=', ': ')}\n" + shard_block(
            4, "SPREAD"
        )
        deployment = Deployment(workdir, upstream, extra.replace("num_cpus: 1", "num_cpus: 0.5"))
        try:
            halves = [
                rows_file(workdir / name, count // 2)
                for name in ("a", "b")
                if (workdir / name).mkdir() is None
            ]
            runs = [
                collect(
                    deployment,
                    rows,
                    rows.parent / "results.jsonl",
                    count // 2,
                    pool,
                    "+disable_aggregation=true",
                )
                for rows in halves
            ]
            first_seen = None
            together = 0
            while any(run.poll() is None for run in runs):
                arrivals = upstream_arrivals(upstream)
                now = time.monotonic()
                if arrivals and first_seen is None:
                    first_seen = now
                if first_seen is not None and now - first_seen < latency_s - 1:
                    together = arrivals  # nothing can have been answered yet: all of these are in flight
                time.sleep(0.5)
            failures = sum(line_count(rows.parent / "results_failures.jsonl") for rows in halves)
            results = sum(line_count(rows.parent / "results.jsonl") for rows in halves)
            per_node: dict[str, float] = {}
            for entry in deployment.instances():
                if "node_id" in entry and entry["process_name"] == AGENT:
                    node = entry["node_id"][:8]
                    per_node[node] = per_node.get(node, 0.0) + peak_rss_mib(entry["pid"])
            return {
                "together": together,
                "results": results,
                "failures": failures,
                "replicas_peak_mib": per_node,
            }
        finally:
            deployment.stop()


def start_cluster() -> tuple[Any, Any]:
    """A two-node local cluster and its second node (the one the node-loss run kills)."""
    os.environ.update(RAY_ENV)
    from ray.cluster_utils import Cluster

    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 2, "include_dashboard": False})
    node_b = cluster.add_node(num_cpus=2)
    cluster.wait_for_nodes()
    return cluster, node_b


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rollouts", type=int, default=4000)
    parser.add_argument("--concurrency", type=int, default=128)
    parser.add_argument("--big", type=int, default=100_000, help="rollouts of the large run (0 skips it)")
    parser.add_argument("--inflight", type=int, default=16_000, help="rollouts started at once (0 skips it)")
    parser.add_argument("--repeats", type=int, default=3, help="interleaved rounds of each placement")
    parser.add_argument("--quick", action="store_true", help="1,000 rollouts, one round, no large run")
    args = parser.parse_args()
    if args.quick:
        args.rollouts, args.big, args.repeats, args.inflight = 1000, 0, 1, 0
    report: list[str] = [f"# Ray shards ({time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())})", ""]
    with tempfile.TemporaryDirectory(prefix="gym-bench-ray-") as folder, fake_upstream() as upstream:
        workdir = Path(folder)
        rows = rows_file(workdir, args.rollouts)
        cluster, node_b = start_cluster()
        try:
            placements = {
                "plain (colocate, 1 process)": "colocate: true\n",
                "plain (colocate, 2 workers)": "colocate: true\ncolocate_num_workers: 2\n",
                "1 shard": f"ray_head_node_address: {cluster.address}\n" + shard_block(1, "PACK"),
                "2 shards (STRICT_SPREAD)": f"ray_head_node_address: {cluster.address}\n"
                + shard_block(2, "STRICT_SPREAD"),
            }
            # All four run side by side and take turns, round after round, so that a slower stretch of this
            # shared machine hits each of them alike; each figure is the median of its rounds.
            deployments: dict[str, Deployment] = {}
            rounds: dict[str, list[dict]] = {name: [] for name in placements}
            try:
                for index, (name, extra) in enumerate(placements.items()):
                    (workdir / str(index)).mkdir()
                    deployments[name] = Deployment(workdir / str(index), upstream, extra)
                for _ in range(args.repeats):
                    for index, (name, deployment) in enumerate(deployments.items()):
                        rounds[name].append(
                            measured_collection(
                                deployment, rows, args.rollouts, workdir / str(index), args.concurrency
                            )
                        )
                        print(name, rounds[name][-1], flush=True)
            finally:
                for deployment in deployments.values():
                    deployment.stop()
            figures = {name: median_figures(measured) for name, measured in rounds.items()}
            base = figures["plain (colocate, 1 process)"]
            report += [
                f"{args.rollouts} rollouts at {args.concurrency} in flight, fake upstream, 2 local Ray nodes of 2 CPUs; "
                f"medians of {args.repeats} interleaved rounds.",
                "",
                "| placement | rollouts/s | ratio | serving CPU ms/rollout | ratio | Ray processes CPU ms/rollout | start s | placement s | failures |",
                "|---|---|---|---|---|---|---|---|---|",
            ]
            for name, f in figures.items():
                report.append(
                    f"| {name} | {f['rate']:.0f} | {f['rate'] / base['rate']:.2f} | {f['serving_ms']:.2f} | "
                    f"{f['serving_ms'] / base['serving_ms']:.2f} | {f['ray_ms']:.2f} | {f['startup_s']:.1f} | "
                    f"{f['placement_s'] if f['placement_s'] is not None else '-'} | {f['failures']} |"
                )
            if args.big:
                big = big_run(cluster, upstream, workdir, args.big, 1024)
                print("big", big, flush=True)
                report += [
                    "",
                    f"Large run: {big['rollouts']} rollouts through 2 shards at 1,024 in flight: {big['rate']:.0f}/s, "
                    f"{big['failures']} failure records, split {big['split']}; peak RSS of each replica's servers (MiB): "
                    f"{ {node: round(mib) for node, mib in big['replica_peak_mib'].items()} }; "
                    f"all Ray processes together: {big['ray_processes_peak_mib']:.0f} MiB.",
                ]
            if args.inflight:
                (workdir / "inflight").mkdir()
                held = inflight_run(cluster, workdir / "inflight", args.inflight, latency_s=60.0)
                print("in flight", held, flush=True)
                report += [
                    "",
                    f"In flight: {args.inflight} rollouts started at once over 4 replicas (model latency 60 s): "
                    f"{held['together']} model calls were waiting together; {held['results']} results, "
                    f"{held['failures']} failure records; peak RSS of the replicas' servers per node (MiB): "
                    f"{ {node: round(mib) for node, mib in held['replicas_peak_mib'].items()} }.",
                ]
            loss = node_loss(cluster, node_b, upstream, workdir, args.concurrency)
            print("node loss", loss, flush=True)
            report += [
                "",
                f"Node loss (node b killed with {args.concurrency} rollouts in flight): the first lost rollout ran "
                f"again after {loss['redispatched_s']:.2f}s; the launcher marked the replica lost after "
                f"{loss['marked_s']:.1f}s (Ray's node health check); {loss['lost_attempts']} attempts re-dispatched; "
                f"{loss['results']}/{loss['expected']} results, exit {loss['exit']}.",
            ]
        finally:
            cluster.shutdown()
    text = "\n".join(report) + "\n"
    print(text)
    out = REPO_ROOT / "bench/results" / time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    out.mkdir(parents=True, exist_ok=True)
    (out / "ray_shards.md").write_text(text)


if __name__ == "__main__":
    main()
