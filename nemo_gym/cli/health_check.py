"""`gym eval health-check`: with RUN_DIR, NeMo Gym 0.7's verdicts on a finished run's rollouts (files
only); without it, the pre-flight check of a deployment (its own, or the running one with --no-serve)."""

from __future__ import annotations

import sys

from nemo_gym.cli.deployment_check import check_deployment, check_timeout_s, report
from nemo_gym.cli.eval_run import check_no_serve, deployment_overrides
from nemo_gym.cli.flags import Invocation, UsageError, switch, value
from nemo_gym.cli.status import NoHeadServerError
from nemo_gym.collection.rollout_health import health_check_run_dir
from nemo_gym.config.errors import ConfigError
from nemo_gym.config.global_config import parse_global_config_dict
from nemo_gym.launch.launcher import Deployment, DeploymentError, run_until_stopped
from nemo_gym.serving.servers import ServerClient, configure_http_client_from, head_server_config_from

COMMAND = "gym eval health-check"
RUN_DIR_FLAGS = (
    value("--rollouts-file", metavar="PATH", help="RUN_DIR's results file (default rollouts.jsonl)"),
    value("--workers", metavar="N", help="processes judging rollouts (default min(cpus, 8))"),
    value("--ignore-checks", "--ignore", metavar="A,B", help="check ids to ignore, comma-separated"),
)
FLAGS = (
    *RUN_DIR_FLAGS,
    value("--timeout", key="health_check_timeout_s", metavar="SECONDS",
          help="deadline of each deployment check (default 60)"),
    switch("--json", help="machine-readable output"),
)  # fmt: skip


async def check_deployment_command(invocation: Invocation) -> int:
    """Without RUN_DIR: the checks of the running deployment (--no-serve), else of one of its own."""
    options = invocation.options
    given = [flag.names[0] for flag in RUN_DIR_FLAGS if options.get(flag.dest)]
    if given:
        raise UsageError(f"{COMMAND}: {', '.join(given)} need a RUN_DIR (the folder of a finished run)")
    if options.get("no_serve"):
        check_no_serve(invocation, COMMAND)
        return await check_running_deployment(invocation)
    return await check_own_deployment(invocation)


def check_run_dir(invocation: Invocation) -> int:
    """Exit 0 when no rollout and no task is unhealthy, else 1; a missing folder or file, a bad
    worker count or an unknown check id is one line and exit 2."""
    options = invocation.options
    if invocation.overrides:
        raise UsageError(
            f"{COMMAND} RUN_DIR reads files only: it takes no deployment flags or +key=value overrides "
            f"(got {' '.join(invocation.overrides)})"
        )
    workers = options.get("workers")
    if workers is not None and not (workers.isdigit() and int(workers) >= 1):
        raise UsageError(f"{COMMAND}: --workers must be a whole number >= 1, got {workers!r}")
    try:
        result = health_check_run_dir(
            options["run_dir"],
            rollout_file=options.get("rollouts_file"),
            workers=int(workers) if workers else None,
            ignored_checks=options.get("ignore_checks") or (),
            json_output=bool(options.get("json")),
        )
    except (FileNotFoundError, ValueError) as error:
        raise UsageError(f"{COMMAND}: {error}") from None
    return 0 if result.healthy else 1


async def check_running_deployment(invocation: Invocation) -> int:
    cfg = parse_global_config_dict(list(invocation.overrides))
    configure_http_client_from(cfg)
    try:
        client = ServerClient.load_from_global_config(head_server_config_from(cfg))
    except ValueError as error:
        raise ConfigError(str(error)) from None
    return await checked(client, check_timeout_s(cfg), bool(invocation.options.get("json")))


async def check_own_deployment(invocation: Invocation) -> int:
    """Start the selected deployment, check it, stop it."""
    try:
        deployment = Deployment(deployment_overrides(invocation))
    except DeploymentError as error:
        print(f"Error: {error}", file=sys.stderr, flush=True)
        return 1
    cfg = deployment.global_config_dict
    client = ServerClient(head_server_config=deployment.head_server_config, global_config_dict=cfg)
    timeout_s, as_json = check_timeout_s(cfg), bool(invocation.options.get("json"))
    try:
        return await run_until_stopped(deployment, lambda: checked(client, timeout_s, as_json))
    except DeploymentError as error:
        print(f"Error: {error}", file=sys.stderr, flush=True)
        return 1


async def checked(client: ServerClient, timeout_s: float, as_json: bool) -> int:
    """Print the checks of the deployment; 0 when all pass."""
    try:
        checks = await check_deployment(client, timeout_s)
    except NoHeadServerError as error:
        raise ConfigError(str(error)) from None
    print(report(checks, as_json), flush=True)
    return 0 if all(check.ok for check in checks) else 1
