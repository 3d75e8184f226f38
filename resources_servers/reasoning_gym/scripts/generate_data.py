"""Generate reasoning_gym training rows procedurally with the `reasoning-gym` library.

Each row is one library entry in this environment's row format: the question as the single user
message of `responses_create_params`, plus `question`, `answer` and `metadata` (with `source_dataset`),
which is all `/verify` needs. The output file is written atomically: readers never see half a file.

    python scripts/generate_data.py --task knights_knaves:500 --task basic_arithmetic \\
        --count 200 --seed 7 --output data/train.jsonl

Each task gets its own seed derived from `--seed` and the task name, so adding or removing a task
does not change the rows generated for the others.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))  # the install root, when run as a script
# The server's own scoring, so checked rows are winnable there.
from resources_servers.reasoning_gym.grading import score  # noqa: E402


def parse_task(spec: str, default_count: int) -> tuple[str, int]:
    """`name` or `name:count`."""
    name, _, count = spec.partition(":")
    if not name:
        raise argparse.ArgumentTypeError(f"empty task name in {spec!r}")
    if not count:
        return name, default_count
    if not count.isdigit() or int(count) < 1:
        raise argparse.ArgumentTypeError(f"{spec!r}: the count after ':' must be a positive whole number")
    return name, int(count)


def task_seed(seed: int, task_name: str) -> int:
    return (seed * 1_000_003 + zlib.crc32(task_name.encode())) % (2**31)


def to_json_value(value: Any) -> Any:
    """Make library metadata JSON-safe: sets become sorted lists, numpy scalars/arrays plain values."""
    if isinstance(value, (set, frozenset)):
        return sorted(value, key=repr)
    if hasattr(value, "tolist"):
        return value.tolist()
    raise TypeError(f"cannot write {type(value).__name__} to JSON")


def make_row(entry: dict[str, Any], system_prompt: str | None) -> dict[str, Any]:
    messages = [{"role": "system", "content": system_prompt}] if system_prompt else []
    messages.append({"role": "user", "content": entry["question"]})
    row = {
        "responses_create_params": {"input": messages},
        "question": entry["question"],
        "answer": entry["answer"],
        "metadata": entry["metadata"],
    }
    # Round-trip now, so the row checked below is exactly what a reader of the file will get.
    return json.loads(json.dumps(row, default=to_json_value))


def generate_rows(
    tasks: list[tuple[str, int]],
    seed: int,
    task_configs: dict[str, dict[str, Any]],
    system_prompt: str | None = None,
    check: bool = True,
) -> Iterator[dict[str, Any]]:
    """Rows for every task in order. With `check`, the oracle answer of each row must score 1.0 as the server
    scores it after the JSON round trip (rows without a single oracle answer are not checked), so no
    unwinnable row is written."""
    import reasoning_gym

    for name, count in tasks:
        dataset = reasoning_gym.create_dataset(
            name, **task_configs.get(name, {}), seed=task_seed(seed, name), size=count
        )
        for index in range(count):
            row = make_row(dataset[index], system_prompt)
            if check and row["answer"] is not None:
                entry = {key: row[key] for key in ("question", "answer", "metadata")}
                own_score = score(name, row["answer"], entry)
                if own_score != 1.0:
                    raise ValueError(
                        f"{name} row {index}: its own answer scores {own_score} after the JSON round trip"
                    )
            yield row


def write_jsonl_atomically(rows: Iterator[dict[str, Any]], output: Path) -> int:
    """Write to a temporary file beside `output`, then rename it over `output`; nothing is left on failure."""
    output.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(prefix=f".{output.name}.", suffix=".tmp", dir=output.parent)
    written = 0
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as file:
            for row in rows:
                file.write(json.dumps(row, ensure_ascii=False) + "\n")
                written += 1
            file.flush()
            os.fsync(file.fileno())
        os.replace(temporary, output)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
    return written


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--task",
        action="append",
        required=True,
        metavar="NAME[:COUNT]",
        help="a reasoning-gym task (repeatable); COUNT defaults to --count",
    )
    parser.add_argument("--count", type=int, default=100, help="rows per task without an explicit COUNT")
    parser.add_argument("--seed", type=int, default=0, help="base seed; each task derives its own from it")
    parser.add_argument(
        "--output", type=Path, required=True, help="JSONL file to write (replaced atomically)"
    )
    parser.add_argument(
        "--task-config",
        type=json.loads,
        default={},
        metavar="JSON",
        help='per-task generator settings, e.g. \'{"knights_knaves": {"n_people": 3}}\'',
    )
    parser.add_argument(
        "--system-prompt", default=None, help="optional system message put before the question"
    )
    parser.add_argument(
        "--no-check", action="store_true", help="skip checking that each row's own answer scores 1.0"
    )
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.count < 1:
        parser.error("--count must be at least 1")
    if not isinstance(args.task_config, dict):
        parser.error("--task-config must be a JSON object keyed by task name")
    try:
        tasks = [parse_task(spec, args.count) for spec in args.task]
    except argparse.ArgumentTypeError as error:
        parser.error(str(error))

    from reasoning_gym.factory import DATASETS

    unknown = [name for name, _ in tasks if name not in DATASETS]
    if unknown:
        parser.error(f"unknown reasoning-gym task(s): {', '.join(unknown)}")
    rows = generate_rows(tasks, args.seed, args.task_config, args.system_prompt, check=not args.no_check)
    written = write_jsonl_atomically(rows, args.output)
    print(f"wrote {written} rows to {args.output}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
