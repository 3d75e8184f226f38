"""Run a command while other processes keep every core busy: `python bench/with_cpu_load.py --per-core 2 --
make test` is how `make test-load` checks that the suite passes on a busy machine.

The burners are bounded: each exits after `--max-seconds` or when this process dies, and they are ended by
pid when the command ends. The command's exit code is returned.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys

BURNER = """
import os, sys, time
parent, stop_at = int(sys.argv[1]), time.monotonic() + float(sys.argv[2])
while time.monotonic() < stop_at and os.getppid() == parent:
    sum(range(100_000))
"""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--per-core", type=int, default=2, help="CPU-bound processes per core")
    parser.add_argument("--max-seconds", type=float, default=3600.0, help="a burner's longest life")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="the command, after --")
    args = parser.parse_args()
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("give the command to run after --")
    count = args.per_core * (os.cpu_count() or 1)
    burners = [
        subprocess.Popen([sys.executable, "-c", BURNER, str(os.getpid()), str(args.max_seconds)])
        for _ in range(count)
    ]
    print(
        f"with_cpu_load: {count} CPU-bound processes ({args.per_core} per core) while running: {' '.join(command)}"
    )
    try:
        return subprocess.call(command)
    finally:
        for burner in burners:
            if burner.poll() is None:
                burner.send_signal(signal.SIGTERM)
        for burner in burners:
            burner.wait()


if __name__ == "__main__":
    sys.exit(main())
