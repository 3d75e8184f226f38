"""What each `gym` command runs once its flags are parsed: one function per command, importing the work it
starts only when called, so that `gym -h` and a typo stay instant."""

from __future__ import annotations

import importlib
import json
import sys
import textwrap
from collections.abc import Callable, Coroutine, Sequence
from pathlib import Path
from typing import Any

from nemo_gym.cli.flags import Invocation

INTERRUPTED_EXIT_CODE = 130


def _run_async(work: Coroutine[Any, Any, int]) -> int:
    """Run a command's coroutine, closing the pooled HTTP client before the loop ends."""
    import asyncio

    from nemo_gym.http.client import close_global_aiohttp_client

    async def run_then_close() -> int:
        try:
            return await work
        finally:
            await close_global_aiohttp_client()

    try:
        return asyncio.run(run_then_close())
    except KeyboardInterrupt:
        return _interrupted()


def _interrupted() -> int:
    """Ctrl-C before the launcher's own handling is in place: one line, no traceback."""
    print("Interrupted.", file=sys.stderr)
    return INTERRUPTED_EXIT_CODE


def start(invocation: Invocation) -> int:
    from nemo_gym.launch.launcher import Deployment, DeploymentError, run_until_stopped

    try:
        deployment = Deployment(invocation.overrides)
        return _run_async(run_until_stopped(deployment))
    except DeploymentError as error:
        print(f"Error: {error}", file=sys.stderr)
        return 1


def status(invocation: Invocation) -> int:
    from nemo_gym.cli.status import print_status

    return _run_async(print_status(invocation.overrides, as_json=bool(invocation.options.get("json"))))


def demo(invocation: Invocation) -> int:
    from nemo_gym.cli.demo import run_demo

    return _run_async(run_demo(invocation.overrides))


def collect(invocation: Invocation) -> int:
    from nemo_gym.cli.eval_run import check_dataset_choice, run_without_serving

    check_dataset_choice(invocation)
    return _run_async(run_without_serving(invocation))


def eval_run(invocation: Invocation) -> int:
    from nemo_gym.cli.eval_run import check_dataset_choice, check_no_serve, run_eval, run_without_serving

    check_dataset_choice(invocation)
    if invocation.options.get("no_serve"):
        check_no_serve(invocation)
        return _run_async(run_without_serving(invocation, preflight=True))
    return _run_async(run_eval(invocation))


def health_check(invocation: Invocation) -> int:
    """RUN_DIR selects the checks of a finished run's rollouts; without it, the deployment's."""
    from nemo_gym.cli.health_check import check_deployment_command, check_run_dir

    if invocation.options.get("run_dir"):
        return check_run_dir(invocation)
    return _run_async(check_deployment_command(invocation))


def view(invocation: Invocation) -> int:
    from nemo_gym.cli.view import run_view

    try:
        return run_view(invocation)
    except KeyboardInterrupt:  # uvicorn raises it again once it has stopped serving
        return _interrupted()


def show(invocation: Invocation) -> int:
    from nemo_gym.cli.view import run_show

    return run_show(invocation)


def aggregate(invocation: Invocation) -> int:
    from nemo_gym.collection.shards import aggregate_shards

    return _run_async(aggregate_shards(invocation.overrides))


def profile(invocation: Invocation) -> int:
    from nemo_gym.collection.eval_profile import run_profile

    return run_profile(invocation.overrides)


def reverify(invocation: Invocation) -> int:
    from nemo_gym.collection.reverification import reverify_rollouts

    return _run_async(reverify_rollouts(invocation.overrides))


def compare(invocation: Invocation) -> int:
    from nemo_gym.cli.compare import run_compare

    return run_compare(invocation)


def export(invocation: Invocation) -> int:
    from nemo_gym.collection.atif_export import run_export

    return run_export(invocation.overrides)


def prepare(invocation: Invocation) -> int:
    from nemo_gym.datasets.collation import prepare_benchmarks

    return prepare_benchmarks(invocation.overrides)


def resolve(invocation: Invocation) -> int:
    from nemo_gym.config.global_config import parse_global_config_dict
    from nemo_gym.config.masking import to_resolved_yaml

    print(to_resolved_yaml(parse_global_config_dict(invocation.overrides)), end="")
    return 0


def validate(invocation: Invocation) -> int:
    """Everything `gym env start` checks before and while its servers start, without serving anything."""
    import asyncio

    from nemo_gym.config.discovery import require_server_instances
    from nemo_gym.config.global_config import parse_global_config_dict
    from nemo_gym.launch.launcher import check_server_configs, check_startable, readiness_deadline_from

    cfg = parse_global_config_dict(invocation.overrides)
    instances = require_server_instances(cfg)
    check_startable(cfg, instances, Path.cwd())
    deadline_s = readiness_deadline_from(cfg)
    asyncio.run(check_server_configs(cfg, instances, Path.cwd(), deadline_s))
    print(f"Config is valid: {len(instances)} server instance(s).")
    return 0


def dataset(subcommand: str) -> Callable[[Invocation], int]:
    def run(invocation: Invocation) -> int:
        from nemo_gym.cli.dataset import run

        return run(subcommand, invocation)

    return run


def dataset_help(subcommand: str) -> Callable[[Sequence[str]], str]:
    def details(args: Sequence[str]) -> str:
        from nemo_gym.cli.dataset import help_text

        return help_text(subcommand, args)

    return details


def env_test(invocation: Invocation) -> int:
    from nemo_gym.cli.env_test import run_env_tests

    return run_env_tests(invocation.overrides)


def env_test_help(_: Sequence[str]) -> str:
    from nemo_gym.cli.env_test import EnvTestSettings

    return EnvTestSettings.help_text()


def env_init(invocation: Invocation) -> int:
    from nemo_gym.cli.env_init import init_resources_server

    names = [invocation.options.get(key) for key in ("name", "resources_server")]
    return init_resources_server([name for name in names if name], invocation.overrides)


def lister(what: str) -> Callable[[Invocation], int]:
    """`gym list <what> [NAME]`: every asset of that kind, or the one named."""

    def run(invocation: Invocation) -> int:
        from nemo_gym.cli.selectors import listed

        if what == "benchmarks":
            return list_benchmarks(invocation)
        assets = listed(what, invocation.options.get("search_dir") or [])
        name = invocation.options.get("name")
        return _print_assets(
            what, [asset for asset in assets if asset.name == name] if name else assets, invocation
        )

    return run


def list_benchmarks(invocation: Invocation) -> int:
    """`gym list benchmarks [NAME]`: each benchmark, each flavor on a line after its folder's, with the
    environment that scores it, the size of its prepared split (when known) and the data's license (from
    its manifest). NAME is a benchmark, a folder with its flavors, or one flavor."""
    from nemo_gym.cli.selectors import search_roots
    from nemo_gym.datasets.benchmarks import benchmark_flavors, discover_benchmarks
    from nemo_gym.text.tables import format_table

    folders = discover_benchmarks(search_roots(invocation.options.get("search_dir") or []))
    name = invocation.options.get("name")
    benchmarks = [
        benchmark
        for folder in folders
        for benchmark in [folder, *benchmark_flavors(folder)]
        if name in (None, benchmark.name, benchmark.flavor_of)
    ]
    if invocation.options.get("json"):
        print(json.dumps([benchmark.listing() for benchmark in benchmarks], indent=2))
        return 0
    if not benchmarks:
        print(f"No benchmark named {name}." if name else "No benchmarks found.")
        return 0
    rows = [("NAME", "ENVIRONMENT", "ROWS", "REPEATS", "LICENSE", "MEASURES")]
    for benchmark in benchmarks:
        manifest = benchmark.manifest
        environment, size, measures = (
            (manifest.environment, str(manifest.rows or "?"), manifest.measures)
            if manifest
            else ("?", "?", "(no manifest)")
        )
        license_name = benchmark.dataset.license or "?"
        rows.append((benchmark.name, environment, size, str(benchmark.num_repeats), license_name, measures))
    print(format_table(rows))
    return 0


def search(invocation: Invocation) -> int:
    """`gym search [TYPE] QUERY`: the assets of a kind (default environments) whose name or description
    matches."""
    from nemo_gym.cli.flags import UsageError
    from nemo_gym.cli.selectors import LISTED_KINDS, listed, matching

    words = invocation.options.get("words") or []
    if len(words) not in (1, 2) or (len(words) == 2 and words[0] not in LISTED_KINDS):
        raise UsageError(f"gym search [{'|'.join(LISTED_KINDS)}] QUERY")
    what, query = (words[0], words[1]) if len(words) == 2 else ("environments", words[0])
    assets = matching(listed(what, invocation.options.get("search_dir") or []), query)
    return _print_assets(what, assets, invocation)


def _print_assets(what: str, assets: list[Any], invocation: Invocation) -> int:
    if invocation.options.get("json"):
        print(json.dumps([asset.as_json() for asset in assets], indent=2))
    elif not assets:
        print(f"No {what} found.")
    else:
        print(asset_table(assets))
    return 0


def asset_table(assets: list[Any]) -> str:
    """The table `gym list` prints (`gym env publish` shows a folder's row of it)."""
    from nemo_gym.text.tables import format_table

    rows = [("NAME", "CONFIGS", "DESCRIPTION")]
    rows += [
        (
            asset.name,
            ",".join(asset.configs),
            textwrap.shorten(asset.description, 80, placeholder=" ...", break_on_hyphens=False),
        )
        for asset in assets
    ]
    return format_table(rows)


def publish(invocation: Invocation) -> int:
    from nemo_gym.cli.env_publish import run_publish

    return run_publish(invocation)


def settings_help(model_path: str) -> Callable[[Sequence[str]], str]:
    """The field table of a command's settings model, imported only when help is shown."""

    def details(_: Sequence[str]) -> str:
        module, _, name = model_path.rpartition(".")
        return getattr(importlib.import_module(module), name).help_text()

    return details
