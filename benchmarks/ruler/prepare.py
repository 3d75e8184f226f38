"""Prepare RULER: its 13 synthetic long-context tasks, made for one context length measured with the
tokenizer of the model under test, as ruler tasks.

    gym eval prepare --benchmark ruler "+prepare_script_args.model=nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-BF16" \
        +prepare_script_args.length=131072

As NeMo Gym 0.7 runs RULER: 100 prompts per task, 50 tokens of the length kept for the chat template,
and the prompts for a chat model (RULER's answer prefix is counted in the length but not sent). With
`data_format` `default` or `base` (the text-completion prompts of base models, prepare_pretrain.py) the
answer prefix ends the prompt, right after the question or after a newline, and each row carries its
task's answer budget as `max_output_tokens`. The tasks themselves are made by tasks.py, the data they
are made from fetched by sources.py.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from nemo_gym.benchmarks import load_folder_module, write_prepared_rows
from nemo_gym.config.errors import ConfigError

HERE = Path(__file__).parent
DEFAULT_OUTPUT = HERE / "data" / "ruler.jsonl"
TEMPLATE_TOKENS = 50  # the chat template's share of the length
SAMPLES_PER_TASK = 100
# What goes between the question and RULER's answer prefix in each data format (None: no prefix sent).
PREFIX_SEPARATORS = {"chat": None, "default": "", "base": "\n"}
TASK_NAMES = (
    *(f"niah_single_{n}" for n in (1, 2, 3)),
    *(f"niah_multikey_{n}" for n in (1, 2, 3)),
    "niah_multivalue",
    "niah_multiquery",
    "vt",
    "cwe",
    "fwe",
    "qa_1",
    "qa_2",
)


def prepare(
    output_fpath: Path = DEFAULT_OUTPUT,
    *,
    model: str | None = None,
    length: int | None = None,
    tasks: Sequence[str] = TASK_NAMES,
    samples_per_task: int = SAMPLES_PER_TASK,
    data_format: str = "chat",
) -> Path:
    if model is None or length is None:
        raise ConfigError(
            "ruler is made for one model's tokenizer and context length: add "
            "+prepare_script_args.model=<Hub id or tokenizer path> +prepare_script_args.length=<tokens>"
        )
    unknown = [name for name in tasks if name not in TASK_NAMES]
    if unknown:
        raise ConfigError(
            f"ruler: prepare_script_args.tasks: unknown {unknown}; choose from {list(TASK_NAMES)}"
        )
    if samples_per_task < 1:
        raise ConfigError("ruler: prepare_script_args.samples_per_task must be at least 1")
    if data_format not in PREFIX_SEPARATORS:
        raise ConfigError(
            f"ruler: prepare_script_args.data_format: {data_format!r} is not one of {list(PREFIX_SEPARATORS)}"
        )
    rows = _rows(model, int(length), tasks, samples_per_task, PREFIX_SEPARATORS[data_format])
    return write_prepared_rows(output_fpath, rows)


def _rows(
    model: str, length: int, names: Sequence[str], samples: int, prefix_separator: str | None
) -> Iterator[dict[str, Any]]:
    sources = load_folder_module(HERE / "sources.py")
    tasks = load_folder_module(HERE / "tasks.py")
    count = sources.token_counter(model)
    words = tasks.Words(
        nouns=sources.wonderwords_list("nounlist.txt"),
        adjectives=sources.wonderwords_list("adjectivelist.txt"),
        verbs=sources.wonderwords_list("verblist.txt"),
        more=sources.english_words,
    )
    budget = length - TEMPLATE_TOKENS
    makers = tasks.all_tasks(budget, count, words, sources.essay_words, sources.squad, sources.hotpotqa)
    for name in names:
        task = makers[name]()
        size = tasks.largest_size(task, count, budget)
        print(f"ruler: {name}: haystack size {size} fits {budget} tokens")
        for sample in range(samples):
            prompt, prompt_length = tasks.fitted_prompt(task, count, budget, sample, size)
            params: dict[str, Any] = {"input": [{"role": "user", "content": prompt.text}]}
            if prefix_separator is not None:  # a base model continues the text from the answer prefix
                params["input"][0]["content"] += prefix_separator + prompt.answer_prefix.strip()
                params["max_output_tokens"] = task.answer_tokens
            yield {
                "responses_create_params": params,
                "outputs": prompt.outputs,
                "length": prompt_length,
                "subset": name,
            }


if __name__ == "__main__":
    import argparse

    parser = argparse.ArgumentParser(description="Prepare RULER for one tokenizer and context length.")
    parser.add_argument("--model", required=True, help="Hub model id, or a tokenizer.json (or its folder)")
    parser.add_argument("--length", type=int, required=True, help="context length in tokens")
    arguments = parser.parse_args()
    prepare(model=arguments.model, length=arguments.length)
