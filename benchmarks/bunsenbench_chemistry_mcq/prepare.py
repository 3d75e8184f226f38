"""Prepare BunsenBench chemistry MCQ: the `chemistry_mcq` subset of `nvidia/bunsen-bench` at tag v0.1.4, as
bunsenbench_chemistry_mcq tasks.

The subset is a manifest: it names each question's source row (data set, subset, split, pinned revision,
row) with hashes and chemistry labels, but not the question itself. The data set ships the tool that
fetches those rows and checks the hashes, `tools/reconstitute.py`; as in NeMo Gym 0.7, this script
downloads that tool from the same pinned tag and runs it (it is the publisher's code; `HF_TOKEN` must
reach GPQA, which is gated). Each reconstituted question's options are then put in an order drawn from a
hash of its id and NeMo Gym 0.7's prompt version, so the rows, and the gold letters, are 0.7's.
"""

import hashlib
import html
import random
from pathlib import Path
from typing import Any

from nemo_gym.benchmarks import load_folder_module, load_public_file, write_prepared_rows
from nemo_gym.config.errors import ConfigError
from nemo_gym.envkit.multiple_choice import lettered_options, option_letter

SOURCE = "nvidia/bunsen-bench"
SUBSET = "chemistry_mcq"
VERSION = "0.1.4"
REVISION = f"v{VERSION}"
TOOL_PATH = "tools/reconstitute.py"
PROMPT_VERSION = "bunsen_chem_mcq_xml_choice_v1"
# What a task keeps of a reconstituted row, under `metadata` (the question, choices and answer are not).
METADATA_FIELDS = (
    "bct_field", "bct_subfield", "bunsen_id", "canonical_problem_sha256", "source", "source_config",
    "source_dataset", "source_record_id", "source_record_sha256", "source_revision", "source_row_index",
    "source_split",
)  # fmt: skip
DEFAULT_OUTPUT = Path(__file__).parent / "data" / "bunsenbench_chemistry_mcq_benchmark.jsonl"


def reconstituted_rows() -> list[dict[str, Any]]:
    """The questions the manifest points to, fetched and hash-checked by the data set's own tool."""
    try:
        import datasets
    except ImportError:
        raise ConfigError(
            "preparing a benchmark needs `datasets`: pip install 'nemo-gym[benchmarks]'"
        ) from None
    tool = load_folder_module(load_public_file(SOURCE, TOOL_PATH, revision=REVISION))
    try:
        manifest = datasets.load_dataset_builder(SOURCE, SUBSET, revision=REVISION)
    except Exception as error:  # the library's many error types all mean "could not fetch it"
        raise ConfigError(
            f"could not fetch the {SUBSET} manifest of {SOURCE} ({REVISION}): {error}"
        ) from None
    return [dict(row) for row in tool.reconstitute(manifest, token=None, limit=None, verify_hashes=True,
                                                   include_raw_row=False, verbose=False)]  # fmt: skip


def to_task(row: dict[str, Any]) -> dict[str, Any]:
    """The row's options in a fixed pseudo-random order, listed as <choice> elements; the gold as a letter."""
    question_id, choices, answer = row["bunsen_id"], list(row["choices"]), row["answer"]
    if len(choices) < 2 or choices.count(answer) != 1:
        raise ConfigError(
            f"{SOURCE}: question {question_id} needs 2+ choices holding its answer exactly once"
        )
    seed = hashlib.sha256(f"{question_id}:{PROMPT_VERSION}".encode()).digest()[:8]
    random.Random(int.from_bytes(seed, "big")).shuffle(choices)
    listed = "\n".join(f"<choice>{html.escape(choice, quote=False)}</choice>" for choice in choices)
    metadata = {key: row[key] for key in METADATA_FIELDS if key in row}
    return {
        "question": row["question"],
        "options_text": f"<choices>\n{listed}\n</choices>",
        "options": lettered_options(choices),
        "expected_answer": option_letter(choices.index(answer)),
        "uuid": question_id,
        "metadata": {
            **metadata,
            "bunsen_bench_revision": REVISION,
            "bunsen_bench_config": SUBSET,
            "bunsen_bench_config_version": VERSION,
            "prompt_version": PROMPT_VERSION,
        },
    }


def prepare(output_fpath: Path = DEFAULT_OUTPUT) -> Path:
    rows = reconstituted_rows()
    seen = [row["bunsen_id"] for row in rows]
    if len(set(seen)) != len(seen):
        raise ConfigError(f"{SOURCE}: the reconstituted rows repeat a bunsen_id")
    return write_prepared_rows(output_fpath, [to_task(row) for row in rows])


if __name__ == "__main__":
    prepare()
