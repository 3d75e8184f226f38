"""`gym eval reverify`: score stored rollouts again through a running deployment, without the model.

After a verifier fix, or to check that recorded rewards still hold, each stored rollout goes through the
resources server the way its agent sent it: `/seed_session` with the row, the recorded tool calls replayed
in order (so a stateful environment reaches the state the rollout left behind; their answers are not
compared), then `/verify` with the row and the recorded response. No model is called.

The rescored rollouts keep the stored fields, take the new verify answer, and carry the stored reward as
`_ng_previous_reward`; failures go to `<output stem>_failures.jsonl` with their class, as in collection, and
the rescored results are aggregated per agent into `<output stem>_aggregate_metrics.json`.

NeMo Gym 0.7's settings are accepted: `rollouts_jsonl_fpath` / `materialized_inputs_jsonl_fpath` (the
names of `input_jsonl_fpath` / `inputs_jsonl_fpath`), `limit`, `resume_from_cache`, `judge_failed_only` with
`append`, `disable_aggregation` and `force`. Its guard, `GET /reverify_mode` on every resources server
involved, applies here only with `skip_tool_replay`: replaying the tool calls rebuilds a stateful
environment's session, which is why 0.7 needs the guard at all. A server that does not answer `stateless`
is then refused unless `force`, and the output files of a forced run are named `unsafe_<name>`.

With `input_format: atif` the stored rollouts are an ATIF export's (`gym eval export --format atif`): each
file its manifest lists is checked against its hash and turned back into the rollout's response
(`nemo_gym.collection.atif_export.read_manifest`); the run's materialized inputs supply the rows.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import aiohttp
import orjson
from pydantic import Field, model_validator

from nemo_gym.collection.aggregation import aggregate_results
from nemo_gym.collection.atif_export import read_manifest
from nemo_gym.collection.paths import CollectionPaths, refuse_to_replace
from nemo_gym.collection.pipeline import completed_in_any_order
from nemo_gym.collection.records import agent_name_of, error_message, failure_record, status_failure_class
from nemo_gym.config.cli_models import BaseNeMoGymCLIConfig, UploadRolloutsConfigMixin
from nemo_gym.config.discovery import get_first_server_config_dict
from nemo_gym.config.errors import ConfigError
from nemo_gym.config.global_config import parse_global_config_dict
from nemo_gym.config.jsonl import (
    FAILURE_CLASS_KEY,
    ROLLOUT_INDEX_KEY,
    TASK_INDEX_KEY,
    LineAppender,
    drop_torn_tail,
    iter_jsonl,
    rollout_key,
    row_at,
)
from nemo_gym.config.server_refs import AGENT_REF_KEY
from nemo_gym.config.settings import command_settings, locate_data_file
from nemo_gym.exporters import export_results, open_exporters
from nemo_gym.http.client import (
    DeadlineExceededError,
    RequestFailedError,
    RetryPolicy,
    default_retry_policy,
    request,
    response_cookies,
)
from nemo_gym.serving.servers import ServerClient, configure_http_client_from, head_server_config_from

PREVIOUS_REWARD_KEY = "_ng_previous_reward"
JUDGE_FAILURE_KEY = "judge_failure"
STAMPED_KEYS = (TASK_INDEX_KEY, ROLLOUT_INDEX_KEY, AGENT_REF_KEY)
DEFAULT_IN_FLIGHT = 64
# What collection added to the agent's answer, or verify wrote: not part of the row sent back to /verify.
NOT_SENT_TO_VERIFY = ("reward", PREVIOUS_REWARD_KEY)


class ReverifyConfig(BaseNeMoGymCLIConfig, UploadRolloutsConfigMixin):
    """Score stored rollouts again through a running deployment's resources servers (no model call):
    seed a session, replay the recorded tool calls, verify the recorded response."""

    input_jsonl_fpath: str | None = Field(
        default=None, description="stored rollouts: a results file of gym collect / eval run"
    )
    rollouts_jsonl_fpath: str | None = Field(
        default=None, description="NeMo Gym 0.7's name of input_jsonl_fpath"
    )
    materialized_inputs_jsonl_fpath: str | None = Field(
        default=None, description="NeMo Gym 0.7's name of inputs_jsonl_fpath"
    )
    inputs_jsonl_fpath: str | None = Field(
        default=None,
        description="the run's materialized inputs, whose task fields verify needs (default: "
        "<input stem>_materialized_inputs.jsonl when it exists, else the stored rollouts' own fields)",
    )
    output_jsonl_fpath: str = Field(description="where the rescored rollouts go")
    resources_server_name: str | None = Field(
        default=None, description="resources server instance (default: the one each rollout's agent uses)"
    )
    num_samples_in_parallel: int | None = Field(default=None, ge=1, description="rollouts rescored at once")
    skip_tool_replay: bool = Field(default=False, description="verify without replaying the tool calls")
    rollout_timeout_s: float | None = Field(default=None, gt=0, description="deadline of one rescoring")
    overwrite: bool = Field(default=False, description="replace the rollouts already in the output file")
    limit: int | None = Field(default=None, ge=0, description="rescore only the first N stored rollouts")
    resume_from_cache: bool = Field(
        default=False, description="keep the rollouts the output already has and rescore the others"
    )
    judge_failed_only: bool = Field(
        default=False, description="rescore only the rollouts whose judgment failed (`judge_failure` set)"
    )
    append: bool = Field(default=False, description="with judge_failed_only: add to the output file")
    disable_aggregation: bool = Field(default=False, description="skip /aggregate_metrics")
    force: bool = Field(
        default=False,
        description="with skip_tool_replay: rescore on servers that are not stateless (outputs named unsafe_*)",
    )
    input_format: Literal["gym", "atif"] = Field(
        default="gym", description="the stored rollouts' format: gym results, or an ATIF export's manifest"
    )
    atif_manifest_jsonl_fpath: str | None = Field(
        default=None,
        description="with input_format atif: the manifest.jsonl of gym eval export --format atif",
    )

    @model_validator(mode="after")
    def _one_source_and_compatible_modes(self) -> ReverifyConfig:
        given = {path for path in (self.input_jsonl_fpath, self.rollouts_jsonl_fpath) if path}
        if self.input_format == "atif":
            if given or not self.atif_manifest_jsonl_fpath or not self.inputs:
                raise ValueError(
                    "input_format atif reads atif_manifest_jsonl_fpath (--atif-manifest) with the run's "
                    "materialized inputs (--inputs), and no results file (-i / --rollouts)"
                )
        elif self.atif_manifest_jsonl_fpath:
            raise ValueError("atif_manifest_jsonl_fpath needs input_format atif (--input-format atif)")
        elif len(given) != 1:
            raise ValueError(
                "name the stored rollouts once: input_jsonl_fpath (-i) or rollouts_jsonl_fpath (--rollouts)"
            )
        if self.inputs_jsonl_fpath and self.materialized_inputs_jsonl_fpath:
            raise ValueError(
                "give inputs_jsonl_fpath or materialized_inputs_jsonl_fpath (--inputs), not both"
            )
        if self.append and not self.judge_failed_only:
            raise ValueError("append adds rescored judge failures to an output: it needs judge_failed_only")
        if self.append and (self.overwrite or self.resume_from_cache):
            raise ValueError("append keeps the output file as it is: drop overwrite / resume_from_cache")
        return self

    @property
    def source(self) -> str:
        return str(self.atif_manifest_jsonl_fpath or self.input_jsonl_fpath or self.rollouts_jsonl_fpath)

    @property
    def inputs(self) -> str | None:
        return self.inputs_jsonl_fpath or self.materialized_inputs_jsonl_fpath


class RescoreFailed(Exception):
    def __init__(self, failure_class: str, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.failure_class, self.status = failure_class, status


@dataclass
class Tally:
    rescored: int = 0
    changed: int = 0
    failed: int = 0
    previous: list[float] = field(default_factory=list)
    new: list[float] = field(default_factory=list)

    def lines(self, paths: CollectionPaths) -> list[str]:
        lines = [
            f"Rescored {self.rescored} rollout(s): {self.changed} reward(s) changed, {self.failed} failed"
        ]
        if self.new:
            before = f"{sum(self.previous) / len(self.previous):.4g}" if self.previous else "n/a"
            lines.append(f"mean reward: {before} stored -> {sum(self.new) / len(self.new):.4g} now")
        lines += [f"Results: {paths.output}", f"Failures: {paths.failures}"]
        return lines


class Rescorer:
    """Sends one stored rollout through its resources server."""

    def __init__(self, client: ServerClient, config: ReverifyConfig, rows: TaskRows) -> None:
        self.client = client
        self.config = config
        self.rows = rows
        self.timeout_s = config.rollout_timeout_s or default_retry_policy().deadline_s
        self.policy = RetryPolicy(
            max_attempts=1,
            deadline_s=self.timeout_s,
            connect_timeout_s=min(default_retry_policy().connect_timeout_s, self.timeout_s),
        )

    async def rescore(self, record: dict[str, Any]) -> dict[str, Any]:
        """The new verify answer with the stored indices, agent and reward; a failure record otherwise."""
        try:
            async with asyncio.timeout(self.timeout_s):
                answer = await self._rescore(record)
        except RescoreFailed as error:
            return failure_record(record, error.failure_class, str(error), 1, error.status)
        except (DeadlineExceededError, TimeoutError):
            return failure_record(record, "timeout", f"no verify answer within {self.timeout_s:g}s", 1)
        except (RequestFailedError, aiohttp.ClientError, OSError, ConfigError) as error:
            return failure_record(record, "connection", str(error), 1)
        stamped = {key: record[key] for key in STAMPED_KEYS if key in record}
        return {**answer, **stamped, PREVIOUS_REWARD_KEY: record.get("reward")}

    async def _rescore(self, record: dict[str, Any]) -> dict[str, Any]:
        server = resources_server_of(self.client, self.config, record)
        url = self.client.server_base_url(server)
        row = self.rows.row_for(record)
        _, cookies = await self._post(url, "/seed_session", row, {})
        if not self.config.skip_tool_replay:
            for name, arguments in recorded_tool_calls(record.get("response")):
                _, cookies = await self._post(url, f"/{name}", arguments, cookies, check=False)
        content, _ = await self._post(url, "/verify", {**row, "response": record.get("response")}, cookies)
        try:
            answer = orjson.loads(content)
        except orjson.JSONDecodeError as error:
            raise RescoreFailed("invalid_response", f"{server} /verify answered non-JSON ({error})") from None
        reward = answer.get("reward") if isinstance(answer, dict) else None
        if isinstance(reward, bool) or not isinstance(reward, int | float):
            raise RescoreFailed("invalid_response", f"{server} /verify answered without a numeric reward")
        return answer

    async def _post(
        self, url: str, path: str, body: Any, cookies: dict[str, str], check: bool = True
    ) -> tuple[bytes, dict[str, str]]:
        """The answer's body and the cookies to send next; with `check` off (a replayed tool call) an error
        answer is part of the replay, as the agent fed it to the model."""
        response = await request(
            "POST", url + path, json=body, cookies=cookies, retry_policy=self.policy, _internal=True
        )
        content = await response.read()
        if check and not 200 <= response.status < 300:
            raise RescoreFailed(
                status_failure_class(response.status), error_message(content), response.status
            )
        return content, {**cookies, **response_cookies(response)}


def resources_server_of(client: ServerClient, config: ReverifyConfig, record: dict[str, Any]) -> str:
    """The resources server that scores `record`: the configured one, else its agent's."""
    if config.resources_server_name:
        return config.resources_server_name
    agent = agent_name_of(record)
    if not agent:
        raise RescoreFailed("invalid_request", "no agent_ref to find its resources server by")
    ref = get_first_server_config_dict(client.global_config_dict, agent).get("resources_server")
    if not ref or not ref.get("name"):
        raise RescoreFailed("invalid_request", f"agent {agent} names no resources_server")
    return str(ref["name"])


class TaskRows:
    """The row each stored rollout ran from. A verify answer echoes only the fields its server declares,
    so the task fields verify needs (options, grading settings, ...) come from the run's materialized
    inputs, found by (task, rollout) index; positions are kept, rows are read when needed."""

    def __init__(self, inputs: Path | None) -> None:
        self._positions: dict[tuple[int, int], tuple[int, int]] = {}
        self._file = inputs.open("rb") if inputs is not None else None
        if inputs is not None:
            for line in iter_jsonl(inputs):
                self._positions[rollout_key(line.row, f"{inputs}:{line.number}")] = (line.number, line.offset)

    def row_for(self, record: dict[str, Any]) -> dict[str, Any]:
        position = self._positions.get(_key_of(record))
        if self._file is None or position is None:
            return {key: value for key, value in record.items() if key not in NOT_SENT_TO_VERIFY}
        return row_at(self._file, *position)

    def close(self) -> None:
        if self._file is not None:
            self._file.close()


def _key_of(record: dict[str, Any]) -> tuple[Any, Any]:
    return record.get(TASK_INDEX_KEY), record.get(ROLLOUT_INDEX_KEY)


def materialized_inputs_of(config: ReverifyConfig, source: Path) -> Path | None:
    if config.inputs:
        return locate_data_file(config.inputs, "inputs_jsonl_fpath")
    beside = CollectionPaths.for_output(source).materialized
    return beside if beside.is_file() else None


def recorded_tool_calls(response: Any) -> list[tuple[str, Any]]:
    """(tool name, parsed arguments) of each function call of a stored response, in order; calls whose
    arguments are not JSON are skipped, as the agent never sent them."""
    calls = []
    output = response.get("output") if isinstance(response, dict) else None
    for item in output if isinstance(output, list) else []:
        if not isinstance(item, dict) or item.get("type") != "function_call" or not item.get("name"):
            continue
        try:
            calls.append((str(item["name"]), orjson.loads(item.get("arguments") or "{}")))
        except orjson.JSONDecodeError:
            continue
    return calls


def wanted(record: dict[str, Any], config: ReverifyConfig, done: set[tuple[Any, Any]]) -> bool:
    if config.judge_failed_only and not record.get(JUDGE_FAILURE_KEY):
        return False
    return _key_of(record) not in done


async def check_reverify_modes(client: ServerClient, servers: set[str], force: bool) -> bool:
    """Whether the run is unsafe: some server does not say it can verify without its session. Refused
    (ConfigError naming them) unless `force`."""
    modes = {}
    for server in sorted(servers):
        response = await request("GET", client.server_base_url(server) + "/reverify_mode", _internal=True)
        modes[server] = orjson.loads(await response.read()) if response.status == 200 else "unknown"
    unsafe = {server: mode for server, mode in modes.items() if mode != "stateless"}
    if unsafe and not force:
        listed = ", ".join(f"{server} ({mode})" for server, mode in unsafe.items())
        raise ConfigError(
            f"without the tool replay, verify sees none of a rollout's session state, and these resources "
            f"servers do not say they are stateless: {listed}; drop --no-tool-replay, or pass --force "
            "(the outputs are then named unsafe_*)"
        )
    return bool(unsafe)


def _unsafe(path: Path) -> Path:
    return path.with_name(f"unsafe_{path.name}")


async def reverify_rollouts(overrides: list[str]) -> int:
    """Exit 0 when every stored rollout was rescored, 1 when some failed."""
    cfg = parse_global_config_dict(overrides)
    config = command_settings(ReverifyConfig, cfg)
    configure_http_client_from(cfg)
    source_key = "atif_manifest_jsonl_fpath" if config.input_format == "atif" else "input_jsonl_fpath"
    source = locate_data_file(config.source, source_key)
    paths = CollectionPaths.for_output(config.output_jsonl_fpath)
    if Path(paths.output).resolve() == source.resolve():
        raise ConfigError(
            "output_jsonl_fpath must differ from input_jsonl_fpath: the stored rollouts are kept"
        )
    try:
        client = ServerClient.load_from_global_config(head_server_config_from(cfg))
    except ValueError as error:
        raise ConfigError(str(error)) from None

    from_atif = read_manifest(source, config.limit) if config.input_format == "atif" else None

    def stored() -> Iterator[dict[str, Any]]:
        if from_atif is not None:
            return iter(from_atif)
        return (line.row for line in iter_jsonl(source, config.limit))

    if config.skip_tool_replay:
        servers = set()
        for record in stored():
            with contextlib.suppress(RescoreFailed):
                servers.add(resources_server_of(client, config, record))
        if await check_reverify_modes(client, servers, config.force):
            paths = CollectionPaths.for_output(str(_unsafe(Path(config.output_jsonl_fpath))))
    done: set[tuple[Any, Any]] = set()
    if (config.resume_from_cache or config.append) and paths.output.is_file():
        drop_torn_tail(paths.output)
        done = {_key_of(line.row) for line in iter_jsonl(paths.output)}
    elif not (config.resume_from_cache or config.append):
        refuse_to_replace(paths, config.overwrite, resumable=False)
        paths.output.unlink(missing_ok=True)
    paths.output.parent.mkdir(parents=True, exist_ok=True)
    paths.failures.unlink(missing_ok=True)
    rows = TaskRows(materialized_inputs_of(config, source))
    rescorer = Rescorer(client, config, rows)
    tally = Tally()
    results, failures = LineAppender(paths.output), LineAppender(paths.failures)
    try:
        chosen = (record for record in stored() if wanted(record, config, done))
        in_flight = config.num_samples_in_parallel or DEFAULT_IN_FLIGHT
        rescored = completed_in_any_order(chosen, rescorer.rescore, in_flight)
        async with contextlib.aclosing(rescored) as answers:
            async for record, answer in answers:
                if FAILURE_CLASS_KEY in answer:
                    failures.append(answer)
                    tally.failed += 1
                    continue
                results.append(answer)
                tally.rescored += 1
                tally.new.append(float(answer["reward"]))
                previous = record.get("reward")
                if isinstance(previous, int | float) and not isinstance(previous, bool):
                    tally.previous.append(float(previous))
                    tally.changed += previous != answer["reward"]
    finally:
        results.close()
        failures.close()
        rows.close()
    for line in tally.lines(paths):
        print(line)
    if not paths.output.is_file():
        return 1 if tally.failed else 0
    aggregates: list[dict[str, Any]] = []
    if not config.disable_aggregation:
        try:
            aggregates = await aggregate_results(
                (line.row for line in iter_jsonl(paths.output)),
                (line.row for line in iter_jsonl(paths.failures)),
                client,
                paths.aggregate_metrics,
            )
        except (RequestFailedError, aiohttp.ClientError, ValueError) as error:
            print(f"Aggregation failed (the rescored rollouts are kept): {error}")
            return 1
        print(f"Aggregate metrics: {paths.aggregate_metrics}")
    with open_exporters(cfg, client.global_config_dict):
        export_results(
            aggregates, lambda: (line.row for line in iter_jsonl(paths.output)), config.uploads_rollouts
        )
    return 1 if tally.failed else 0
