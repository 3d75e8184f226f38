"""Where one collection's files live, and the rule that an earlier run's records are never dropped
silently."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from nemo_gym.config.errors import ConfigError


@dataclass(frozen=True)
class CollectionPaths:
    output: Path
    materialized: Path
    failures: Path
    aggregate_metrics: Path

    @classmethod
    def for_output(cls, output: str | Path) -> CollectionPaths:
        path = Path(output)
        stem = path.parent / path.stem
        return cls(
            output=path,
            materialized=Path(f"{stem}_materialized_inputs.jsonl"),
            failures=Path(f"{stem}_failures.jsonl"),
            aggregate_metrics=Path(f"{stem}_aggregate_metrics.json"),
        )


def refuse_to_replace(paths: CollectionPaths, overwrite: bool, resumable: bool = True) -> None:
    """Records of an earlier run (results or failures) are never dropped silently: say how to keep them
    or replace them."""
    if overwrite:
        return
    earlier = [
        f"{path} already holds {count} {what}"
        for path, what in ((paths.output, "result(s)"), (paths.failures, "failure record(s)"))
        if (count := _line_count(path))
    ]
    if not earlier:
        return
    resume = ", --resume (+resume_from_cache=true) to finish that run" if resumable else ""
    raise ConfigError(
        f"{' and '.join(earlier)} of an earlier run; pass --overwrite (+overwrite=true) to replace them"
        f"{resume}, or choose another --output"
    )


def _line_count(path: Path) -> int:
    if not path.is_file():
        return 0
    with path.open("rb") as lines:
        return sum(1 for line in lines if line.strip())
