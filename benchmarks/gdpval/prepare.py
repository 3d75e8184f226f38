"""Prepare GDPVal: the 220 tasks of `openai/gdpval` (split `train`) as gdpval rows.

By default each task goes to the policy as one user message and the judge grades the reply's text against
the task's rubric (no agent here works in a sandbox or hands in office files). With
`+prepare_script_args.deliverables_dir=FOLDER`, each row instead names the folder NeMo Gym 0.7's Stirrup
agent leaves for the task under its `persist_deliverables_dir`, `FOLDER/task_<task_id>/repeat_0/`, and the
judge grades the files found there: deliverables made elsewhere are judged here.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from nemo_gym.benchmarks import load_public_split, write_prepared_rows
from nemo_gym.config.errors import ConfigError

SOURCE = "openai/gdpval"
SPLIT = "train"
DEFAULT_OUTPUT = Path(__file__).parent / "data" / "gdpval_benchmark.jsonl"
# Stirrup keeps each rollout's files in task_<task_id>/repeat_<rollout index>/; the benchmark runs once.
STIRRUP_REPEAT = "repeat_0"
ANSWER_IN_TEXT = (
    "Hand in the complete deliverable as your reply, written out in full: a document as its text, a "
    "spreadsheet as tables (with the formulas named), a slide deck as one section per slide."
)


def user_message(row: dict[str, Any]) -> str:
    """The assignment as the policy reads it: who it works as, the task, the files it cannot open here."""
    parts = [f"Sector: {row['sector']}\nOccupation: {row['occupation']}", row["prompt"].strip()]
    files = [Path(name).name for name in row.get("reference_files") or []]
    if files:
        listed = "\n".join(f"- {name}" for name in files)
        parts.append(f"The task refers to these files, which are not attached here:\n{listed}")
    parts.append(ANSWER_IN_TEXT)
    return "\n\n".join(parts)


def to_task(row: dict[str, Any], deliverables: Path | None) -> dict[str, Any]:
    task = {
        "responses_create_params": {"input": [{"role": "user", "content": user_message(row)}]},
        "task_id": row["task_id"],
        "sector": row["sector"],
        "occupation": row["occupation"],
        "prompt": row["prompt"],
        "rubric_json": row["rubric_json"],
        "rubric_pretty": row["rubric_pretty"],
        "reference_files": list(row.get("reference_files") or []),
        "reference_file_urls": list(row.get("reference_file_urls") or []),
    }
    if deliverables is not None:
        task["deliverables_dir"] = str(deliverables / f"task_{row['task_id']}" / STIRRUP_REPEAT)
    return task


def prepare(output_fpath: Path = DEFAULT_OUTPUT, *, deliverables_dir: str | None = None) -> Path:
    folder = None
    if deliverables_dir is not None:
        folder = Path(deliverables_dir).expanduser().resolve()
        if not folder.is_dir():
            raise ConfigError(
                f"gdpval: prepare_script_args.deliverables_dir: {folder} is not a folder; name the "
                "persist_deliverables_dir of the run whose deliverables are to be judged"
            )
    tasks = [to_task(row, folder) for row in load_public_split(SOURCE, SPLIT)]
    if folder is not None:
        found = sum(Path(task["deliverables_dir"]).is_dir() for task in tasks)
        print(f"{found} of {len(tasks)} tasks have a deliverables folder under {folder}")
    return write_prepared_rows(output_fpath, tasks)


if __name__ == "__main__":
    prepare()
