"""Prepare m-ArenaHard: the `test` split of every language subset of `CohereLabs/m-ArenaHard`, as
arena_judge tasks (one row per language and question).

The data set ships prompts only, no baseline answers: `gym eval prepare` writes an empty `baseline_answer`,
which makes the scores a check of the pipeline rather than a comparison. For a real run, generate the
baseline model's answers and join them in with
`python benchmarks/m_arena_hard/prepare.py --baseline-file F` (JSON lines of `language`, `question_id`,
`generation`). Every row is judged with the hard-prompt judge; the source's category is kept as
`original_category`, and the language as `subset_for_metrics`.
"""

import argparse
from collections.abc import Callable
from pathlib import Path

from nemo_gym.benchmarks import subset_rows, write_prepared_rows
from nemo_gym.config.jsonl import iter_jsonl

SOURCE = "CohereLabs/m-ArenaHard"
DEFAULT_OUTPUT = Path(__file__).parent / "data" / "m_arena_hard_benchmark.jsonl"


def to_task(row: dict, language: str) -> dict:
    return {
        "uid": row["question_id"],
        "question": row["prompt"],
        "language": language,
        "category": "hard_prompt",
        "original_category": row["category"],
        "cluster": row["cluster"],
        "subset_for_metrics": language,
        "baseline_answer": "",
    }


def multilingual_tasks(source: str, task: Callable[[dict, str], dict]) -> list[dict]:
    """`task(row, language)` of each row of the `test` split of each language subset of `source`."""
    return [task(row, language) for language, row in subset_rows(source, "test")]


def with_baselines(tasks: list[dict], baseline_fpath: Path) -> list[dict]:
    """The tasks with the baseline model's answers of `baseline_fpath`; a task without one is an error, as a
    missing baseline would silently shrink the comparison."""
    answers = {
        (row["language"], row["question_id"]): row["generation"]
        for _, _, _, row in iter_jsonl(baseline_fpath)
    }
    missing = [
        (task["language"], task["uid"]) for task in tasks if (task["language"], task["uid"]) not in answers
    ]
    if missing:
        raise SystemExit(
            f"{baseline_fpath}: no baseline answer for (language, question_id) {missing[0]} and {len(missing) - 1} more"
        )
    return [{**task, "baseline_answer": answers[task["language"], task["uid"]]} for task in tasks]


def prepare(output_fpath: Path = DEFAULT_OUTPUT) -> Path:
    return write_prepared_rows(output_fpath, multilingual_tasks(SOURCE, to_task))


def main(source: str, task: Callable[[dict, str], dict], default_output: Path) -> None:
    """The command line: prepare, joining the answers of `--baseline-file` when given."""
    parser = argparse.ArgumentParser(description=f"Prepare {source} for arena_judge.")
    parser.add_argument("--baseline-file", type=Path, help="JSON lines of language, question_id, generation")
    parser.add_argument("--output", type=Path, default=default_output)
    options = parser.parse_args()
    tasks = multilingual_tasks(source, task)
    if options.baseline_file is not None:
        tasks = with_baselines(tasks, options.baseline_file)
    write_prepared_rows(options.output, tasks)


if __name__ == "__main__":
    main(SOURCE, to_task, DEFAULT_OUTPUT)
