"""Prepare MATH (Hendrycks et al.): the `test` split of the seven subject subsets of
`EleutherAI/hendrycks_math`, as math_with_judge tasks.

A source row has the worked `solution`, whose last `\\boxed{}` holds the answer: that is the
`expected_answer`, and the solution is kept as `reference_solution`, with `level` and `type` (the subject).
NeMo Gym 0.7 reads the same 5000 problems from Qwen2.5-Math's copy on GitHub, whose answers were taken from
the solutions the same way. A solution without a box (none is known) would be left out, and counted.
"""

from pathlib import Path

from nemo_gym.benchmarks import subset_rows, write_prepared_rows
from nemo_gym.text.extraction import last_boxed

SOURCE = "EleutherAI/hendrycks_math"
DEFAULT_OUTPUT = Path(__file__).parent / "data" / "hendrycks_math_benchmark.jsonl"


def to_task(row: dict) -> dict | None:
    answer = last_boxed(row["solution"])
    if answer is None:
        return None
    return {
        "question": row["problem"],
        "expected_answer": answer.strip(),
        "reference_solution": row["solution"],
        "level": row["level"],
        "type": row["type"],
    }


def prepare(output_fpath: Path = DEFAULT_OUTPUT) -> Path:
    rows = [row for _, row in subset_rows(SOURCE, "test")]
    tasks = [task for row in rows if (task := to_task(row)) is not None]
    if len(tasks) < len(rows):
        print(f"Left out {len(rows) - len(tasks)} problems whose solution has no \\boxed{{}} answer")
    return write_prepared_rows(output_fpath, tasks)


if __name__ == "__main__":
    prepare()
