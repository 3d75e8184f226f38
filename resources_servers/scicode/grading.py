"""Host-side pieces of SciCode grading: the model's code, the tests as they run here, a step's targets."""

from __future__ import annotations

import io
import re
from pathlib import Path

import h5py

THINK_CLOSE = "</think>"
PYTHON_BLOCK = re.compile(r"```python[ \t]*\n(.*?)```", re.DOTALL)
SCICODE_IMPORT = re.compile(r"^\s*(from\s+scicode[.\s]|import\s+scicode\b)")
OUT_OF_CONTEXT = "_ran_out_of_context_"


def extract_code(text: str) -> str:
    """Every closed ```python block after the last `</think>`, joined in order ("" when there is none): the
    whole function set may come as one block or one block per step."""
    text = text.replace("\r", "")
    if THINK_CLOSE in text:
        text = text.rsplit(THINK_CLOSE, 1)[1]
    return "\n\n".join(block.strip() for block in PYTHON_BLOCK.findall(text)).strip()


def sanitize_test(test: str) -> str:
    """A test without its `scicode` imports: the runner provides the comparison helpers they import."""
    return "\n".join(line for line in test.split("\n") if not SCICODE_IMPORT.match(line))


def step_targets(h5_path: Path, step_number: str, count: int) -> tuple[bytes | None, str | None]:
    """(an HDF5 image holding only `<step_number>/test1..count`, None), or (None, why it cannot be made)."""
    with h5py.File(h5_path, "r") as source:
        missing = [
            f"{step_number}/test{n}" for n in range(1, count + 1) if f"{step_number}/test{n}" not in source
        ]
        if missing:
            return None, f"test data has no target {missing[0]!r}"
        buffer = io.BytesIO()
        with h5py.File(buffer, "w") as image:
            group = image.require_group(step_number)
            for n in range(1, count + 1):
                source.copy(source[f"{step_number}/test{n}"], group, name=f"test{n}")
        return buffer.getvalue(), None
