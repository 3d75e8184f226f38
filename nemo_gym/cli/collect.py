"""The flags of rollout collection (`gym collect`, `gym eval run`), each a shorthand for an override."""

from __future__ import annotations

from collections.abc import Sequence

from nemo_gym.cli.flags import repeated, switch, value

# NeMo Gym 0.7's rollout health checks after collecting or aggregating (and Gym's pre-flight check).
HEALTH_CHECK_FLAGS = (
    switch("--no-health-check", key="disable_health_check", help="skip the health checks"),
    value("--health-check-workers", key="health_check_workers", metavar="N", help="processes judging rollouts"),
    value("--health-check-ignore", key="health_check_ignored_checks", metavar="A,B", help="check ids to ignore"),
)  # fmt: skip
COLLECT_FLAGS = (
    *HEALTH_CHECK_FLAGS,
    value("-a", "--agent", key="agent_name", help="the agent of every row (overrides agent_ref)"),
    value("-i", "--input", key="input_jsonl_fpath", metavar="FILE", help="tasks, one JSON object per line"),
    value("-o", "--output", key="output_jsonl_fpath", metavar="FILE", help="results file"),
    value("--limit", key="limit", metavar="N", help="only the first N rows"),
    value("--num-repeats", key="num_repeats", metavar="N", help="rollouts per row"),
    value("--concurrency", key="num_samples_in_parallel", metavar="N", help="rollouts in flight"),
    value("--prompt-config", key="prompt_config", metavar="FILE", help="YAML {system?, user} templates"),
    value("--rollout-timeout", key="rollout_timeout_s", metavar="SECONDS", help="deadline of one rollout"),
    value("--temperature", key="responses_create_params.temperature", metavar="T", help="sampling temperature"),
    value("--top-p", key="responses_create_params.top_p", metavar="P", help="nucleus sampling"),
    value("--max-output-tokens", key="responses_create_params.max_output_tokens", metavar="N", help="per turn"),
    switch("--resume", key="resume_from_cache", help="run only the rollouts that have no result yet"),
    switch("--overwrite", key="overwrite", help="replace the results already in the output file"),
    switch("--add-seed", key="num_repeats_add_seed", help="seed = rollout index, via metadata.extra_body"),
    switch("--interleave-repeats", key="interleave_repeats", help="one repeat of every task, then the next"),
    switch("--no-aggregation", "--disable-aggregation", key="disable_aggregation",
           help="skip /aggregate_metrics (sharded runs)"),
)  # fmt: skip
# `gym eval run` also picks the dataset from the config when no --input is given.
DATASET_FLAGS = (
    value(
        "--split",
        metavar="TYPE",
        choices=("train", "validation", "benchmark", "example"),
        help="which datasets of the config to run (default: benchmark, else validation, else example)",
    ),
    repeated("--dataset", metavar="NAME", help="only the datasets of that name (repeatable)"),
)


def collection_help(_: Sequence[str]) -> str:
    from nemo_gym.collection.config import RolloutCollectionConfig

    return RolloutCollectionConfig.help_text()


def eval_run_help(_: Sequence[str]) -> str:
    """The collection settings as `gym eval run` fills them: it starts its own deployment, and finds the
    tasks and the results file itself when not told."""
    from nemo_gym.collection.config import RolloutCollectionConfig

    return RolloutCollectionConfig.help_text(
        summary="Start the deployment of the selected configs, run the tasks through its agents, write the "
        "results, the failures and the aggregate metrics next to `output_jsonl_fpath`, and stop every "
        "server (with --no-serve: use the deployment `gym env start` runs).",
        defaults={
            "input_jsonl_fpath": "the config's datasets of --split (see --dataset)",
            "output_jsonl_fpath": "results/eval_<date>_<time>/rollouts.jsonl",
        },
    )
