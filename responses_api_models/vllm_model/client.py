"""The vLLM upstream as this server calls it: the OpenAI-compatible client plus vLLM's own routes, and
one bounded call that tells a prompt too long for the context window from other errors."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from nemo_gym.http.client import HTTPStatusError
from nemo_gym.http.upstream import NeMoGymAsyncOpenAI, Upstream

# vLLM answers 400 with one of these when the prompt plus max_tokens does not fit the context window.
CONTEXT_LENGTH_MARKERS = ("context length", "max_tokens")


def is_context_length_error(error: HTTPStatusError) -> bool:
    text = error.response_content.decode("utf-8", errors="replace").lower()
    return error.status == 400 and any(marker in text for marker in CONTEXT_LENGTH_MARKERS)


class VLLMClient(NeMoGymAsyncOpenAI):
    """The upstream client, plus vLLM's `/v1/completions` (token ids in, token ids out)."""

    async def create_completion(self, **body: Any) -> dict[str, Any]:
        return await self._call("POST", f"{self.base_url.rstrip('/')}/completions", body)

    async def create_detokenize(self, **body: Any) -> dict[str, Any]:
        """vLLM's `/detokenize` lives beside `/v1`, like `/tokenize`."""
        root = self.base_url.rstrip("/").removesuffix("/v1")
        return await self._call("POST", f"{root}/detokenize", body)


async def call_upstream(
    upstream: Upstream,
    call: Callable[..., Awaitable[Any]],
    body: dict[str, Any],
    propagate_context_overflow_errors: bool,
) -> Any:
    """One bounded upstream call; None for vLLM's context-length 400 (unless it is to be passed on), any
    other error as the upstream sent it (key masked). A broken or non-JSON answer is already a 502."""
    async with upstream.call():
        try:
            return await call(**body)
        except HTTPStatusError as error:
            if is_context_length_error(error) and not propagate_context_overflow_errors:
                return None
            raise
