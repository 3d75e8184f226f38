"""The `gym` command: NeMo Gym 0.4's command tree (`gym env start`, `gym eval run`, ...), the short forms
Gym had before (`gym run`, `gym collect`, ...), and the legacy `ng_*` scripts.

Each command parses its flags with argparse (`gym <command> -h` lists them) and turns them into config
overrides; any `+key=value` / `++key=value` after the flags passes through. A mistake on the command line
is one line on stderr and exit code 2; a config mistake is one line and exit code 1; never a traceback.
"""

from __future__ import annotations

import difflib
import importlib
import json
import os
import platform
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from nemo_gym import EXTRA_ROOTS_ENV_VAR_NAME
from nemo_gym.cli import commands
from nemo_gym.cli.collect import COLLECT_FLAGS, DATASET_FLAGS, collection_help, eval_run_help
from nemo_gym.cli.flags import (
    DEPLOYMENT_FLAGS,
    SEARCH_DIR,
    Command,
    UsageError,
    help_requested,
    repeated,
    switch,
    value,
)
from nemo_gym.config.errors import ConfigError

USAGE_EXIT_CODE = 2
JSON_FLAG = switch("--json", help="machine-readable output")
VIEW_POSITIONAL = (
    "jsonl_fpath",
    "the results file (what gym collect / gym eval run wrote as output_jsonl_fpath)",
)


def _from(module: str, name: str) -> Any:
    """A name of a CLI module imported only when used: the commands' own modules load what their work
    needs, and `gym -h`, `gym --version` and `gym list` must not pay for that."""
    return getattr(importlib.import_module(f"nemo_gym.cli.{module}"), name)


# ---- the command tree ------------------------------------------------------------------------------------

NO_SERVE = switch(
    "--no-serve", help="use the deployment already running (gym env start) instead of one of its own"
)
REPLAY = repeated(
    "--replay",
    metavar="FILE",
    help="play the model turns recorded in FILE (replay_model) instead of calling a model; repeatable",
)
EVAL_RUN_FLAGS = (*DEPLOYMENT_FLAGS, REPLAY, NO_SERVE, *DATASET_FLAGS, *COLLECT_FLAGS)

START = Command(
    "env start", "Start every server of a deployment; Ctrl-C stops them.", commands.start, DEPLOYMENT_FLAGS
)
STATUS = Command(
    "env status",
    "The instances of a running deployment and whether each answers.",
    commands.status,
    (JSON_FLAG,),
)
RESOLVE = Command(
    "env resolve",
    "Print the merged config, interpolations resolved, secrets masked.",
    commands.resolve,
    DEPLOYMENT_FLAGS,
)
VALIDATE = Command(
    "env validate",
    "Check a config as `gym env start` would, without serving anything.",
    commands.validate,
    DEPLOYMENT_FLAGS,
)
INIT = Command(
    "env init",
    "Create resources_servers/<name> from a template whose tests pass at once.",
    commands.env_init,
    (value("--resources-server", help="the new folder's name"),),
    positional=("name", "the new folder's name (resources_servers/<name>)"),
)
TEST = Command(
    "env test",
    "Run a server folder's tests and check its example data; every folder without a selection.",
    commands.env_test,
    details=commands.env_test_help,
    more_flags=lambda: _from("env_test", "TEST_FLAGS"),
)
NAMED_RESOURCES_SERVER = value(
    "--resources-server", metavar="NAME", help="the resources server folder's name"
)
SCHEMA = Command(
    "env schema",
    "Print the JSON Schema of a resources server's task rows.",
    lambda invocation: _from("env_tools", "print_schema")(invocation),
    (NAMED_RESOURCES_SERVER, SEARCH_DIR),
)
PACKAGES = Command(
    "env packages",
    "List the packages of the environment the servers run in (one for all of them).",
    lambda invocation: _from("env_tools", "list_packages")(invocation),
    (
        NAMED_RESOURCES_SERVER,
        SEARCH_DIR,
        switch("--outdated", help="only those with a newer release"),
        JSON_FLAG,
    ),
)
PREFETCH = Command(
    "env prefetch",
    "Check that the environment has every package the selected servers need, without starting them.",
    lambda invocation: _from("env_tools", "prefetch")(invocation),
    DEPLOYMENT_FLAGS,
)
PUBLISH = Command(
    "env publish",
    "Check offline that a server folder is ready for the catalog, and show how the catalog finds it.",
    commands.publish,
    (JSON_FLAG, SEARCH_DIR),
    positional=("name", "the server folder's name (without it: every folder under the --search-dir roots)"),
    more_flags=lambda: _from("env_publish", "PUBLISH_FLAGS"),
)
DEV_TEST = Command(
    "dev test",
    "Run Gym's own test suite (make test without the lint).",
    lambda invocation: _from("env_tools", "dev_test")(invocation),
)
EVAL_RUN = Command(
    "eval run",
    "Start the deployment, run its dataset (or --input) through the agent, write results and metrics, "
    "print the summary and stop everything. --no-serve uses a running deployment.",
    commands.eval_run,
    EVAL_RUN_FLAGS,
    eval_run_help,
)
COLLECT = Command(
    "collect",
    "Run a JSONL dataset through the agents of a running deployment (= gym eval run --no-serve).",
    commands.collect,
    (*COLLECT_FLAGS, *DATASET_FLAGS),
    collection_help,
)
AGGREGATE = Command(
    "eval aggregate",
    "Merge sharded results and aggregate them through a running deployment.",
    commands.aggregate,
    (
        value("-i", "--input-glob", key="input_glob", metavar="GLOB", help="result files (comma-separated globs)"),
        value("-o", "--output", key="output_jsonl_fpath", metavar="FILE", help="merged results / metrics name"),
        switch("--merge-shards", key="merge_shards", help="also write every result into --output"),
    ),
    commands.settings_help("nemo_gym.rollout_collection.ShardAggregationConfig"),
    more_flags=lambda: _from("collect", "HEALTH_CHECK_FLAGS"),
)  # fmt: skip
PROFILE = Command(
    "eval profile",
    "Per-task statistics of collected rollouts, from the files alone.",
    commands.profile,
    (
        value("--inputs", key="inputs_jsonl_fpath", metavar="FILE", help="<stem>_materialized_inputs.jsonl"),
        value("--rollouts", key="rollouts_jsonl_fpath", metavar="FILE", help="the results file"),
        switch("--allow-partial", key="allow_partial_rollouts", help="profile even if results are missing"),
    ),
    commands.settings_help("nemo_gym.collection.eval_profile.ProfileConfig"),
)  # fmt: skip
REVERIFY = Command(
    "eval reverify",
    "Score stored rollouts again through a running deployment's resources servers, without the model.",
    commands.reverify,
    details=commands.settings_help("nemo_gym.collection.reverification.ReverifyConfig"),
    more_flags=lambda: _from("stored_rollouts", "REVERIFY_FLAGS"),
)
COMPARE = Command(
    "eval compare",
    "Compare a candidate run with a baseline run task by task: reward deltas, a paired test, a verdict.",
    commands.compare,
    positional=("paths", "BASELINE.jsonl CANDIDATE.jsonl (or --baseline / --candidates)", "*"),
    more_flags=lambda: _from("compare", "COMPARE_FLAGS"),
)
EXPORT = Command(
    "eval export",
    "Write a results file's rollouts as ATIF trajectories (one JSON file each) with a manifest.",
    commands.export,
    details=commands.settings_help("nemo_gym.collection.atif_export.ExportAtifConfig"),
    more_flags=lambda: _from("stored_rollouts", "EXPORT_FLAGS"),
)
HEALTH_CHECK = Command(
    "eval health-check",
    "Without RUN_DIR: check that every server, model and environment of a deployment works (before a long "
    "run). With RUN_DIR: judge a finished run's rollouts (NeMo Gym 0.7's rollout health checks).",
    commands.health_check, (*DEPLOYMENT_FLAGS, REPLAY, NO_SERVE), more_flags=lambda: _from("health_check", "FLAGS"),
    positional=("run_dir", "a finished run's folder: selects the rollout checks"),
)  # fmt: skip
PREPARE = Command(
    "eval prepare",
    "Run the prepare script of every benchmark dataset of the selected configs.",
    commands.prepare,
    DEPLOYMENT_FLAGS,
    commands.settings_help("nemo_gym.datasets.collation.PrepareSettings"),
)
DEMO = Command(
    "demo",
    "Start the demo deployment, run its example tasks, print each reward, stop (no API key needed).",
    commands.demo,
)

VIEW = Command(
    "view",
    "Look at a results file's rollouts in the browser (a local page), or write one HTML file with --static.",
    commands.view,
    details=lambda args: _from("view", "view_help")(args),
    positional=VIEW_POSITIONAL,
    more_flags=lambda: _from("view", "VIEW_FLAGS"),
)
SHOW = Command(
    "show",
    "Print a results file's rollouts readably: conversation, tool calls, verify fields.",
    commands.show,
    details=lambda args: _from("view", "show_help")(args),
    positional=VIEW_POSITIONAL,
    more_flags=lambda: _from("view", "SHOW_FLAGS"),
)


def _listing(what: str) -> Command:
    return Command(
        f"list {what}",
        f"The {what.replace('-', ' ')} this installation offers.",
        commands.lister(what),
        (JSON_FLAG, SEARCH_DIR),
        positional=("name", "only the one of that name"),
    )


SEARCH = Command(
    "search",
    "Environments (or benchmarks, agents, models, resources-servers) whose name or description matches.",
    commands.search,
    (JSON_FLAG, SEARCH_DIR),
    positional=("words", "[TYPE] QUERY: what to look for, and among which kind (default environments)", "*"),
)


def _dataset_command(subcommand: str, summary: str) -> Command:
    return Command(
        f"dataset {subcommand}",
        summary,
        commands.dataset(subcommand),
        details=commands.dataset_help(subcommand),
        more_flags=lambda: _from("dataset", "FLAGS")[subcommand],
    )


Tree = dict[str, "Command | Tree"]
TREE: Tree = {
    "env": {
        "start": START,
        "status": STATUS,
        "resolve": RESOLVE,
        "validate": VALIDATE,
        "init": INIT,
        "test": TEST,
        "schema": SCHEMA,
        "packages": PACKAGES,
        "prefetch": PREFETCH,
        "publish": PUBLISH,
    },
    "dev": {"test": DEV_TEST},
    "eval": {
        "run": EVAL_RUN,
        "prepare": PREPARE,
        "aggregate": AGGREGATE,
        "profile": PROFILE,
        "reverify": REVERIFY,
        "compare": COMPARE,
        "export": EXPORT,
        "health-check": HEALTH_CHECK,
    },
    "dataset": {
        "collate": _dataset_command("collate", "Check datasets, write metrics files and per-type JSONL."),
        "upload": _dataset_command("upload", "Upload a JSONL dataset to Hugging Face or GitLab."),
        "download": _dataset_command("download", "Download a dataset from Hugging Face or GitLab."),
        "rm": _dataset_command("rm", "Delete a dataset from the GitLab registry (asks first)."),
        "migrate": _dataset_command(
            "migrate", "Move a dataset from GitLab to Hugging Face (upload, then delete)."
        ),
        "render": _dataset_command("render", "Apply a prompt config to a JSONL file's rows."),
    },
    "list": {
        what: _listing(what)
        for what in (
            "environments",
            "agents",
            "models",
            "benchmarks",
            "resources-servers",
            "environment-servers",
        )
    },
    "search": SEARCH,
    # The short forms of earlier Gym releases.
    "run": START,
    "status": STATUS,
    "resolve": RESOLVE,
    "validate": VALIDATE,
    "init": INIT,
    "test": TEST,
    "collect": COLLECT,
    "demo": DEMO,
    "view": VIEW,
    "show": SHOW,
}
SHORT_FORMS = ("run", "status", "resolve", "validate", "init", "test", "collect")


def version_info() -> dict[str, str]:
    from importlib import metadata

    try:
        version = metadata.version("nemo-gym")
    except metadata.PackageNotFoundError:
        version = "unknown"
    return {
        "gym": version,
        "python": platform.python_version(),
        "install_root": str(Path(__file__).parents[2]),
    }


def _print_version(as_json: bool) -> int:
    info = version_info()
    print(json.dumps(info, indent=2) if as_json else f"gym {info['gym']} (Python {info['python']})")
    return 0


def _group_help(path: list[str], node: Tree) -> str:
    prefix = " ".join(["gym", *path])
    lines = [f"usage: {prefix} <command> [flags] [+key=value ...]", "", "commands:"]
    for name, child in node.items():
        if path == [] and name in SHORT_FORMS:
            continue
        summary = child.summary if isinstance(child, Command) else ", ".join(child)
        lines.append(f"  {name:<10} {summary}")
    if not path:
        lines += [
            "",
            "short forms: gym run = gym env start, gym collect ~ gym eval run --no-serve, and gym status|resolve|",
            "validate|init|test = gym env <same>.",
            "options: -h/--help, --version [--json], -v/--verbose and --json (before or after the command).",
        ]
    lines.append(f"\n`{prefix} <command> -h` shows a command's flags.")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    try:
        return _dispatch(args)
    except UsageError as error:
        print(f"Error: {error}", file=sys.stderr)
        return USAGE_EXIT_CODE
    except ConfigError as error:
        print(f"Error: {_one_line(error)}", file=sys.stderr)
        return 1
    except SystemExit as exit_:  # argparse's -h, and +h=true through a settings model
        return exit_.code if isinstance(exit_.code, int) else 0


def _dispatch(args: list[str]) -> int:
    leading: list[str] = []  # -v / --json before the command: they belong to the command
    while args[:1] and args[0] in ("-v", "--verbose", "--json"):
        leading.append(args.pop(0))
    if args[:1] == ["--version"]:
        return _print_version("--json" in [*leading, *args[1:]])
    node: Tree | Command = TREE
    path: list[str] = []
    while isinstance(node, dict):
        if not args or args[0] in ("-h", "--help", "help"):
            print(_group_help(path, node))
            return 0 if args or not path else USAGE_EXIT_CODE
        name = args.pop(0)
        if name not in node:
            raise UsageError(_unknown_name_message(path, name, node))
        node, path = node[name], [*path, name]
    if "--json" in leading and not any("--json" in flag.names for flag in node.all_flags):
        raise UsageError(f"--json is not supported by this command; gym {node.name} prints no JSON")
    if help_requested(args):
        print(node.help_text(args), end="")
        return 0
    invocation = node.parse([*args, *leading])
    _export_search_dirs(invocation.options.get("search_dir") or [])
    return node.run(invocation)


def _export_search_dirs(search_dirs: list[str]) -> None:
    """`--search-dir` roots join NeMo Gym 0.7's NEMO_GYM_EXTRA_ROOTS for this command and the servers it
    starts, so a server folder found there is also started from there."""
    if search_dirs:
        earlier = os.environ.get(EXTRA_ROOTS_ENV_VAR_NAME)
        absolute = [str(Path(folder).expanduser().resolve()) for folder in search_dirs]
        os.environ[EXTRA_ROOTS_ENV_VAR_NAME] = os.pathsep.join(filter(None, [*absolute, earlier]))


def _unknown_name_message(path: list[str], name: str, node: Tree) -> str:
    where = " ".join(["gym", *path])
    close = difflib.get_close_matches(name, list(node), n=1, cutoff=0.5)
    hint = f"did you mean '{close[0]}'?" if close else f"choose from {', '.join(node)}"
    return f"{where}: unknown command '{name}'; {hint}"


def _one_line(error: ConfigError) -> str:
    """A config error fit for one line: for blocks that almost are servers, each block's problems without
    the YAML dump of the block that the library's message carries."""
    from nemo_gym.config.errors import AlmostServerError

    if not isinstance(error, AlmostServerError):
        return str(error)
    reports = [
        line.removesuffix(".") for line in str(error).splitlines() if line.startswith("Server instance '")
    ]
    return "; ".join(reports) + ". Fix them, or set ++error_on_almost_servers=false to skip them."


def console_main() -> None:
    sys.exit(main())


# NeMo Gym's script names (`ng_<name>`, also spelt `nemo_gym_<name>`) and the command each one runs.
LEGACY_COMMANDS: dict[str, tuple[str, ...]] = {
    "run": ("env", "start"),
    "status": ("env", "status"),
    "dump_config": ("env", "resolve"),
    "validate": ("env", "validate"),
    "pip_list": ("env", "packages"),
    "test": ("env", "test"),
    "test_all": ("env", "test", "--all"),
    "dev_test": ("dev", "test"),
    "init_resources_server": ("env", "init"),
    "collect_rollouts": ("eval", "run", "--no-serve"),
    "e2e_collect_rollouts": ("eval", "run"),
    "aggregate_rollouts": ("eval", "aggregate"),
    "reward_profile": ("eval", "profile"),
    "prepare_benchmark": ("eval", "prepare"),
    "list_benchmarks": ("list", "benchmarks"),
    "prepare_data": ("dataset", "collate"),
    "materialize_prompts": ("dataset", "render"),
    "upload_dataset_to_hf": ("dataset", "upload", "--storage", "hf"),
    "download_dataset_from_hf": ("dataset", "download", "--storage", "hf"),
    "upload_dataset_to_gitlab": ("dataset", "upload", "--storage", "gitlab"),
    "download_dataset_from_gitlab": ("dataset", "download", "--storage", "gitlab"),
    "delete_dataset_from_gitlab": ("dataset", "rm", "--storage", "gitlab"),
    "gitlab_to_hf_dataset": ("dataset", "migrate"),
    "viewer": ("view",),
    "version": ("--version",),
    "help": ("--help",),
}
LEGACY_PREFIXES = ("ng_", "nemo_gym_")
REINSTALL_HINT = (
    "Gym runs every server in one virtual environment; rebuild it with `make clean && make test` "
    "(or `pip install -e '.[dev]'` in your own environment)."
)


def legacy_main() -> None:
    """Every `ng_*` / `nemo_gym_*` script: the command of its name, after one line naming it."""
    script = Path(sys.argv[0]).name
    name = next((script[len(prefix) :] for prefix in LEGACY_PREFIXES if script.startswith(prefix)), script)
    sys.exit(_run_legacy(name, script))


def legacy_entry(name: str) -> Callable[[], None]:
    """The console function of NeMo Gym's `ng_<name>` script, for code that calls it from Python."""

    def entry() -> None:
        sys.exit(_run_legacy(name, f"ng_{name}"))

    return entry


def _run_legacy(name: str, script: str) -> int:
    if name == "reinstall":
        print(REINSTALL_HINT, file=sys.stderr)
        return 0
    if name not in LEGACY_COMMANDS:
        print(f"Error: {script} is not a NeMo Gym command Gym knows; see gym -h", file=sys.stderr)
        return 1
    command = LEGACY_COMMANDS[name]
    print(f"{script} is deprecated: it runs `gym {' '.join(command)}`.", file=sys.stderr)
    return main([*command, *sys.argv[1:]])
