"""GdpPdfAgent: simple_agent with a pre-rendered document inlined into the prompt just before the model
call, and the document shrunk (DPI backoff, page compositing) when the model server refuses it as too large.

A row names its document by `verifier_metadata.document_manifest`, relative to `documents_base_dir` (made
once by `prepare.py`). The policy gets one user message: the task's text parts, the whole extracted text
and the page images (see delivery.py). Seed and verify get the row as it came, without the document. A row
without a manifest runs as in simple_agent.

Compatible with NeMo Gym 0.7's gdp_pdf_agent (same folder, config keys and defaults, manifest format,
backoff rule, `document_delivery` record). The loop, seeding and verify are simple_agent's and the core's.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Literal

import orjson
from fastapi import Request
from pydantic import Field

from nemo_gym import PARENT_DIR
from nemo_gym.agents.rollout_agent import Rollout
from nemo_gym.http.client import HTTPStatusError
from nemo_gym.http.errors import GymError
from responses_api_agents.gdp_pdf_agent.delivery import (
    Delivery,
    Manifest,
    document_text,
    input_limit,
    load_manifest,
)
from responses_api_agents.simple_agent.app import SimpleAgent, SimpleAgentConfig, SimpleAgentRunRequest

MANIFEST_FIELD = "verifier_metadata.document_manifest"


class GdpPdfAgentConfig(SimpleAgentConfig):
    documents_base_dir: str = Field(
        description="where document_manifest paths start; relative to the Gym root"
    )
    dpi: int = Field(default=150, ge=1, description="starting DPI; at most the manifests' source_dpi")
    min_dpi: int = Field(default=72, ge=1, description="the DPI backoff stops here")
    max_images: int | None = Field(
        default=None, ge=1, description="images per request; null = as many as pages"
    )
    max_pages: int | None = Field(default=None, ge=1, description="pages read per document; null = all")
    include_text: bool = True
    include_images: bool = True
    image_format: Literal["png", "jpeg"] = "png"
    jpeg_quality: int = Field(default=90, ge=1, le=100)
    strip_images_from_output: bool = Field(default=True, description="drop input_image parts from the result")


class GdpPdfAgent(SimpleAgent):
    config: GdpPdfAgentConfig

    async def _run(self, request: Request, body: SimpleAgentRunRequest) -> bytes:
        row = body.model_dump(mode="json", exclude_unset=True)
        metadata = row.get("verifier_metadata")
        relative = metadata.get("document_manifest") if isinstance(metadata, dict) else None
        if not relative or not (self.config.include_text or self.config.include_images):
            return await super()._run(request, body)
        manifest = self._manifest(relative)
        rollout = await self.seeded_rollout(request, row)
        delivery = Delivery(self.config.dpi, self.config.max_images)
        terminal = await self._delivered(row, manifest, delivery, rollout)
        result = orjson.loads(await self.verified(row, rollout.response, rollout))
        result["document_delivery"] = delivery.record(terminal) | {"rejected_attempts": delivery.attempts}
        truncated = len(manifest.pages) - len(self._pages(manifest))
        if truncated:
            result.setdefault("verifier_metadata", {})["pages_truncated"] = truncated
        if terminal is not None:
            result["failure_kind"] = "gdp_pdf_agent:input_too_large"
            result["failure_reason"] = (
                f"GDP.pdf terminal input limit: {terminal}; the document did not fit the model even at "
                f"{delivery.image_dpi} DPI with {delivery.image_count} image(s); scored as an empty answer"
            )
        return orjson.dumps(_without_images(result) if self.config.strip_images_from_output else result)

    async def _delivered(
        self, row: dict, manifest: Manifest, delivery: Delivery, rollout: Rollout
    ) -> str | None:
        """Ask the model with the document, shrinking it after each input-limit refusal; the limit that
        could not be worked around (the response is then an empty failed one), or None."""
        task = row["responses_create_params"]
        prompt = _prompt_parts(task.get("input"))
        pages = self._pages(manifest)
        text = document_text(pages) if self.config.include_text else []
        while True:
            images = []
            if self.config.include_images:
                images = delivery.images(
                    pages, manifest.source_dpi, self.config.image_format, self.config.jpeg_quality
                )
            content = [*prompt, *delivery.notice(), *text, *images]
            params = {**task, "input": [{"role": "user", "content": content, "type": "message"}]}
            try:
                await self._loop(params, rollout)
            except HTTPStatusError as error:
                limit, cap = input_limit(error)
                if limit is None:
                    raise
                if delivery.adapt(limit, cap, self.config.min_dpi):
                    continue
                rollout.response = _failed_response(self.config.model_server.name)
                return limit
            truncated = rollout.response.get("status") == "incomplete" and self.config.include_images
            if truncated and delivery.adapt("output_truncated", None, self.config.min_dpi):
                continue
            return None

    def _manifest(self, relative: Any) -> Manifest:
        base = Path(self.config.documents_base_dir)
        base = (base if base.is_absolute() else PARENT_DIR / base).resolve()
        try:
            path = (base / relative).resolve()
        except (TypeError, ValueError, OSError) as error:
            raise GymError(
                422, "invalid_request", f"{MANIFEST_FIELD} is not a usable path: {error}"
            ) from None
        if not path.is_relative_to(base):
            raise GymError(422, "invalid_request", f"{MANIFEST_FIELD} {relative!r} leaves documents_base_dir")
        if not path.is_file():
            raise GymError(
                422,
                "invalid_request",
                f"{MANIFEST_FIELD} {relative!r}: no manifest at {path}; render the document with "
                "python -m responses_api_agents.gdp_pdf_agent.prepare",
            )
        try:
            manifest = load_manifest(path)
        except ValueError as error:
            raise GymError(422, "invalid_request", f"{MANIFEST_FIELD}: {error}") from None
        if manifest.source_dpi < self.config.dpi:
            raise GymError(
                422,
                "invalid_request",
                f"{path} was rendered at {manifest.source_dpi} DPI, below this agent's starting dpi "
                f"{self.config.dpi}: pages are only ever scaled down; lower dpi or render again",
            )
        return manifest

    def _pages(self, manifest: Manifest) -> list:
        return manifest.pages if self.config.max_pages is None else manifest.pages[: self.config.max_pages]


def _prompt_parts(task_input: Any) -> list[dict[str, Any]]:
    """The task's text: its first message's text parts (or its text)."""
    if isinstance(task_input, str):
        return [{"type": "input_text", "text": task_input}]
    content = (task_input or [{}])[0].get("content")
    if isinstance(content, str):
        return [{"type": "input_text", "text": content}]
    return [dict(part) for part in content or [] if part.get("type") == "input_text"]


def _failed_response(model: str) -> dict[str, Any]:
    """An empty `failed` response: an attempt the endpoint could not take is graded as no answer."""
    return {
        "id": "gdp-pdf-input-failure",
        "object": "response",
        "created_at": time.time(),
        "model": model,
        "status": "failed",
        "output": [],
        "tools": [],
        "tool_choice": "none",
        "parallel_tool_calls": False,
    }


def _without_images(value: Any) -> Any:
    """`value` with every `input_image` part left out, however deep."""
    if isinstance(value, list):
        return [
            _without_images(item)
            for item in value
            if not (isinstance(item, dict) and item.get("type") == "input_image")
        ]
    if isinstance(value, dict):
        return {key: _without_images(item) for key, item in value.items()}
    return value


if __name__ == "__main__":
    GdpPdfAgent.run_webserver()
