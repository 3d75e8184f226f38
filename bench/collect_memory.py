"""Does `gym collect` stream? Peak memory of materialisation and of whole collections at growing sizes.

    .venv/bin/python bench/collect_memory.py [--materialize 100000,1000000] [--collect 2000,20000]

Part 1 materializes N distinct rows in a fresh process and reports its peak RSS and time. Part 2 starts
the offline quickstart deployment (replay_model plays the recorded turns, so no model is needed) and runs
`gym collect` over N rows (the 5 example tasks repeated), reporting the collector's peak RSS and
rollouts/s. Streaming holds when peak RSS stays flat as N grows tenfold.
"""

from __future__ import annotations

import argparse
import os
import resource
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
GYM = str(Path(sys.executable).parent / "gym")
EXAMPLES = REPO_ROOT / "resources_servers/example_single_tool_call/data/example.jsonl"
AGENT = "example_single_tool_call_simple_agent"
STARTUP_DEADLINE_S = 60.0

MATERIALIZE_PROBE = """
import resource, sys, time
from pathlib import Path
from nemo_gym.rollout_collection import CollectionLedger, CollectionPaths, RolloutCollectionConfig, materialize
source, output = Path(sys.argv[1]), Path(sys.argv[2])
config = RolloutCollectionConfig(input_jsonl_fpath=str(source), output_jsonl_fpath=str(output), agent_name="a")
ledger = CollectionLedger()
started = time.perf_counter()
count, _ = materialize(config, source, CollectionPaths.for_output(output), ledger)
ledger.close()
print(count, time.perf_counter() - started, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
"""


def write_distinct_rows(path: Path, count: int) -> None:
    template = EXAMPLES.read_text().splitlines()[0]
    with path.open("w") as out:
        for number in range(count):
            out.write(template.replace("what's it like in sf?", f"what's it like in city {number}?") + "\n")


def materialize_peak(workdir: Path, count: int) -> tuple[int, float, int]:
    source = workdir / f"distinct_{count}.jsonl"
    write_distinct_rows(source, count)
    result = subprocess.run(
        [sys.executable, "-c", MATERIALIZE_PROBE, str(source), str(workdir / f"m_{count}.jsonl")],
        capture_output=True, text=True, check=True, cwd=REPO_ROOT, timeout=1800,
    )  # fmt: skip
    written, seconds, peak_kib = result.stdout.split()
    return int(written), float(seconds), int(peak_kib)


def start_quickstart() -> tuple[subprocess.Popen, str]:
    process = subprocess.Popen(
        [GYM, "run", "+config_paths=[configs/quickstart.yaml]", "++head_server.port=0"],
        cwd=REPO_ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True,
    )  # fmt: skip
    deadline, head_port = time.monotonic() + STARTUP_DEADLINE_S, None
    for line in process.stdout:
        if line.startswith("head_server "):
            head_port = line.split()[3].rsplit(":", 1)[1]
        if "server(s) are up" in line and head_port:
            return process, head_port
        if time.monotonic() > deadline:
            break
    os.killpg(process.pid, signal.SIGTERM)
    raise SystemExit("the quickstart deployment did not come up")


def collect_peak(workdir: Path, head_port: str, count: int, extra: list[str]) -> tuple[float, int, int]:
    rows = EXAMPLES.read_text().splitlines()
    source = workdir / f"repeated_{count}.jsonl"
    source.write_text("\n".join(rows[number % len(rows)] for number in range(count)) + "\n")
    started = time.perf_counter()
    process = subprocess.Popen(
        [GYM, "collect", f"++head_server.port={head_port}", "-a", AGENT, "-i", str(source),
         "-o", str(workdir / f"out_{count}.jsonl"), "--concurrency", "64", *extra],
        cwd=REPO_ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    _, status, usage = os.wait4(process.pid, 0)
    seconds = time.perf_counter() - started
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"gym collect of {count} rows failed")
    return seconds, usage.ru_maxrss, count


def sizes(text: str) -> list[int]:
    return [int(part) for part in text.split(",") if part]


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--materialize", default="100000,1000000", help="row counts, comma-separated")
    parser.add_argument("--collect", default="2000,20000", help="row counts, comma-separated")
    parser.add_argument(
        "--no-aggregation", action="store_true", help="measure the pipeline without aggregation"
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="gym-bench-") as scratch:
        workdir = Path(scratch)
        print("| materialize rows | seconds | rows/s | peak RSS MiB |\n|---|---|---|---|")
        for count in sizes(args.materialize):
            written, seconds, peak_kib = materialize_peak(workdir, count)
            print(
                f"| {written} | {seconds:.1f} | {written / seconds:,.0f} | {peak_kib / 1024:.0f} |",
                flush=True,
            )
        if not sizes(args.collect):
            return
        deployment, head_port = start_quickstart()
        try:
            print("\n| collect rollouts | seconds | rollouts/s | collector peak RSS MiB |\n|---|---|---|---|")
            for count in sizes(args.collect):
                extra = ["--no-aggregation"] if args.no_aggregation else []
                seconds, peak_kib, done = collect_peak(workdir, head_port, count, extra)
                print(
                    f"| {done} | {seconds:.1f} | {done / seconds:,.0f} | {peak_kib / 1024:.0f} |", flush=True
                )
        finally:
            os.killpg(deployment.pid, signal.SIGTERM)
            deployment.wait(30)
    print(
        f"\npeak RSS of this harness itself: {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MiB"
    )


if __name__ == "__main__":
    main()
