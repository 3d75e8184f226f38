"""The chat route's body as vLLM reads it: OpenAI's fields plus vLLM's own sampling parameters.

AsyncOpenAI sends `extra_body` at the top level of the JSON, so `extra_body={"top_k": 20}` arrives as a
top-level `top_k`; the generic chat body ignores keys OpenAI does not define, which would drop them
without a word. These are passed upstream like any sampling field, on every turn.
"""

from __future__ import annotations

from typing import Any

from nemo_gym.openai_utils import NeMoGymChatCompletionCreateParamsNonStreaming


class VLLMChatCompletionParams(NeMoGymChatCompletionCreateParamsNonStreaming):
    """vLLM's extra sampling and decoding parameters. Those that decide the shape of the answer
    (`logprobs`, `return_tokens_as_token_ids`, `skip_special_tokens`, templating switches) stay the
    server's. A top-level `chat_template_kwargs` reaches the template only with the server's
    `forward_request_chat_template_kwargs`; `metadata.chat_template_kwargs` always does (see README)."""

    chat_template_kwargs: dict[str, Any] | None = None

    top_k: int | None = None
    min_p: float | None = None
    repetition_penalty: float | None = None
    length_penalty: float | None = None
    min_tokens: int | None = None
    stop_token_ids: list[int] | None = None
    include_stop_str_in_output: bool | None = None
    ignore_eos: bool | None = None
    bad_words: list[str] | None = None
    allowed_token_ids: list[int] | None = None
    truncate_prompt_tokens: int | None = None
    structured_outputs: dict[str, Any] | None = None
    guided_json: str | dict[str, Any] | None = None
    guided_regex: str | None = None
    guided_choice: list[str] | None = None
    guided_grammar: str | None = None
    priority: int | None = None
