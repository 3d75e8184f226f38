"""Test-side client of tests/vllm_upstream.py: script its turns, tune a model, tokenize like the upstream.

Typical use, with the session fixture `vllm_upstream` of tests/shared_fixtures.py:

    model = fresh_model("vllm")
    vllm_upstream.script(model, [
        {"reasoning": "I need the weather.", "tool_calls": [scripted_call("get_weather", {"city": "Paris"})]},
        {"text": "It is sunny."},
    ])
    ... point vllm_model at vllm_upstream.base_url with model name `model` ...
    prompt_ids = vllm_upstream.requests(model)[1]["prompt_token_ids"]   # what the engine was given

The step format and the template are documented in tests/vllm_upstream.py. The control methods are the
ones of ScriptedUpstream (script, requests, clear, reset); the methods are synchronous, which is fine in
async tests because the upstream is another process.
"""

from __future__ import annotations

import urllib.parse
from dataclasses import dataclass
from typing import Any, Literal, TypedDict

from tests.upstream_script import ScriptedUpstream, fresh_model

__all__ = ["VllmUpstream", "VllmStep", "VllmRecordedRequest", "fresh_model", "scripted_call"]


class ScriptedCall(TypedDict, total=False):
    name: str
    arguments: dict[str, Any] | str
    id: str


class VllmStep(TypedDict, total=False):
    """One scripted turn, or an HTTP error (`status` with optional `body`, `retry_after`)."""

    text: str
    reasoning: str
    tool_calls: list[ScriptedCall]
    finish_reason: str
    noncanonical: Literal[True]
    status: int
    body: Any
    retry_after: float
    repeat: int


class VllmRecordedRequest(TypedDict, total=False):
    path: str
    headers: dict[str, str]
    body: Any
    received_at: float
    prompt_token_ids: list[int]  # chat and completions: the ids the engine was given
    prompt_text: str  # chat: the templated prompt


class TokenizerInfo(TypedDict):
    vocab_size: int
    eos_token: str
    eos_token_id: int
    special_tokens: dict[str, int]
    added_tokens: dict[str, int]


def scripted_call(name: str, arguments: dict[str, Any] | str, call_id: str | None = None) -> ScriptedCall:
    """A tool call of a step; a string `arguments` is emitted verbatim (compact, or even invalid, JSON)."""
    call: ScriptedCall = {"name": name, "arguments": arguments}
    if call_id is not None:
        call["id"] = call_id
    return call


@dataclass(frozen=True)
class VllmUpstream(ScriptedUpstream):
    """Where the vLLM-compatible upstream listens, its control API, and its tokenizer over HTTP."""

    def script(self, model: str, steps: list[VllmStep] | list[dict[str, Any]]) -> None:  # type: ignore[override]
        """Append turns to the model's queue; they are served in order, one per generation request."""
        super().script(model, steps)

    def requests(self, model: str) -> list[VllmRecordedRequest]:  # type: ignore[override]
        """Every request received for the model (generation, /tokenize, /detokenize), oldest first."""
        return super().requests(model)

    def configure(
        self,
        model: str,
        *,
        max_model_len: int | None = None,
        reasoning_parser: bool | None = None,
        stitch_token_prefix: bool | None = None,
        honours_required_prefix: bool | None = None,
        closing_text: str | None = None,
    ) -> dict[str, Any]:
        """Change the model's settings (None leaves one as it is); returns all of them."""
        update = {
            key: value
            for key, value in {
                "max_model_len": max_model_len,
                "reasoning_parser": reasoning_parser,
                "stitch_token_prefix": stitch_token_prefix,
                "honours_required_prefix": honours_required_prefix,
                "closing_text": closing_text,
            }.items()
            if value is not None
        }
        return self._call("POST", f"/_config/{_quote(model)}", update)

    def tokenizer_info(self) -> TokenizerInfo:
        return self._call("GET", "/_tokenizer")

    def tokenize(self, model: str, prompt: str) -> list[int]:
        """The ids of a plain text (no template), as vLLM's /tokenize gives them."""
        return self._call("POST", "/tokenize", {"model": model, "prompt": prompt})["tokens"]

    def tokenize_messages(
        self,
        model: str,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]] | None = None,
        add_generation_prompt: bool = True,
        chat_template_kwargs: dict[str, Any] | None = None,
    ) -> list[int]:
        """The ids of a templated conversation, as vLLM's /tokenize gives them."""
        body: dict[str, Any] = {
            "model": model,
            "messages": messages,
            "add_generation_prompt": add_generation_prompt,
        }
        if tools is not None:
            body["tools"] = tools
        if chat_template_kwargs is not None:
            body["chat_template_kwargs"] = chat_template_kwargs
        return self._call("POST", "/tokenize", body)["tokens"]

    def detokenize(self, model: str, token_ids: list[int]) -> str:
        """The text of token ids, special tokens included."""
        return self._call("POST", "/detokenize", {"model": model, "tokens": token_ids})["prompt"]


def _quote(model: str) -> str:
    return urllib.parse.quote(model, safe="")
