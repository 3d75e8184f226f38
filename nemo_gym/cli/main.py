"""The `gym` command and its legacy `ng_*` aliases.

Every argument after the command is a Hydra override (`+config_paths=[a.yaml]`, `++x.y=1`). A config
mistake is a user error: one line on stderr, no traceback, a non-zero exit.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Callable, Coroutine, Sequence
from pathlib import Path
from typing import Any

from nemo_gym.config_types import ConfigError

USAGE = """usage: gym <command> [+key=value ...]

commands:
  run        start every server of a deployment (alias ng_run)
  demo       start the quickstart deployment, run its example tasks, print rewards, stop
  collect    run a dataset through an agent and write rollouts (alias ng_collect_rollouts)
  eval       aggregate: merge sharded rollouts and aggregate them (alias ng_aggregate_rollouts)
             profile: per-task pass rates from materialized inputs + results (alias ng_reward_profile)
  dataset    collate: check datasets, write metrics and per-type JSONL (alias ng_prepare_data)
             upload | download [--storage hf|gitlab]: move JSONL datasets to and from the Hugging
             Face hub or a GitLab package registry (aliases ng_upload_dataset_to_hf, ...)
             rm: delete a dataset from GitLab (asks first unless --yes)
  status     list the instances of a running deployment and their health (alias ng_status)
  resolve    print the merged config, secrets masked (alias ng_dump_config)
  validate   parse and check a config without starting anything
  test       run a server folder's tests and check its example data; all folders without
             +entrypoint=<type>/<folder> (aliases ng_test, ng_test_all)
  init       create resources_servers/<name> from a template whose tests pass at once
             (alias ng_init_resources_server)
"""


def _run_async(work: Coroutine[Any, Any, int]) -> int:
    """Run a command's coroutine, closing the pooled HTTP client before the loop ends."""
    from nemo_gym.http_client import close_global_aiohttp_client

    async def run_then_close() -> int:
        try:
            return await work
        finally:
            await close_global_aiohttp_client()

    return asyncio.run(run_then_close())


INTERRUPTED_EXIT_CODE = 130


def _interrupted() -> int:
    """Ctrl-C before the launcher's own handling is in place: one line, no traceback."""
    print("Interrupted.", file=sys.stderr)
    return INTERRUPTED_EXIT_CODE


def _run(overrides: Sequence[str]) -> int:
    from nemo_gym.launcher import Deployment, DeploymentError, run_until_stopped

    try:
        deployment = Deployment(list(overrides))
        return _run_async(run_until_stopped(deployment))
    except DeploymentError as error:
        print(f"Error: {error}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return _interrupted()


def _status(overrides: Sequence[str]) -> int:
    from nemo_gym.cli.status import print_status

    return _run_async(print_status(list(overrides)))


def _demo(overrides: Sequence[str]) -> int:
    from nemo_gym.cli.demo import run_demo

    try:
        return _run_async(run_demo(list(overrides)))
    except KeyboardInterrupt:
        return _interrupted()


def _collect(args: Sequence[str]) -> int:
    from nemo_gym.cli.collect import overrides_from_flags
    from nemo_gym.rollout_collection import collect_rollouts

    return _run_async(collect_rollouts(overrides_from_flags(args)))


def _eval(args: Sequence[str]) -> int:
    if not args or args[0] not in ("aggregate", "profile"):
        raise ConfigError("usage: gym eval aggregate|profile [+key=value ...]")
    if args[0] == "aggregate":
        from nemo_gym.rollout_collection import aggregate_shards

        return _run_async(aggregate_shards(list(args[1:])))
    from nemo_gym.eval_profile import run_profile

    return run_profile(list(args[1:]))


def _resolve(overrides: Sequence[str]) -> int:
    from nemo_gym.global_config import parse_global_config_dict, to_yaml

    print(to_yaml(parse_global_config_dict(list(overrides)), mask=True), end="")
    return 0


def _validate(overrides: Sequence[str]) -> int:
    """Everything `gym run` checks before and while its servers start, without serving anything."""
    from nemo_gym.global_config import parse_global_config_dict, require_server_instances
    from nemo_gym.launcher import check_server_configs, check_startable, readiness_deadline_from

    cfg = parse_global_config_dict(list(overrides))
    instances = require_server_instances(cfg)
    check_startable(cfg, instances, Path.cwd())
    deadline_s = readiness_deadline_from(cfg)
    asyncio.run(check_server_configs(cfg, instances, Path.cwd(), deadline_s))
    print(f"Config is valid: {len(instances)} server instance(s).")
    return 0


def _dataset(args: Sequence[str]) -> int:
    from nemo_gym.cli.dataset import run

    return run(args)


def _test(args: Sequence[str]) -> int:
    from nemo_gym.cli.env_test import run_env_tests

    return run_env_tests(list(args))


def _init(args: Sequence[str]) -> int:
    from nemo_gym.cli.env_init import init_resources_server

    return init_resources_server(list(args))


COMMANDS: dict[str, Callable[[Sequence[str]], int]] = {
    "run": _run,
    "demo": _demo,
    "collect": _collect,
    "eval": _eval,
    "dataset": _dataset,
    "status": _status,
    "resolve": _resolve,
    "validate": _validate,
    "test": _test,
    "init": _init,
}


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] in ("-h", "--help", "help"):
        print(USAGE, end="")
        return 0
    command, overrides = args[0], args[1:]
    if command not in COMMANDS:
        print(f"Error: unknown command '{command}'.\n{USAGE}", file=sys.stderr, end="")
        return 2
    if any(arg in ("-h", "--help") for arg in overrides):
        detailed = _detailed_help(command, overrides)
        if detailed:
            print(detailed)
            return 0
        summary = next(line for line in USAGE.splitlines() if line.strip().startswith(command + " "))
        print(f"usage: gym {command} [+key=value ...]\n\n{summary.strip()}")
        return 0
    try:
        return COMMANDS[command](overrides)
    except ConfigError as error:
        print(f"Error: {_one_line(error)}", file=sys.stderr)
        return 1


def _one_line(error: ConfigError) -> str:
    """A config error fit for one line: for blocks that almost are servers, each block's problems without
    the YAML dump of the block that the library's message carries."""
    from nemo_gym.config_types import AlmostServerError

    if not isinstance(error, AlmostServerError):
        return str(error)
    reports = [
        line.removesuffix(".") for line in str(error).splitlines() if line.startswith("Server instance '")
    ]
    return "; ".join(reports) + ". Fix them, or set ++error_on_almost_servers=false to skip them."


def _detailed_help(command: str, args: Sequence[str]) -> str | None:
    """The full field list of commands whose arguments are a config model."""
    if command == "collect":
        from nemo_gym.cli.collect import help_text

        return help_text()
    if command == "eval" and args and args[0] == "aggregate":
        from nemo_gym.rollout_collection import ShardAggregationConfig

        return "usage: gym eval aggregate [+key=value ...]\n\n" + ShardAggregationConfig.help_text()
    if command == "eval" and args and args[0] == "profile":
        from nemo_gym.eval_profile import ProfileConfig

        return "usage: gym eval profile [+key=value ...]\n\n" + ProfileConfig.help_text()
    if command == "test":
        from nemo_gym.cli.env_test import TEST_FLAGS, EnvTestSettings

        flags = "\n".join(TEST_FLAGS.help_lines())
        return f"usage: gym test [flags] [+key=value ...]\n\n{EnvTestSettings.help_text()}\n\nFlags:\n{flags}"
    if command == "dataset" and args and args[0] in ("collate", "upload", "download", "rm"):
        from nemo_gym.cli.dataset import help_text

        return help_text(args)
    return None


def _alias(*command: str) -> Callable[[], None]:
    def entry_point() -> None:
        sys.exit(main([*command, *sys.argv[1:]]))

    return entry_point


def console_main() -> None:
    sys.exit(main())


ng_run = _alias("run")
ng_collect_rollouts = _alias("collect")
ng_aggregate_rollouts = _alias("eval", "aggregate")
ng_reward_profile = _alias("eval", "profile")
ng_dump_config = _alias("resolve")
ng_status = _alias("status")
ng_prepare_data = _alias("dataset", "collate")
ng_test = _alias("test")
ng_test_all = _alias("test")
ng_init_resources_server = _alias("init")
ng_upload_dataset_to_hf = _alias("dataset", "upload", "--storage", "hf")
ng_download_dataset_from_hf = _alias("dataset", "download", "--storage", "hf")
ng_upload_dataset_to_gitlab = _alias("dataset", "upload", "--storage", "gitlab")
ng_download_dataset_from_gitlab = _alias("dataset", "download", "--storage", "gitlab")
ng_delete_dataset_from_gitlab = _alias("dataset", "rm", "--storage", "gitlab")
