"""`make bench`: our stack under the reference harness, and a table of our figures beside the reference's.

    python bench/run_bench.py --harness-python PY [--repeats 3] [--with-peer] [--with-separate]
                              [--also NAME=LAUNCHER] [--out DIR]

1. `harness/matrix.py` runs the harness's four scenarios (c1, c32, c256, c512_lat200; fresh stack per run,
   quiet check before each run, contaminated runs redone) against `run_gym.sh`. `--with-peer` interleaves
   the reference peer (`../shared/bench/run_peer.sh`, needs its venv: see the harness README) and
   `--with-separate` our stack with one process per server (`--also` any other launcher, such as an older
   checkout's), run by run, so host drift hits all alike.
2. The in-flight scenario: N rollouts (default 20,000) sent at once against a 1 s upstream. One load
   generator cannot hold 20,000 connections under this machine's open-file cap, so several run side by
   side, each with an equal share; their results are merged.
3. `summary.md` in the output folder: per scenario our medians, the reference's (`reference.json`, copied
   from results-peer.md), the ratio, and each target of issue 8 with its verdict.

The harness (load generator, fake upstream, matrix) stays in `harness/`, copied unchanged from
../shared/bench, and runs in its own venv, apart from the implementation it measures.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

HERE = Path(__file__).resolve().parent
HARNESS = HERE / "harness"
PEER_LAUNCHER = HERE.parent.parent / "shared" / "bench" / "run_peer.sh"
DATA = HARNESS / "data" / "example_single_tool_call.jsonl"
AGENT_PORT = 21100
INFLIGHT_UPSTREAM_PORT = 21201
INFLIGHT_LOAD_PROCESSES = 2
SCRATCH = Path(os.environ.get("GYM_BENCH_SCRATCH", Path.home() / ".cache" / "gym-bench"))

# Issue 8's targets, against the reference figures.
CPU_SHARE_AT_C32 = 1 / 6
THROUGHPUT_FACTOR_AT_C256 = 5
LATENCY_SHARE_AT_C1 = 1 / 3
COLD_START_LIMIT_S = 3.0
INFLIGHT_PSS_LIMIT_MB = 3000


def log(message: str) -> None:
    print(time.strftime("[%H:%M:%S] ") + message, file=sys.stderr, flush=True)


def run_matrix(args: argparse.Namespace, out: Path) -> None:
    command = [args.harness_python, str(HARNESS / "matrix.py"), "--out", str(out / "matrix"),
               "--repeats", str(args.repeats), "--bench-py", args.harness_python]  # fmt: skip
    if args.with_peer:
        command += [
            "--impl",
            "peer",
            "--launcher",
            str(PEER_LAUNCHER),
            "--also",
            f"gym={HERE / 'run_gym.sh'}",
        ]
    else:
        command += ["--impl", "gym", "--launcher", str(HERE / "run_gym.sh")]
    if args.with_separate:
        command += ["--also", f"gym_separate={HERE / 'run_gym_separate.sh'}"]
    for extra in args.also or []:
        command += ["--also", extra]
    for scenario in args.scenario or []:
        command += ["--scenario", scenario]
    log("matrix: " + " ".join(command))
    subprocess.run(command, check=True)


def wait_for_http(url: str, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(url, timeout=1):
                return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError(f"{url} did not answer within {timeout_s:g}s")


def run_inflight(args: argparse.Namespace, out: Path) -> dict:
    """N rollouts at once through our stack, upstream latency 1 s; merged results of the load processes."""
    state = SCRATCH / "state" / "gym_inflight"
    state.mkdir(parents=True, exist_ok=True)
    upstream = subprocess.Popen(
        [args.harness_python, str(HARNESS / "fake_upstream.py"), "--port", str(INFLIGHT_UPSTREAM_PORT),
         "--latency-ms", "1000", "--max-seconds", "900"],
        stdout=open(out / "inflight_upstream.log", "w"), stderr=subprocess.STDOUT, start_new_session=True,
    )  # fmt: skip
    env = {**os.environ, "STATE_DIR": str(state), "BENCH_PY": args.harness_python,
           "UPSTREAM_URL": f"http://127.0.0.1:{INFLIGHT_UPSTREAM_PORT}/v1", "AGENT_PORT": str(AGENT_PORT)}  # fmt: skip
    try:
        wait_for_http(f"http://127.0.0.1:{INFLIGHT_UPSTREAM_PORT}/v1/models", 30)
        subprocess.run(["bash", str(HERE / "run_gym.sh"), "start", "--wait"], env=env, check=True)
        share = args.inflight // INFLIGHT_LOAD_PROCESSES
        for i in range(INFLIGHT_LOAD_PROCESSES):
            (out / f"inflight_load{i}.json").unlink(missing_ok=True)  # load.py appends to it
        loads = [
            subprocess.Popen(
                [
                    args.harness_python,
                    str(HARNESS / "load.py"),
                    "run",
                    "--agent-url",
                    f"http://127.0.0.1:{AGENT_PORT}",
                    "--data",
                    str(DATA),
                    "-n",
                    str(share),
                    "-c",
                    str(share),
                    "--max-seconds",
                    "600",
                    "--timeout",
                    "590",
                    "--pids-file",
                    str(state / "pids"),
                    "--out",
                    str(out / f"inflight_load{i}.json"),
                ],
                stdout=subprocess.DEVNULL,
                stderr=open(out / f"inflight_load{i}.log", "w"),
            )  # fmt: skip
            for i in range(INFLIGHT_LOAD_PROCESSES)
        ]
        for load in loads:
            load.wait(timeout=700)
    finally:
        subprocess.run(["bash", str(HERE / "run_gym.sh"), "stop"], env=env, check=False)
        upstream.terminate()
        upstream.wait(timeout=30)
    return merge_inflight(out)


def merge_inflight(out: Path) -> dict:
    """One result from the load processes' results (`inflight.json`)."""
    parts = [json.loads((out / f"inflight_load{i}.json").read_text()) for i in range(INFLIGHT_LOAD_PROCESSES)]
    merged = {
        "n": sum(part["n"] for part in parts),
        "ok": sum(part["ok"] for part in parts),
        "errors": sum(part["errors"] for part in parts),
        "wall_s": max(part["wall_s"] for part in parts),
        # Every load process samples the same implementation processes: take the highest peak they saw.
        "impl_peak_pss_mb": max(part["impl_peak_pss_mb"] for part in parts),
        "impl_peak_rss_mb": max(part["impl_peak_rss_mb"] for part in parts),
        "lat_ms_max": max(part["lat_ms_max"] or 0 for part in parts),
        "load_processes": INFLIGHT_LOAD_PROCESSES,
    }
    merged["rollouts_per_s"] = round(merged["ok"] / merged["wall_s"], 1) if merged["wall_s"] else None
    (out / "inflight.json").write_text(json.dumps(merged, indent=1))
    return merged


def ratio(ours: float | None, reference: float | None, higher_is_better: bool) -> str:
    if not ours or not reference:
        return "-"
    return f"{ours / reference:.1f}x" if higher_is_better else f"1/{reference / ours:.1f}"


def verdict(passed: bool) -> str:
    return "met" if passed else "**NOT met**"


def write_summary(out: Path, inflight: dict | None) -> str:
    reference = json.loads((HERE / "reference.json").read_text())
    matrix = json.loads((out / "matrix" / "summary.json").read_text())
    rows = {(row["impl"], row["scenario"]): row for row in matrix["scenarios"]}
    impls = sorted({impl for impl, _ in rows}, key=lambda impl: (impl != "gym", impl))
    lines = [
        "Ratios: `vs ref` against the reference figures of results-peer.md; `vs peer` against the peer measured",
        "in this run, interleaved (only with --with-peer).",
        "",
        "| impl | scenario | rollouts/s | vs ref | vs peer | p50 ms | vs ref | vs peer | CPU ms/rollout | vs ref | vs peer | peak PSS MB | errors | the runs (r/s) |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]  # fmt: skip
    for scenario, ref in reference["scenarios"].items():
        lines.append(
            f"| reference (results-peer.md) | {scenario} | {ref['rollouts_per_s']} | | | {ref['lat_ms_p50']} | | | "
            f"{ref['impl_cpu_ms_per_rollout']} | | | {ref['impl_peak_pss_mb']} | {ref['errors']} | |"
        )
        peer = rows.get(("peer", scenario)) or {}
        for impl in impls:
            row = rows.get((impl, scenario))
            if row is None:
                continue
            cells = [impl, scenario]
            for key, higher_is_better in (
                ("rollouts_per_s", True),
                ("lat_ms_p50", False),
                ("impl_cpu_ms_per_rollout", False),
            ):
                cells += [
                    str(row[key]),
                    ratio(row[key], ref[key], higher_is_better),
                    ratio(row[key], peer.get(key), higher_is_better) if impl != "peer" else "",
                ]
            cells += [str(row["impl_peak_pss_mb"]), str(row["errors"])]
            cells.append(" / ".join(str(value) for value in row["rollouts_per_s_all"]))
            lines.append("| " + " | ".join(cells) + " |")
    cold = matrix["cold_start"]
    lines.append("")
    for impl, figures in sorted(cold.items()):
        lines.append(f"Cold start of {impl} (launch -> first /run answered), median of {figures['samples']}: "
                     f"{figures['median_s']} s (reference {reference['cold_start_s']} s)")  # fmt: skip

    gym = {scenario: rows.get(("gym", scenario)) for scenario in reference["scenarios"]}
    refs = reference["scenarios"]

    def same_run(scenario: str, key: str, higher_is_better: bool) -> str:
        peer = rows.get(("peer", scenario))
        if not peer:
            return ""
        return f" (the peer in this run: {peer[key]}; ours {ratio(gym[scenario][key], peer[key], higher_is_better)})"

    targets = []
    if gym["c32"]:
        cpu = gym["c32"]["impl_cpu_ms_per_rollout"]
        limit = refs["c32"]["impl_cpu_ms_per_rollout"] * CPU_SHARE_AT_C32
        targets.append(f"CPU per rollout at c32: {cpu} ms <= {limit:.2f} ms (1/6 of the reference): "
                       f"{verdict(cpu <= limit)}; 1/{refs['c32']['impl_cpu_ms_per_rollout'] / cpu:.1f} of it"
                       + same_run("c32", "impl_cpu_ms_per_rollout", False))  # fmt: skip
    if gym["c256"]:
        rate, errors = gym["c256"]["rollouts_per_s"], gym["c256"]["errors"]
        floor = refs["c256"]["rollouts_per_s"] * THROUGHPUT_FACTOR_AT_C256
        targets.append(f"Throughput at c256: {rate} rollouts/s >= {floor:.1f} (5x the reference), {errors} errors: "
                       f"{verdict(rate >= floor and errors == 0)}" + same_run("c256", "rollouts_per_s", True))  # fmt: skip
    if gym["c1"]:
        p50 = gym["c1"]["lat_ms_p50"]
        limit = refs["c1"]["lat_ms_p50"] * LATENCY_SHARE_AT_C1
        targets.append(
            f"Latency p50 at c1: {p50} ms <= {limit:.2f} ms (1/3 of the reference): {verdict(p50 <= limit)}"
            + same_run("c1", "lat_ms_p50", False)
        )
    if "gym" in cold:
        start = cold["gym"]["median_s"]
        targets.append(
            f"Cold start: {start} s < {COLD_START_LIMIT_S:g} s: {verdict(start < COLD_START_LIMIT_S)}"
        )
    if inflight:
        passed = inflight["errors"] == 0 and inflight["ok"] == inflight["n"]
        passed = passed and inflight["impl_peak_pss_mb"] < INFLIGHT_PSS_LIMIT_MB
        targets.append(
            f"In flight: {inflight['n']} rollouts at once, 1 s upstream: {inflight['ok']} ok, "
            f"{inflight['errors']} errors, peak PSS {inflight['impl_peak_pss_mb']} MB < {INFLIGHT_PSS_LIMIT_MB} MB, "
            f"done in {inflight['wall_s']} s: {verdict(passed)}"
        )
    lines += ["", "Targets (issue 8):", *[f"- {target}" for target in targets]]
    quiet = [json.loads(line) for line in (out / "matrix" / "runs.jsonl").read_text().splitlines() if line]
    noisy = sum(1 for run in quiet if not run.get("quiet_before"))
    lines.append(f"- Machine noise: {len(quiet) - noisy} of {len(quiet)} kept runs had quiet_before true")
    text = "\n".join(lines) + "\n"
    (out / "summary.md").write_text(text)
    return text


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--harness-python", required=True, help="python of the harness venv")
    parser.add_argument("--out", default=str(HERE / "results" / time.strftime("%Y%m%d-%H%M%S")))
    parser.add_argument("--repeats", type=int, default=3, help="0 keeps the matrix already in --out")
    parser.add_argument(
        "--scenario", action="append", help="instead of the harness's four (matrix.py syntax)"
    )
    parser.add_argument("--with-peer", action="store_true", help="interleave the reference peer")
    parser.add_argument("--with-separate", action="store_true", help="interleave gym, one process per server")
    parser.add_argument(
        "--also",
        action="append",
        metavar="NAME=LAUNCHER",
        help="interleave another launcher (e.g. an older checkout)",
    )
    parser.add_argument("--inflight", type=int, default=20000, help="rollouts at once; 0 skips the scenario")
    parser.add_argument("--summarize-only", action="store_true")
    args = parser.parse_args()
    args.harness_python = os.path.abspath(args.harness_python)
    out = Path(args.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    if args.with_peer and not PEER_LAUNCHER.exists():
        sys.exit(f"Error: --with-peer needs the reference harness at {PEER_LAUNCHER.parent}")
    inflight = None
    if args.summarize_only:
        if (out / "inflight_load0.json").exists():
            inflight = merge_inflight(out)
        subprocess.run([args.harness_python, str(HARNESS / "matrix.py"), "--out", str(out / "matrix"),
                        "--summarize-only"], check=True, stdout=subprocess.DEVNULL)  # fmt: skip
    else:
        if args.repeats:
            run_matrix(args, out)
        if args.inflight:
            inflight = run_inflight(args, out)
    print(write_summary(out, inflight))
    print(f"(raw results in {out})")


if __name__ == "__main__":
    main()
