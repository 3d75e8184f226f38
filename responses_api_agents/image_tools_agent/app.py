"""ImageToolsAgent: iterative image inspection around a base environment, then verify.

The policy (a vision-language model) writes image-tool calls in its text (`<tool_call>` blocks, as the
image_tools environment reads them); the agent runs them here on the rollout's pictures (zoom into a region,
crop, rotate, flip, diff, overlay, side by side, count, find or read a colour), shows the result as a new
numbered image in the next user message, and repeats until the model answers. The last assistant message
goes to the `/verify` of the environment the row belongs to, chosen by the row's `image_tools_base_agent_ref`
through `resource_servers_by_agent` (else `resources_server`). The reward is that verdict plus the shaping
reward of the tool calls (`image_tools_aux_reward`).

Compatible with NeMo Gym 0.7's image_tools_agent (same folder, config keys and defaults, tool names and
arguments, row field and result fields). The plumbing (model calls, cookies, usage sums, deadline,
concurrency cap, seeding, verify) is the core's `nemo_gym.agents.rollout_agent`.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
from pathlib import Path
from typing import Any, Literal

import orjson
from fastapi import Request, Response
from PIL import Image, UnidentifiedImageError
from pydantic import Field, model_validator

from nemo_gym.agents.rollout_agent import (
    Rollout,
    RolloutAgent,
    RolloutAgentConfig,
    RolloutRunRequest,
    input_items,
    summed_usage,
)
from nemo_gym.config_types import AggregateMetricsRequest, ResourcesServerRef
from nemo_gym.http.client import raise_for_status
from nemo_gym.http.client import request as http_request
from nemo_gym.http.errors import GymError
from nemo_gym.openai_utils import NeMoGymResponse, NeMoGymResponseCreateParamsNonStreaming
from nemo_gym.reward_profile import AggregateMetricsMixin
from responses_api_agents.image_tools_agent.image_ops import ResizeBounds
from responses_api_agents.image_tools_agent.inspection import (
    DEFAULT_FORCED_FINAL_PROMPT,
    Inspection,
    InspectionRules,
    image_of,
)

BASE_AGENT_REF = "image_tools_base_agent_ref"
IMAGE_PART_TYPES = ("input_image", "image_url", "image")
ImageToolsAgentRunRequest = RolloutRunRequest


class ImageToolsAgentConfig(RolloutAgentConfig):
    resources_server: ResourcesServerRef | None = Field(
        default=None, description="the environment of rows without image_tools_base_agent_ref"
    )
    resource_servers_by_agent: dict[str, ResourcesServerRef] = Field(
        default_factory=dict,
        description="base agent name (the row's image_tools_base_agent_ref.name) -> its resources server",
    )
    max_steps: int = Field(default=5, ge=1, description="model calls per rollout")
    max_output_tokens: int | None = Field(default=4096, ge=1, description="used when the row sets none")
    stop_strings: list[str] = Field(default=["</tool_call>"], description="sent as metadata.extra_body.stop")
    include_stop_str_in_output: bool = True
    crop_dir: str = Field(default="image_tool_outputs", description="where tool pictures are written")
    crop_format: Literal["jpeg", "jpg", "png"] = "jpeg"
    crop_jpeg_quality: int = Field(default=95, ge=1, le=100)
    crop_min_pixels: int = Field(default=262144, ge=1, description="a zoomed region has at least this many")
    crop_max_pixels: int = Field(default=1048576, ge=1, description="and at most this many pixels")
    max_tool_calls: int = Field(
        default=4, ge=0, description="tool calls per rollout; then an answer is asked"
    )
    max_tool_calls_per_turn: int = Field(default=1, ge=1)
    tool_success_reward: float = 0.02
    tool_success_reward_cap: float = 0.05
    invalid_tool_call_penalty: float = -0.05
    duplicate_tool_call_penalty: float = -0.02
    force_final_after_duplicate: bool = True
    terminate_on_invalid_tool_call: bool = True
    duplicate_iou_threshold: float = Field(default=0.5, ge=0, le=1)
    forced_final_prompt: str = DEFAULT_FORCED_FINAL_PROMPT

    @model_validator(mode="after")
    def _consistent(self) -> ImageToolsAgentConfig:
        if self.resources_server is None and not self.resource_servers_by_agent:
            raise ValueError(
                "name the environment: set resource_servers_by_agent (base agent -> resources server) "
                "or resources_server"
            )
        if self.crop_min_pixels > self.crop_max_pixels:
            raise ValueError("crop_min_pixels must not exceed crop_max_pixels")
        return self

    def rules(self) -> InspectionRules:
        return InspectionRules(
            max_tool_calls=self.max_tool_calls,
            max_tool_calls_per_turn=self.max_tool_calls_per_turn,
            tool_success_reward=self.tool_success_reward,
            tool_success_reward_cap=self.tool_success_reward_cap,
            invalid_tool_call_penalty=self.invalid_tool_call_penalty,
            duplicate_tool_call_penalty=self.duplicate_tool_call_penalty,
            force_final_after_duplicate=self.force_final_after_duplicate,
            terminate_on_invalid_tool_call=self.terminate_on_invalid_tool_call,
            duplicate_iou_threshold=self.duplicate_iou_threshold,
            forced_final_prompt=self.forced_final_prompt,
            crop_dir=Path(self.crop_dir),
            crop_format="png" if self.crop_format == "png" else "jpeg",
            crop_jpeg_quality=self.crop_jpeg_quality,
            bounds=ResizeBounds(self.crop_min_pixels, self.crop_max_pixels),
        )


class ImageToolsAgent(RolloutAgent):
    config: ImageToolsAgentConfig

    # ---- routes -----------------------------------------------------------------------------------------

    async def responses(
        self, request: Request, response: Response, body: NeMoGymResponseCreateParamsNonStreaming
    ) -> NeMoGymResponse:
        """The inspection loop without seeding or verifying."""
        rollout = Rollout.starting(dict(request.cookies))
        params = body.model_dump(mode="json", exclude_unset=True)
        await self.as_rollout(self._inspect(params, rollout, dataset="unknown"))
        for name, value in rollout.model_cookies.items():
            response.set_cookie(name, value)
        return NeMoGymResponse.model_validate(rollout.response)

    async def run(self, request: Request, body: ImageToolsAgentRunRequest) -> Response:
        """Seed the row's environment, inspect until the model answers, verify the answer."""
        return Response(await self.as_rollout(self._run(request, body)), media_type="application/json")

    async def aggregate_metrics(self, body: AggregateMetricsRequest) -> Response:
        """The environment's metrics when there is one environment; over several, the generic ones."""
        servers = {ref.name for ref in self.config.resource_servers_by_agent.values()}
        if self.config.resources_server is not None:
            servers.add(self.config.resources_server.name)
        if len(servers) == 1 and self.config.resources_server is not None:
            return await super().aggregate_metrics(body)
        metrics = await AggregateMetricsMixin.aggregate_metrics(self, body)
        return Response(metrics.model_dump_json(), media_type="application/json")

    def resources_server_for(self, row: dict[str, Any]) -> str:
        ref = row.get(BASE_AGENT_REF)
        if ref is None:
            if self.config.resources_server is None:
                raise GymError(
                    422,
                    "invalid_request",
                    f"{BASE_AGENT_REF} is required: this agent has no default resources_server",
                )
            return self.config.resources_server.name
        name = ref.get("name") if isinstance(ref, dict) else None
        if name not in self.config.resource_servers_by_agent:
            known = ", ".join(sorted(self.config.resource_servers_by_agent)) or "none"
            raise GymError(
                422,
                "invalid_request",
                f"{BASE_AGENT_REF}.name {name!r} has no entry in resource_servers_by_agent (known: {known})",
            )
        return self.config.resource_servers_by_agent[name].name

    # ---- the rollout ------------------------------------------------------------------------------------

    async def _run(self, request: Request, body: ImageToolsAgentRunRequest) -> bytes:
        row = body.model_dump(mode="json", exclude_unset=True)
        self.resources_server_for(row)  # an unknown base agent is refused before anything runs
        rollout = await self.seeded_rollout(request, row)
        inspection = await self._inspect(
            row["responses_create_params"], rollout, str(row.get("dataset", "unknown"))
        )
        answer = _last_answer(rollout.response)
        verdict = orjson.loads(await self.verified(row, answer, rollout))
        base_reward = float(verdict.get("reward", 0.0))
        verdict |= {
            "base_reward": base_reward,
            "image_tools_aux_reward": inspection.aux_reward,
            "reward": base_reward + inspection.aux_reward,
            "image_tools_call_count": inspection.tool_call_count,
            "image_tools_error_count": inspection.tool_error_count,
            "image_tools_output_paths": inspection.output_paths,
            "image_tools_generation_image_paths": inspection.generation_image_paths,
            BASE_AGENT_REF: row.get(BASE_AGENT_REF),
            "response": rollout.response,
        }
        return orjson.dumps(verdict)

    async def _inspect(self, params: dict[str, Any], rollout: Rollout, dataset: str) -> Inspection:
        """Model turn, tools, model turn ... until an answer, a refused call that ends the rollout, or
        `max_steps`; `rollout.response` becomes the last turn carrying every output item and the usage sum."""
        task_input = input_items(params)
        params = self._generation_params(params)
        inspection = Inspection(self.config.rules(), dataset)
        sources = _image_refs(task_input)
        new_items: list[dict[str, Any]] = []
        usage: dict[str, Any] | None = None
        for _ in range(self.config.max_steps):
            turn, rollout.model_cookies = await self.model_turn(
                self.config.model_server.name,
                {**params, "input": [*task_input, *new_items]},
                rollout.model_cookies,
            )
            new_items.extend(turn.get("output") or [])
            usage = summed_usage(usage, turn.get("usage"))
            rollout.response = turn
            text = _assistant_text(turn)
            if sources and "<tool_call>" in text:  # the pictures are read once, when a tool first needs them
                inspection.images, sources = await _loaded(sources), []
            outcome = await asyncio.to_thread(inspection.take_turn, text)
            if outcome.done:
                break
            new_items.append({"role": "user", "content": outcome.content, "type": "message"})
        rollout.response = {**rollout.response, "output": new_items, "usage": usage}
        return inspection

    def _generation_params(self, params: dict[str, Any]) -> dict[str, Any]:
        """The row's parameters with the output cap and the stop strings (via metadata.extra_body, which the
        vLLM model server merges into its upstream request) this agent adds."""
        params = dict(params)
        if params.get("max_output_tokens") is None and self.config.max_output_tokens is not None:
            params["max_output_tokens"] = self.config.max_output_tokens
        extra: dict[str, Any] = {}
        if self.config.stop_strings:
            extra["stop"] = self.config.stop_strings
        if self.config.include_stop_str_in_output:
            extra["include_stop_str_in_output"] = True
        if extra:
            metadata = dict(params.get("metadata") or {})
            try:
                current = orjson.loads(metadata.get("extra_body") or "{}")
            except orjson.JSONDecodeError:
                raise GymError(422, "invalid_request", "metadata.extra_body must be a JSON object") from None
            if not isinstance(current, dict):
                raise GymError(422, "invalid_request", "metadata.extra_body must be a JSON object")
            metadata["extra_body"] = orjson.dumps({**current, **extra}).decode()
            params["metadata"] = metadata
        return params


def _image_refs(items: list[Any]) -> list[str]:
    """The pictures of the task in order (their img_idx): URLs or paths of the input's image parts."""
    refs = []
    for item in items:
        content = item.get("content") if isinstance(item, dict) else None
        for part in content if isinstance(content, list) else []:
            if not isinstance(part, dict) or part.get("type") not in IMAGE_PART_TYPES:
                continue
            ref = part.get("image_url", part.get("image"))
            ref = ref.get("url") if isinstance(ref, dict) else ref
            if isinstance(ref, str) and ref:
                refs.append(ref)
    return refs


async def _loaded(refs: list[str]) -> list[Image.Image]:
    """The task's pictures, decoded: data URLs, http(s) URLs (fetched within the rollout's deadline) and
    local paths. One that cannot be read is a 422 naming it: the row is broken, not the model's call."""
    images = []
    for index, ref in enumerate(refs):
        shown = ref if len(ref) <= 80 else ref[:77] + "..."
        try:
            if ref.startswith("data:"):
                data = base64.b64decode(ref.split(",", 1)[1], validate=True)
            elif ref.startswith(("http://", "https://")):
                fetched = await http_request("GET", ref)
                await raise_for_status(fetched)
                data = await fetched.read()
            else:
                data = await asyncio.to_thread(Path(ref.removeprefix("file://")).read_bytes)
            images.append(await asyncio.to_thread(image_of, data))
        except (
            IndexError,
            binascii.Error,
            OSError,
            UnidentifiedImageError,
            Image.DecompressionBombError,
        ) as error:
            raise GymError(
                422, "invalid_request", f"input image {index} ({shown}) cannot be read: {error}"
            ) from None
    return images


def _assistant_text(turn: dict[str, Any]) -> str:
    return "\n".join(
        part.get("text") or ""
        for item in turn.get("output") or []
        if item.get("type") == "message" and item.get("role") == "assistant"
        for part in item.get("content") or []
        if isinstance(part, dict)
    )


def _last_answer(response: dict[str, Any]) -> dict[str, Any]:
    """What the environment grades: the response with only its last assistant message (NeMo Gym)."""
    output = response.get("output") or []
    last = next(
        (
            item
            for item in reversed(output)
            if item.get("type") == "message" and item.get("role") == "assistant"
        ),
        None,
    )
    return response if last is None else {**response, "output": [last]}


if __name__ == "__main__":
    ImageToolsAgent.run_webserver()
