"""Checks of an input file that need no server, run before `gym eval run` starts any: rows that could never
run (no request, a request the model servers would refuse, no agent of the config) and, when a replay
model plays recordings, tasks none of them covers. Each problem names the file and line; a few are listed.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf
from pydantic import ValidationError

from nemo_gym.collection.records import agent_map_with_agent_name, agent_name_of, mapped_agent
from nemo_gym.collection.routing import agent_for_task_source, agents_of
from nemo_gym.config.errors import ConfigError
from nemo_gym.config.jsonl import iter_jsonl
from nemo_gym.config.key_names import TASK_SOURCE_KEY_NAME
from nemo_gym.wire.episodes import is_materialized_task_row
from nemo_gym.wire.responses import NeMoGymResponseCreateParamsNonStreaming
from nemo_gym.wire.validation_errors import first_problem

MAX_PROBLEMS_LISTED = 5


def check_rows(input_path: Path, cfg: DictConfig, limit: int | None, agent_name: str | None) -> None:
    """ConfigError naming the rows of `input_path` that cannot run on the deployment of `cfg`."""
    agents = agents_of(cfg)
    try:
        agent_map = agent_map_with_agent_name(
            OmegaConf.to_container(cfg.get("agent_map") or DictConfig({})), agent_name
        )
    except ValueError as error:
        raise ConfigError(str(error)) from None
    problems = []
    for number, _, _, row in iter_jsonl(input_path, limit):
        problem = _row_problem(row, agents, agent_map)
        if problem is not None:
            problems.append(f"line {number}: {problem}")
    _raise_if_any(input_path, problems, "cannot run")


def _row_problem(row: Any, agents: Mapping[str, list[str]], agent_map: dict[str, str] | None) -> str | None:
    if not isinstance(row, dict):
        return f"a task row is a JSON object, not {type(row).__name__}"
    if is_materialized_task_row(row):
        return None
    try:
        NeMoGymResponseCreateParamsNonStreaming.model_validate(row.get("responses_create_params"))
    except ValidationError as error:
        return f"responses_create_params: {first_problem(error)}"
    agent = mapped_agent(row, agent_map) or agent_name_of(row)
    source = row.get(TASK_SOURCE_KEY_NAME)
    if agent is None and isinstance(source, str):
        agent = agent_for_task_source(source, agents)
    if agent is None:
        return "no agent_ref (and no +agent_name / --agent)"
    if agent not in agents:
        return f"agent {agent!r} is not in the config (agents: {', '.join(agents) or 'none'})"
    return None


def check_recordings(input_path: Path, recordings: Iterable[Path], limit: int | None) -> None:
    """ConfigError naming the tasks of `input_path` that no recording starts with (a replay would fail
    each of them after starting every server). A recording covers a task when its input begins with the
    task's: an agent may add messages before its first model call (a reset observation, say)."""
    recorded: set[PromptKey] = set()
    for path in recordings:
        for *_, row in iter_jsonl(path):
            key = prompt_key(row["responses_create_params"])
            recorded.update(key[:length] for length in range(1, len(key) + 1))
    problems = []
    for number, _, _, row in iter_jsonl(input_path, limit):
        params = row.get("responses_create_params") if isinstance(row, dict) else None
        if isinstance(params, dict) and prompt_key(params) not in recorded:
            problems.append(f"line {number}: {_first_words(params)}")
    _raise_if_any(input_path, problems, "have no recording to replay", "; record them with gym collect")


PromptKey = tuple[tuple[Any, str], ...]


def prompt_key(params: Mapping[str, Any]) -> PromptKey:
    """A request's input as (role, text) pairs: what a recording is matched by. Recordings keep the parsed
    request (defaults filled in), so the raw JSON of a task and of its recording differ."""
    messages = params.get("input")
    if isinstance(messages, str):
        return (("user", messages),)
    return tuple((message.get("role"), _text(message.get("content"))) for message in messages or [])


def _text(content: Any) -> str:
    if isinstance(content, list):
        return "".join(part.get("text", "") for part in content if isinstance(part, dict))
    return str(content)


def _first_words(params: Mapping[str, Any]) -> str:
    messages = params.get("input")
    text = messages if isinstance(messages, str) else _text((messages or [{}])[-1].get("content", ""))
    return repr(text[:60] + ("..." if len(text) > 60 else ""))


def _raise_if_any(input_path: Path, problems: list[str], what: str, advice: str = "") -> None:
    if not problems:
        return
    listed = "; ".join(problems[:MAX_PROBLEMS_LISTED])
    more = f"; and {len(problems) - MAX_PROBLEMS_LISTED} more" if len(problems) > MAX_PROBLEMS_LISTED else ""
    raise ConfigError(f"{input_path}: {len(problems)} row(s) {what}: {listed}{more}{advice}")
