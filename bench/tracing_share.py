"""Tracing's share of a traced deployment's CPU samples: a figure that the machine's load does not move.

The A/B figure of `observability_overhead.py` compares deployments run side by side, and on a shared machine
two identical deployments can differ by 5-10 % within one run. Here a sampling profiler (py-spy) watches the
serving processes of the traced deployment alone while it serves a collection, and the samples are split by
what they were doing: making, ending and propagating spans (Gym's span code, its OTLP encoder, OpenTelemetry's
API) on the serving threads, and the export thread. Load from elsewhere slows every sample alike, so the
shares hold on a busy machine too. What the samples cannot see (a longer header parsed by the HTTP server, one
more ASGI layer's awaits) is left out, so the share is a lower bound of the A/B overhead.
"""

from __future__ import annotations

import collections
import shutil
import signal
import subprocess
from collections.abc import Iterable
from pathlib import Path

# Frames of these files are tracing's work.
TRACING_FILES = (
    "nemo_gym/telemetry/tracing.py",
    "nemo_gym/telemetry/spans.py",
    "nemo_gym/telemetry/trace_headers.py",
    "nemo_gym/telemetry/otlp_export.py",
    "opentelemetry/",
)
EXPORT_THREAD = "_drain_forever"
# A thread blocked in one of these is waiting, not working; py-spy cannot always tell (a sample taken as the
# thread goes to sleep), so such samples are left out: the event loop polling (uvloop, under asyncio's
# runner), a thread waiting on a lock or event, the export thread waiting for the collector's answer.
WAITING = ("(threading.py:", "Runner.run (asyncio/runners.py:", "SocketIO.readinto (socket.py:")
SAMPLES_PER_S = 200


# The server-span middleware's own frames, which also await the request's work (the app, and the response
# going out): below them, a deeper frame outside the tracing code is the request's, not tracing's.
PASS_THROUGH = ("ServerSpans.__call__ (", "ServerSpans.__call__.<locals>.send_with_status (")


def classify(frames: list[str]) -> str:
    """`waiting`, `export`, `spans` or `other` for one sample's stack (outermost frame first)."""
    if any(mark in frames[-1] for mark in WAITING):
        return "waiting"
    if any(EXPORT_THREAD in frame for frame in frames):
        return "export"
    ours = [index for index, frame in enumerate(frames) if any(name in frame for name in TRACING_FILES)]
    if not ours:
        return "other"
    innermost = ours[-1]
    if innermost < len(frames) - 1 and frames[innermost].startswith(PASS_THROUGH):
        return "other"
    return "spans"


def shares(profiles: Iterable[Path]) -> dict[str, float]:
    """Percent of the working samples in each class, from py-spy's raw (collapsed) output files."""
    counts: collections.Counter[str] = collections.Counter()
    for profile in profiles:
        for line in profile.read_text().splitlines():
            stack, _, count = line.rpartition(" ")
            counts[classify(stack.split(";"))] += int(count)
    total = sum(counts.values()) - counts["waiting"] or 1
    return {kind: 100 * counts[kind] / total for kind in ("spans", "export", "other")} | {"samples": total}


def record(pids: list[int], folder: Path) -> list[tuple[subprocess.Popen, Path]]:
    """Start one py-spy per process; stop them with `stop`."""
    py_spy = shutil.which("py-spy")
    if py_spy is None:
        raise SystemExit("--profile needs py-spy: pip install py-spy (it is in the dev extra)")
    recorders = []
    for pid in pids:
        output = folder / f"{pid}.txt"
        command = [py_spy, "record", "--pid", str(pid), "--format", "raw", "--rate", str(SAMPLES_PER_S)]
        command += ["--nonblocking", "-o", str(output)]  # not pausing the servers, which are measured
        recorders.append(
            (subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE), output)
        )
    return recorders


def stop(recorders: list[tuple[subprocess.Popen, Path]]) -> list[Path]:
    """Stop the recorders (py-spy writes its file on SIGINT) and return the files they wrote."""
    for process, _ in recorders:
        process.send_signal(signal.SIGINT)
    written = []
    for process, output in recorders:
        _, errors = process.communicate(timeout=60)
        if not output.exists():
            raise SystemExit(
                f"py-spy wrote no profile (is ptrace allowed here?): {errors.decode().strip()[-300:]}"
            )
        written.append(output)
    return written
