"""`gym collect`: friendly flags on top of the `+key=value` overrides of rollout collection."""

from __future__ import annotations

import difflib
import re
from collections.abc import Sequence

from nemo_gym.config_types import ConfigError

VALUE_FLAGS = {
    "-a": "agent_name",
    "--agent": "agent_name",
    "-i": "input_jsonl_fpath",
    "--input": "input_jsonl_fpath",
    "-o": "output_jsonl_fpath",
    "--output": "output_jsonl_fpath",
    "--limit": "limit",
    "--num-repeats": "num_repeats",
    "--concurrency": "num_samples_in_parallel",
    "--prompt-config": "prompt_config",
    "--rollout-timeout": "rollout_timeout_s",
    "--temperature": "responses_create_params.temperature",
    "--top-p": "responses_create_params.top_p",
    "--max-output-tokens": "responses_create_params.max_output_tokens",
}
SWITCH_FLAGS = {
    "--resume": "resume_from_cache",
    "--add-seed": "num_repeats_add_seed",
    "--no-aggregation": "disable_aggregation",
}
PLAIN_VALUE = re.compile(r"[\w./:@+-]*")


def help_text() -> str:
    from nemo_gym.rollout_collection import RolloutCollectionConfig

    flags = [f"  {flag:<20} ++{key}=<value>" for flag, key in VALUE_FLAGS.items()]
    flags += [f"  {flag:<20} ++{key}=true" for flag, key in SWITCH_FLAGS.items()]
    return (
        "usage: gym collect [flags] [+key=value ...]\n\n"
        + RolloutCollectionConfig.help_text()
        + "\n\nFlags (each is shorthand for an override):\n"
        + "\n".join(flags)
    )


def _override_value(value: str) -> str:
    """A value as a Hydra override token: quoted unless it is plainly a word, number or path."""
    if PLAIN_VALUE.fullmatch(value):
        return value
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


def overrides_from_flags(args: Sequence[str]) -> list[str]:
    """Turn `-o out.jsonl --resume` into `++output_jsonl_fpath=out.jsonl ++resume_from_cache=true`."""
    overrides: list[str] = []
    remaining = list(args)
    while remaining:
        arg = remaining.pop(0)
        if not arg.startswith("-"):
            overrides.append(arg)
            continue
        flag, has_value, value = arg.partition("=")
        if flag in SWITCH_FLAGS:
            overrides.append(f"++{SWITCH_FLAGS[flag]}={value if has_value else 'true'}")
        elif flag in VALUE_FLAGS:
            if not has_value:
                if not remaining:
                    raise ConfigError(f"gym collect: {flag} needs a value, e.g. {flag} <value>")
                value = remaining.pop(0)
            overrides.append(f"++{VALUE_FLAGS[flag]}={_override_value(value)}")
        else:
            known = [*VALUE_FLAGS, *SWITCH_FLAGS]
            close = difflib.get_close_matches(flag, known, n=1)
            hint = f"; did you mean {close[0]}?" if close else f"; known flags: {' '.join(known)}"
            raise ConfigError(f"gym collect: unknown option {flag}{hint}")
    return overrides
