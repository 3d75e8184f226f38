"""`gym collect`: friendly flags on top of the `+key=value` overrides of rollout collection."""

from __future__ import annotations

from collections.abc import Sequence

from nemo_gym.cli.flags import FlagSet

COLLECT_FLAGS = FlagSet(
    command="gym collect",
    values={
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
    },
    switches={
        "--resume": "resume_from_cache",
        "--add-seed": "num_repeats_add_seed",
        "--no-aggregation": "disable_aggregation",
    },
)


def help_text() -> str:
    from nemo_gym.rollout_collection import RolloutCollectionConfig

    return (
        "usage: gym collect [flags] [+key=value ...]\n\n"
        + RolloutCollectionConfig.help_text()
        + "\n\nFlags (each is shorthand for an override):\n"
        + "\n".join(COLLECT_FLAGS.help_lines())
    )


def overrides_from_flags(args: Sequence[str]) -> list[str]:
    """Turn `-o out.jsonl --resume` into `++output_jsonl_fpath=out.jsonl ++resume_from_cache=true`."""
    return COLLECT_FLAGS.to_overrides(args)
