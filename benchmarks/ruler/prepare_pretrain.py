"""Prepare RULER for base, pretraining and midtraining checkpoints (NeMo Gym 0.7's `config_pretrain.yaml`
flavor): prepare.py's tasks as text-completion prompts, each ending with RULER's answer prefix and
carrying its task's answer budget as `max_output_tokens`.

    gym eval prepare --benchmark ruler/config_pretrain "+prepare_script_args.model=/path/to/checkpoint" \\
        +prepare_script_args.length=262144

`data_format` is `default` (the prefix right after the question, as NeMo Skills' generation mode) or
`base` (after a newline).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from nemo_gym.benchmarks import load_folder_module

HERE = Path(__file__).parent
DEFAULT_OUTPUT = HERE / "data" / "ruler_pretrain.jsonl"
CHAT_PREPARE = load_folder_module(HERE / "prepare.py")


def prepare(
    output_fpath: Path = DEFAULT_OUTPUT,
    *,
    model: str | None = None,
    length: int | None = None,
    tasks: Sequence[str] = CHAT_PREPARE.TASK_NAMES,
    samples_per_task: int = CHAT_PREPARE.SAMPLES_PER_TASK,
    data_format: str = "default",
) -> Path:
    return CHAT_PREPARE.prepare(
        output_fpath,
        model=model,
        length=length,
        tasks=tasks,
        samples_per_task=samples_per_task,
        data_format=data_format,
    )


if __name__ == "__main__":
    import argparse

    parser = argparse.ArgumentParser(description="Prepare RULER's text-completion prompts for a base model.")
    parser.add_argument("--model", required=True, help="Hub model id, or a tokenizer.json (or its folder)")
    parser.add_argument("--length", type=int, required=True, help="context length in tokens")
    parser.add_argument("--data-format", choices=["default", "base"], default="default")
    arguments = parser.parse_args()
    prepare(model=arguments.model, length=arguments.length, data_format=arguments.data_format)
