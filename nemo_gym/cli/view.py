"""`gym view` (a page in the browser, or one HTML file with --static) and `gym show` (the terminal) for
the rollouts of a results file."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TypeVar

from pydantic import Field

from nemo_gym.cli.flags import Invocation, override_value, switch, value
from nemo_gym.config.cli_models import BaseNeMoGymCLIConfig
from nemo_gym.config.errors import ConfigError
from nemo_gym.config.global_config import parse_global_config_dict
from nemo_gym.config.settings import command_settings, locate_data_file
from nemo_gym.rollout_viewer.index import RolloutIndex, RolloutQuery

RESULTS_HELP = "the results file (what gym collect / gym eval run wrote as output_jsonl_fpath)"


class ViewSettings(BaseNeMoGymCLIConfig):
    """Look at the rollouts of a results file in a browser: a local page (127.0.0.1) with filters, search
    and every rollout's conversation, or one self-contained HTML file with `static_html_fpath`."""

    jsonl_fpath: str = Field(description=RESULTS_HELP)
    static_html_fpath: str | None = Field(default=None, description="write the page to this file instead")
    host: str = Field(default="127.0.0.1", description="address to serve on")
    port: int = Field(default=0, ge=0, le=65535, description="port to serve on (0: any free port)")
    max_rollouts: int = Field(default=1000, ge=1, description="rollouts a static page carries")
    pass_threshold: float = Field(default=1.0, description="a rollout passes with at least this reward")


class ShowSettings(BaseNeMoGymCLIConfig):
    """Print the rollouts of a results file readably: conversation, tool calls, verify fields."""

    jsonl_fpath: str = Field(description=RESULTS_HELP)
    task: int | None = Field(default=None, ge=0, description="only this task index")
    failed: bool = Field(
        default=False, description="only rollouts that failed (no result: an error, a timeout)"
    )
    max_reward: float | None = Field(
        default=None,
        allow_inf_nan=False,
        description="only rollouts with a reward at most this (0: the wrong ones)",
    )
    offset: int = Field(default=0, ge=0, description="rollouts to skip")
    limit: int = Field(default=10, ge=0, description="rollouts to print (0: all)")
    full: bool = Field(default=False, description="print long texts whole")
    max_chars: int = Field(default=2000, ge=1, description="longest text printed without --full")


VIEW_FLAGS = (
    value("--static", key="static_html_fpath", metavar="OUT.html", help="write one self-contained HTML file"),
    value("--host", key="host", help="address to serve on (default 127.0.0.1)"),
    value("--port", key="port", help="port to serve on (default: any free port)"),
    value("--max-rollouts", key="max_rollouts", metavar="N", help="rollouts a --static page carries (1000)"),
    value("--pass-threshold", key="pass_threshold", metavar="R", help="reward that counts as a pass (1.0)"),
)
SHOW_FLAGS = (
    value("--task", key="task", metavar="N", help="only this task index"),
    switch("--failed", key="failed", help="only rollouts that failed: no result (an error, a timeout)"),
    value(
        "--max-reward",
        key="max_reward",
        metavar="R",
        help="only rollouts rewarded at most R (0: the wrong ones)",
    ),
    value("--offset", key="offset", metavar="N", help="rollouts to skip"),
    value("--limit", key="limit", metavar="N", help="rollouts to print (default 10; 0: all)"),
    switch("--full", key="full", help="print long texts whole"),
)


SettingsT = TypeVar("SettingsT", ViewSettings, ShowSettings)


def _settings(model: type[SettingsT], invocation: Invocation) -> SettingsT:
    overrides = list(invocation.overrides)
    if invocation.options.get("jsonl_fpath"):
        overrides.insert(0, f"++jsonl_fpath={override_value(invocation.options['jsonl_fpath'])}")
    return command_settings(model, parse_global_config_dict(overrides))


def _index(path: str, pass_threshold: float = 1.0) -> RolloutIndex:
    return RolloutIndex(locate_data_file(path, "jsonl_fpath"), pass_threshold)


def run_view(invocation: Invocation) -> int:
    settings = _settings(ViewSettings, invocation)
    index = _index(settings.jsonl_fpath, settings.pass_threshold)
    if settings.static_html_fpath:
        from nemo_gym.rollout_viewer.static_page import write_static_page

        destination = Path(settings.static_html_fpath)
        try:
            carried = write_static_page(index, destination, settings.max_rollouts)
        except OSError as error:
            raise ConfigError(
                f"static_html_fpath: cannot write {destination} ({error.strerror or error}); choose another file"
            ) from None
        held = f"{carried} of {len(index.entries)}" if carried < len(index.entries) else str(carried)
        print(f"Wrote {destination} ({held} rollouts); open it in any browser.")
        return 0
    from nemo_gym.rollout_viewer.server import serve_viewer

    try:
        serve_viewer(index, settings.host, settings.port)
    except OSError as error:
        raise ConfigError(
            f"cannot listen on {settings.host}:{settings.port} ({error.strerror or error}); "
            "choose another --port, or leave it unset for any free port"
        ) from None
    return 0


def run_show(invocation: Invocation) -> int:
    from nemo_gym.rollout_viewer.terminal import print_rollouts

    settings = _settings(ShowSettings, invocation)
    query = RolloutQuery(
        task=settings.task,
        failed=True if settings.failed else None,
        reward_max=settings.max_reward,
        offset=settings.offset,
    )
    print_rollouts(
        _index(settings.jsonl_fpath),
        query,
        settings.limit or None,
        None if settings.full else settings.max_chars,
    )
    return 0


def view_help(_: Sequence[str]) -> str:
    return ViewSettings.help_text()


def show_help(_: Sequence[str]) -> str:
    return ShowSettings.help_text()
