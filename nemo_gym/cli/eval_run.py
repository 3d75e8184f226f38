"""`gym eval run`: from config to metrics in one command.

It merges the selected configs (an environment, a model, `--config` files), starts the deployment, runs
the environment's dataset (or `--input`) through the agent with a progress bar, writes results, failures
and metrics, prints the summary and stops every server, whatever happens. With `--no-serve` (and in
`gym collect`) the rollouts go to a deployment that is already running.

The dataset, unless `--input` names one: the agents' datasets of `--split` (default: benchmark, else
validation, else example; never train unless asked), optionally only those named by `--dataset`, collated
into `<output folder>/preprocessed_datasets/<split>.jsonl` as `gym dataset collate` would.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

from nemo_gym.cli.deployment_check import check_deployment, check_timeout_s, report
from nemo_gym.cli.flags import Invocation, UsageError, override_value, with_config_paths
from nemo_gym.cli.selectors import selected_config
from nemo_gym.collection.collector import collect_rollouts
from nemo_gym.collection.paths import CollectionPaths, refuse_to_replace
from nemo_gym.collection.row_checks import check_recordings, check_rows
from nemo_gym.config import server_kinds
from nemo_gym.config.errors import ConfigError, ServerRefNotFoundError
from nemo_gym.config.global_config import parse_global_config_dict
from nemo_gym.config.settings import locate_data_file
from nemo_gym.datasets.collation import agent_datasets, collate_split
from nemo_gym.launch.launcher import Deployment, DeploymentError, run_until_stopped
from nemo_gym.serving.servers import ServerClient, head_server_config_from

SPLIT_PREFERENCE = ("benchmark", "validation", "example")
REPLAY_MODEL = "replay_model"
REPLAY_FILES_KEY = "policy_model.responses_api_models.replay_model.rollouts_jsonl_fpath"
RECORDED_ROLLOUTS = "data/example_rollouts*.jsonl"  # one file per example dataset
MODEL_HINT = (
    "Choose the policy model with --model-type openai_model (plus --model-url, --model, --model-api-key), "
    "--model-type vllm_model, or --replay FILE to play recorded turns."
)


# What picks servers or a model: meaningless with --no-serve, where the running deployment has both.
SERVING_OPTIONS = (
    "resources_server", "environment", "benchmark", "model_type", "agent_type", "replay", "model", "model_url",
    "model_api_key",
)  # fmt: skip


def check_no_serve(invocation: Invocation, command: str = "gym eval run") -> None:
    given = [name for name in SERVING_OPTIONS if invocation.options.get(name)]
    if given:
        flags = ", ".join("--" + name.replace("_", "-") for name in given)
        raise UsageError(
            f"{command}: --no-serve uses the running deployment's servers and model, so {flags} would have "
            "no effect; drop them (or drop --no-serve to start a deployment with them)"
        )


def check_dataset_choice(invocation: Invocation) -> None:
    options = invocation.options
    if options.get("input") and (options.get("split") or options.get("dataset")):
        raise UsageError(
            "gym eval run: --input names the tasks itself, while --split and --dataset choose among the "
            "config's datasets; give one or the other"
        )


async def run_eval(invocation: Invocation) -> int:
    """Start, collect, stop. The exit code is the collection's (0: every rollout has a result)."""
    overrides = deployment_overrides(invocation)
    try:
        deployment = Deployment(overrides)
    except ServerRefNotFoundError as error:
        raise ConfigError(
            f"{error} {MODEL_HINT}" if server_kinds.MODEL.key in str(error) else str(error)
        ) from None
    except DeploymentError as error:
        print(f"Error: {error}", file=sys.stderr, flush=True)
        return 1
    cfg = deployment.global_config_dict
    output = cfg.get("output_jsonl_fpath")
    if output is not None and not cfg.get("resume_from_cache"):  # before minutes of starting servers
        refuse_to_replace(CollectionPaths.for_output(str(output)), bool(cfg.get("overwrite")))
    added, input_path = collection_overrides(cfg, cfg, invocation.options)
    overrides += added
    check_rows_before_serving(cfg, input_path)

    async def collect() -> int:
        client = ServerClient(head_server_config=deployment.head_server_config, global_config_dict=cfg)
        if not await preflight_passed(client, cfg):
            return 1
        return await collect_rollouts(overrides, client)

    try:
        return await run_until_stopped(deployment, collect)
    except DeploymentError as error:
        print(f"Error: {error}", file=sys.stderr, flush=True)
        return 1


async def run_without_serving(invocation: Invocation, preflight: bool = False) -> int:
    """`gym collect` / `gym eval run --no-serve`: datasets from the command line's configs, else from the
    running deployment's. `preflight` (gym eval run): check the deployment first."""
    overrides = list(invocation.overrides)
    cfg = datasets_from = parse_global_config_dict(overrides)
    if cfg.get("input_jsonl_fpath") is None and not agent_datasets(cfg):
        try:
            datasets_from = ServerClient.load_from_global_config(
                head_server_config_from(cfg)
            ).global_config_dict
        except ValueError as error:
            raise ConfigError(f"{error} (or give the tasks with --input FILE)") from None
    added, _ = collection_overrides(cfg, datasets_from, invocation.options)
    if preflight and not cfg.get("disable_health_check"):
        try:
            client = ServerClient.load_from_global_config(head_server_config_from(cfg))
        except ValueError as error:
            raise ConfigError(str(error)) from None
        if not await preflight_passed(client, cfg):
            return 1
    return await collect_rollouts(overrides + added)


async def preflight_passed(client: ServerClient, cfg: DictConfig) -> bool:
    """The deployment checks of `gym eval health-check`, unless `disable_health_check`; their lines are
    printed, and a failure stops the run before any rollout."""
    if cfg.get("disable_health_check"):
        return True
    checks = await check_deployment(client, check_timeout_s(cfg))
    print(report(checks, as_json=False), flush=True)
    passed = all(check.ok for check in checks)
    if not passed:
        print("Stopped before collecting: fix the failures above, or pass --no-health-check.", flush=True)
    return passed


def deployment_overrides(invocation: Invocation) -> list[str]:
    """The command line's overrides plus what `--replay` implies, on a head server port of its own (an
    evaluation must not collide with a `gym env start` on the default port)."""
    options = invocation.options
    overrides = list(invocation.overrides)
    replay = list(options.get("replay") or [])
    model_type = (options.get("model_type") or "").partition("/")[0]
    if replay or model_type == REPLAY_MODEL:
        if not model_type:
            overrides = with_config_paths(
                overrides, [str(selected_config(server_kinds.MODEL.key, REPLAY_MODEL))]
            )
        elif model_type != REPLAY_MODEL:
            raise ConfigError(
                f"--replay plays recorded turns through replay_model; drop --model-type {model_type}"
            )
        replay = replay or _recorded_rollouts(
            options.get("resources_server") or [], options.get("search_dir") or []
        )
        if replay:
            overrides.append(f"++{REPLAY_FILES_KEY}=[{','.join(override_value(path) for path in replay)}]")
    if not any(token.lstrip("+").startswith("head_server") for token in overrides):
        overrides.insert(0, "++head_server.port=0")
    return overrides


def _recorded_rollouts(servers: list[str], search_dirs: list[str]) -> list[str]:
    """The recorded example rollouts of the selected environments: what replay_model plays by default."""
    paths = []
    for spec in servers:
        folder = selected_config(server_kinds.RESOURCES.key, spec, search_dirs).parent.parent
        paths.extend(str(path) for path in sorted(folder.glob(RECORDED_ROLLOUTS)))
    return paths


def collection_overrides(
    cfg: DictConfig, datasets_from: DictConfig, options: dict[str, Any]
) -> tuple[list[str], Path]:
    """A default output folder, and the dataset when `--input` names none; and the input file."""
    added = []
    output = cfg.get("output_jsonl_fpath")
    if output is None:
        output = f"results/eval_{time.strftime('%Y%m%d_%H%M%S')}/rollouts.jsonl"
        added.append(f"++output_jsonl_fpath={override_value(output)}")
    if cfg.get("input_jsonl_fpath") is None:
        path = chosen_dataset(datasets_from, options, cfg.get("agent_name"), Path(output).parent)
        added.append(f"++input_jsonl_fpath={override_value(str(path))}")
        return added, path
    return added, locate_data_file(str(cfg.get("input_jsonl_fpath")), "input_jsonl_fpath")


def check_rows_before_serving(cfg: DictConfig, input_path: Path) -> None:
    """Refuse, before any server starts, rows that could not run, and tasks a replay has no recording of."""
    limit = cfg.get("limit") or None
    check_rows(input_path, cfg, limit, cfg.get("agent_name"))
    recordings = OmegaConf.select(cfg, REPLAY_FILES_KEY)
    if recordings is not None:
        paths = [recordings] if isinstance(recordings, str) else list(recordings)
        check_recordings(input_path, [locate_data_file(str(path), REPLAY_FILES_KEY) for path in paths], limit)


def chosen_dataset(cfg: DictConfig, options: dict[str, Any], agent: str | None, output_dir: Path) -> Path:
    """Collate the datasets chosen by `--split`, `--dataset` and `--agent` into one input file."""
    configured = agent_datasets(cfg)
    available = [entry for entry in configured if agent is None or entry.agent_name == agent]
    names = options.get("dataset") or []
    if names:
        available = [entry for entry in available if entry.dataset.name in names]
    split = options.get("split") or next(
        (kind for kind in SPLIT_PREFERENCE if any(entry.dataset.type == kind for entry in available)), None
    )
    chosen = [entry for entry in available if entry.dataset.type == split]
    if not chosen:
        listed = ", ".join(f"{e.task_source}/{e.dataset.name} ({e.dataset.type})" for e in configured)
        raise ConfigError(
            f"no dataset of the config matches --split {split or '(any)'}"
            + (f" --dataset {','.join(names)}" if names else "")
            + (f" --agent {agent}" if agent else "")
            + f"; the config has: {listed or 'none'}. Or give the tasks with --input FILE"
        )
    path = collate_split(split, chosen, output_dir / "preprocessed_datasets")
    described = ", ".join(f"{entry.task_source}/{entry.dataset.name}" for entry in chosen)
    print(f"Dataset: {split} split ({described}) -> {path}", flush=True)
    return path
