"""Responses API <-> Chat Completions conversion for vllm_model, as pure functions (no I/O, no config).

vLLM serves Chat Completions; agents speak the Responses API. Everything that decides what the upstream
sees, or what the agent gets back, lives here so it can be tested as plain input -> output tables.
Training mode adds three seams: `AssistantTurn` carries the token fields of input items onto the merged
assistant message, `generated_text_to_chat_message` turns a raw token-in/token-out generation into the
message vLLM's parsers would return, and `attach_token_fields` puts a call's token data on its output
(`attach_chat_token_fields` on the chat route's message).

Two kinds of failure leave this module: `RequestConversionError` (the caller asked for something a chat
completion cannot express: a 400) and `UpstreamReplyError` (the upstream's answer does not fit this
server's settings: a 502).
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import orjson

from nemo_gym.openai_utils import (
    NeMoGymChatCompletion,
    NeMoGymChatCompletionMessage,
    NeMoGymChatCompletionMessageToolCall,
    NeMoGymCompletionUsage,
    NeMoGymEasyInputMessage,
    NeMoGymFunctionCallOutput,
    NeMoGymMessage,
    NeMoGymResponseCreateParamsNonStreaming,
    NeMoGymResponseFunctionToolCall,
    NeMoGymResponseInputImage,
    NeMoGymResponseInputText,
    NeMoGymResponseOutputMessage,
    NeMoGymResponseOutputRefusal,
    NeMoGymResponseReasoningItem,
    TokenIDLogProbMixin,
)
from responses_api_models.vllm_model.parsers import OutputParsers
from responses_api_models.vllm_model.tokens import ContinuityBreak, TokenTurn

JSON = dict[str, Any]

THINK_BLOCK = re.compile(r"<think>(.*?)</think>", re.DOTALL)
# The token data of one model call, carried by training-mode items and assistant messages.
TOKEN_FIELDS = ("prompt_token_ids", "generation_token_ids", "generation_log_probs")
# vLLM's reasoning parsers name the field `reasoning_content` (older) or `reasoning` (newer).
UPSTREAM_REASONING_FIELDS = ("reasoning_content", "reasoning")
# Several reasoning blocks of one merged assistant turn travel as one field; a newline keeps them apart.
REASONING_BLOCK_SEPARATOR = "\n"

# Responses fields that mean the same in a chat completion; sent only when the caller set them.
SAME_NAME_FIELDS = (
    "temperature",
    "top_p",
    "top_logprobs",
    "parallel_tool_calls",
    "user",
    "store",
    "service_tier",
    "metadata",
)
# Responses fields copied onto the response, so the agent sees the settings its turn ran with.
ECHOED_FIELDS = (
    "instructions",
    "metadata",
    "temperature",
    "top_p",
    "top_logprobs",
    "max_output_tokens",
    "max_tool_calls",
    "reasoning",
    "service_tier",
    "text",
    "truncation",
    "user",
    "background",
)
FINISH_REASON_TO_INCOMPLETE = {"length": "max_output_tokens", "content_filter": "content_filter"}


class RequestConversionError(ValueError):
    """The request asks for something a chat completion cannot carry; the message names the spot."""


class UpstreamReplyError(ValueError):
    """The upstream answered, but not in a shape this server's settings can turn into a response."""


@dataclass(frozen=True)
class ReasoningHandling:
    """How the upstream treats `<think>` text: whether a reasoning parser splits it into its own field,
    whether the chat template wants earlier turns' reasoning back (interleaved thinking), and under which
    field name(s) it reads it (`reasoning_field`: "both", "reasoning" or "reasoning_content")."""

    uses_reasoning_parser: bool
    uses_interleaved_reasoning: bool = True
    reasoning_field: str = "both"

    @property
    def outgoing_fields(self) -> tuple[str, ...]:
        return UPSTREAM_REASONING_FIELDS if self.reasoning_field == "both" else (self.reasoning_field,)


@dataclass(frozen=True)
class ServerDefaults:
    """What the server adds to every upstream chat body, on both routes."""

    model: str
    chat_template_kwargs: Mapping[str, Any] = field(default_factory=dict)
    extra_body: Mapping[str, Any] = field(default_factory=dict)
    replace_developer_role_with_system: bool = False
    sampling_overrides: Mapping[str, Any] = field(default_factory=dict)
    # The caller's own top-level chat_template_kwargs reach the template only when this is set.
    forward_request_chat_template_kwargs: bool = False
    # A conversation ending with an assistant message is continued (that message left open).
    continue_final_assistant_message: bool = False


def new_id(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex}"


def split_think_blocks(text: str) -> tuple[list[str], str]:
    """The contents of every `<think>…</think>` block, and the text with the blocks cut out."""
    return THINK_BLOCK.findall(text), THINK_BLOCK.sub("", text)


# ---- request direction: Responses -> Chat Completions ------------------------------------------------------


@dataclass
class AssistantTurn:
    """Consecutive assistant-side input items, which a chat template renders as ONE assistant message.

    Reasoning goes first (as `<think>` blocks, in arrival order), then the text, then the tool calls:
    the order in which the model produced them.
    """

    thoughts: list[str] = field(default_factory=list)
    texts: list[str] = field(default_factory=list)
    tool_calls: list[JSON] = field(default_factory=list)
    # The token data of the model call that produced the turn: its last item that carries any.
    token_fields: JSON | None = None

    def note_token_fields(self, item: Any) -> None:
        if isinstance(item, TokenIDLogProbMixin):
            self.token_fields = {name: getattr(item, name) for name in TOKEN_FIELDS}

    def add_call(self, call: NeMoGymResponseFunctionToolCall) -> None:
        function = {"name": call.name, "arguments": call.arguments}
        self.tool_calls.append({"id": call.call_id, "type": "function", "function": function})

    def to_chat_message(self, reasoning: ReasoningHandling) -> JSON:
        text = "".join(f"<think>{thought}</think>" for thought in self.thoughts) + "".join(self.texts)
        message: JSON = {"role": "assistant", "content": text, "tool_calls": self.tool_calls}
        if self.token_fields is not None:
            message.update(self.token_fields)
        if not reasoning.uses_reasoning_parser:
            return message
        # The upstream template expects reasoning out of the content, as its parser delivered it.
        thoughts, message["content"] = split_think_blocks(text)
        if thoughts and reasoning.uses_interleaved_reasoning:
            joined = REASONING_BLOCK_SEPARATOR.join(thoughts)
            message.update(dict.fromkeys(reasoning.outgoing_fields, joined))
        return message


class _ChatHistory:
    """Chat messages under construction: assistant items accumulate until a non-assistant item arrives."""

    def __init__(self, reasoning: ReasoningHandling) -> None:
        self.messages: list[JSON] = []
        self._reasoning = reasoning
        self._turn: AssistantTurn | None = None

    @property
    def turn(self) -> AssistantTurn:
        if self._turn is None:
            self._turn = AssistantTurn()
        return self._turn

    def append(self, message: JSON) -> None:
        self.flush()
        self.messages.append(message)

    def flush(self) -> None:
        if self._turn is not None:
            self.messages.append(self._turn.to_chat_message(self._reasoning))
            self._turn = None


def _input_part_to_chat(part: Any, where: str) -> JSON:
    if isinstance(part, NeMoGymResponseInputText):
        return {"type": "text", "text": part.text}
    if isinstance(part, NeMoGymResponseInputImage):
        if part.image_url is None:
            raise RequestConversionError(
                f"{where}: an input_image needs an image_url (file_id is not supported)"
            )
        return {"type": "image_url", "image_url": {"url": part.image_url, "detail": part.detail}}
    raise RequestConversionError(
        f"{where}: content part type {part.type!r} is not supported (supported: input_text, input_image)"
    )


def _input_content_to_chat(content: str | list[Any], where: str) -> str | list[JSON]:
    if isinstance(content, str):
        return content
    return [_input_part_to_chat(part, f"{where}.content[{index}]") for index, part in enumerate(content)]


def _assistant_input_text(content: str | list[Any], where: str) -> str:
    """Text of an assistant message written as an input message; only text parts can be replayed."""
    if isinstance(content, str):
        return content
    texts = []
    for index, part in enumerate(content):
        if not isinstance(part, NeMoGymResponseInputText):
            raise RequestConversionError(
                f"{where}.content[{index}]: an assistant message can only hold text, got {part.type!r}"
            )
        texts.append(part.text)
    return "".join(texts)


def _output_message_text(message: NeMoGymResponseOutputMessage) -> str:
    """A refusal is what the model said on that turn, so it is replayed as text like output_text."""
    return "".join(
        part.refusal if isinstance(part, NeMoGymResponseOutputRefusal) else part.text
        for part in message.content
    )


def _is_assistant_side(item: Any) -> bool:
    if isinstance(item, NeMoGymEasyInputMessage | NeMoGymMessage):
        return item.role == "assistant"
    return isinstance(
        item, NeMoGymResponseReasoningItem | NeMoGymResponseOutputMessage | NeMoGymResponseFunctionToolCall
    )


def input_to_messages(
    items: str | list[Any], instructions: str | None, reasoning: ReasoningHandling
) -> list[JSON]:
    """Chat messages for a Responses `input` (and `instructions`, which become a leading system message)."""
    history = _ChatHistory(reasoning)
    if instructions:
        history.append({"role": "system", "content": instructions})
    if isinstance(items, str):
        history.append({"role": "user", "content": [{"type": "text", "text": items}]})
        return history.messages
    for index, item in enumerate(items):
        where = f"input[{index}]"
        if _is_assistant_side(item):
            history.turn.note_token_fields(item)
        if isinstance(item, NeMoGymResponseReasoningItem):
            history.turn.thoughts.extend(part.text for part in item.summary)
        elif isinstance(item, NeMoGymResponseOutputMessage):
            history.turn.texts.append(_output_message_text(item))
        elif isinstance(item, NeMoGymResponseFunctionToolCall):
            history.turn.add_call(item)
        elif isinstance(item, NeMoGymFunctionCallOutput):
            history.append({"role": "tool", "tool_call_id": item.call_id, "content": item.output})
        elif isinstance(item, NeMoGymEasyInputMessage | NeMoGymMessage) and item.role == "assistant":
            history.turn.texts.append(_assistant_input_text(item.content, where))
        elif isinstance(item, NeMoGymEasyInputMessage | NeMoGymMessage):
            history.append({"role": item.role, "content": _input_content_to_chat(item.content, where)})
        else:
            raise RequestConversionError(f"{where}: item type {type(item).__name__} is not supported")
    history.flush()
    return history.messages


def tools_to_chat(tools: Iterable[Mapping[str, Any]]) -> list[JSON]:
    """Responses function tools are flat; chat tools nest the function. `strict` has no vLLM meaning."""
    converted = []
    for index, tool in enumerate(tools):
        if tool.get("type") != "function":
            raise RequestConversionError(
                f"tools[{index}]: tool type {tool.get('type')!r} has no Chat Completions equivalent "
                "(only 'function' tools are supported)"
            )
        function = {"name": tool["name"]}
        function.update(
            {key: tool[key] for key in ("description", "parameters") if tool.get(key) is not None}
        )
        converted.append({"type": "function", "function": function})
    return converted


def tool_choice_to_chat(choice: str | Mapping[str, Any]) -> str | JSON:
    if isinstance(choice, str):
        return choice
    if choice.get("type") == "function" and "name" in choice:
        return {"type": "function", "function": {"name": choice["name"]}}
    raise RequestConversionError(
        f"tool_choice: {choice.get('type')!r} has no Chat Completions equivalent "
        "(use 'auto', 'none', 'required' or {'type': 'function', 'name': ...})"
    )


def text_format_to_response_format(text_format: Mapping[str, Any]) -> JSON:
    """Responses puts the JSON schema's fields beside `type`; chat nests them under `json_schema`."""
    kind = text_format.get("type")
    if kind in ("text", "json_object"):
        return {"type": kind}
    if kind == "json_schema":
        keys = ("name", "schema", "description", "strict")
        schema = {key: text_format[key] for key in keys if text_format.get(key) is not None}
        return {"type": "json_schema", "json_schema": schema}
    raise RequestConversionError(f"text.format: type {kind!r} has no Chat Completions equivalent")


def _reject_stateful_fields(request: NeMoGymResponseCreateParamsNonStreaming) -> None:
    """These ask the server to remember or run something between calls; this server cannot, and
    answering without them would silently answer a different question."""
    if request.previous_response_id is not None:
        raise RequestConversionError(
            "previous_response_id is not supported: vllm_model keeps no state, send the whole conversation"
        )
    if request.prompt is not None:
        raise RequestConversionError("prompt (stored prompt templates) is not supported by vllm_model")
    if request.background:
        raise RequestConversionError("background: true is not supported by vllm_model")


def responses_to_chat_body(
    request: NeMoGymResponseCreateParamsNonStreaming, reasoning: ReasoningHandling
) -> JSON:
    """The chat body for a Responses request, before the server's defaults (`apply_server_defaults`)."""
    _reject_stateful_fields(request)
    body: JSON = {"messages": input_to_messages(request.input, request.instructions, reasoning)}
    was_set = request.model_fields_set
    for name in SAME_NAME_FIELDS:
        value = getattr(request, name)
        if name in was_set and value is not None:
            body[name] = value
    if request.max_output_tokens is not None:
        body["max_tokens"] = request.max_output_tokens
    if request.tools:
        body["tools"] = tools_to_chat(request.tools)
    if "tool_choice" in was_set and request.tool_choice is not None:
        body["tool_choice"] = tool_choice_to_chat(request.tool_choice)
    if request.reasoning and request.reasoning.get("effort") is not None:
        body["reasoning_effort"] = request.reasoning["effort"]
    if request.text and request.text.get("format") is not None:
        body["response_format"] = text_format_to_response_format(request.text["format"])
    return body


def metadata_json_object(metadata: Mapping[str, str] | None, key: str) -> JSON:
    """`metadata` values are strings, so per-request overrides arrive as JSON text in them."""
    raw = (metadata or {}).get(key)
    if raw is None:
        return {}
    try:
        value = orjson.loads(raw)
    except orjson.JSONDecodeError as error:
        raise RequestConversionError(f"metadata.{key} is not valid JSON: {error}") from None
    if not isinstance(value, dict):
        raise RequestConversionError(f"metadata.{key} must be a JSON object, got {type(value).__name__}")
    return value


def apply_server_defaults(body: Mapping[str, Any], defaults: ServerDefaults) -> JSON:
    """The body sent upstream: extra_body (config, then metadata) under the request, the served model,
    chat_template_kwargs (config, then the request's own if forwarded, then metadata) at the top level,
    a final assistant message left open if so configured, vLLM-hostile values fixed, and the sampling
    overrides over everything."""
    metadata = body.get("metadata")
    extra_body = {**defaults.extra_body, **metadata_json_object(metadata, "extra_body")}
    own_kwargs = body.get("chat_template_kwargs") if defaults.forward_request_chat_template_kwargs else None
    template_kwargs = {
        **defaults.chat_template_kwargs,
        **(own_kwargs or {}),
        **metadata_json_object(metadata, "chat_template_kwargs"),
    }
    request = {key: value for key, value in body.items() if key != "chat_template_kwargs"}
    upstream: JSON = {**extra_body, **request, "model": defaults.model}
    if template_kwargs:
        upstream["chat_template_kwargs"] = template_kwargs
    if defaults.continue_final_assistant_message and continues_final_message(upstream["messages"]):
        upstream.update(continue_final_message=True, add_generation_prompt=False)
    if "top_logprobs" in upstream and upstream["top_logprobs"] is None:
        del upstream["top_logprobs"]  # vLLM rejects an explicit null
    if defaults.replace_developer_role_with_system:
        upstream["messages"] = [
            {**message, "role": "system"} if message.get("role") == "developer" else message
            for message in upstream["messages"]
        ]
    return {**upstream, **defaults.sampling_overrides}


def continues_final_message(messages: list[Mapping[str, Any]]) -> bool:
    return bool(messages) and messages[-1].get("role") == "assistant"


def prompt_rendering(payload: Mapping[str, Any]) -> JSON:
    """How the template renders the prompt of `payload`: a new assistant turn opened, or its final
    assistant message left open to be continued."""
    if payload.get("continue_final_message"):
        return {"add_generation_prompt": False, "continue_final_message": True}
    return {"add_generation_prompt": True}


def ends_with_empty_assistant_turn(messages: list[Mapping[str, Any]]) -> bool:
    """True when the model would be asked to continue its own turn that produced nothing visible."""
    if not messages or messages[-1].get("role") != "assistant":
        return False
    return not messages[-1].get("content") and not messages[-1].get("tool_calls")


# ---- response direction: Chat Completions -> Responses -----------------------------------------------------


def _upstream_reasoning(message: NeMoGymChatCompletionMessage) -> str:
    extras = message.model_extra or {}
    for name in UPSTREAM_REASONING_FIELDS:
        if extras.get(name):
            return str(extras[name])
    return ""


def _reasoning_item(thoughts: list[str]) -> JSON:
    summary = [{"type": "summary_text", "text": thought} for thought in thoughts]
    return {"id": new_id("rs"), "type": "reasoning", "summary": summary}


def _message_item(text: str, refusal: str | None) -> JSON:
    content: list[JSON] = [{"type": "output_text", "text": text, "annotations": []}]
    if refusal:
        content.append({"type": "refusal", "refusal": refusal})
    return {
        "id": new_id("msg"),
        "type": "message",
        "role": "assistant",
        "status": "completed",
        "content": content,
    }


def _function_call_item(call: NeMoGymChatCompletionMessageToolCall) -> JSON:
    return {
        "id": call.id,
        "call_id": call.id,
        "type": "function_call",
        "name": call.function.name,
        "arguments": call.function.arguments,
        "status": "completed",
    }


def chat_message_to_output_items(
    message: NeMoGymChatCompletionMessage, uses_reasoning_parser: bool
) -> list[JSON]:
    """Output items of one assistant message: a reasoning item, a message, then one function call per
    tool call. The message is left out only when it would be blank and something else was produced."""
    text = message.content or ""
    upstream_reasoning = _upstream_reasoning(message)
    thoughts: list[str] = []
    if uses_reasoning_parser:
        if upstream_reasoning:
            text = f"<think>{upstream_reasoning}</think>{text}"
        thoughts, text = split_think_blocks(text)
    elif upstream_reasoning:
        raise UpstreamReplyError(
            "the upstream returned a separate reasoning field, so it runs a reasoning parser, but this "
            "server has uses_reasoning_parser: false; set it to true"
        )
    tool_calls = message.tool_calls or []
    items = [_reasoning_item(thoughts)] if thoughts else []
    if text.strip() or message.refusal or not (items or tool_calls):
        items.append(_message_item(text, message.refusal))
    items.extend(_function_call_item(call) for call in tool_calls)
    return items


def usage_to_responses(usage: NeMoGymCompletionUsage | None) -> JSON | None:
    if usage is None:
        return None
    return {
        "input_tokens": usage.prompt_tokens,
        "input_tokens_details": {"cached_tokens": 0},
        "output_tokens": usage.completion_tokens,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": usage.prompt_tokens + usage.completion_tokens,
    }


def incomplete_details_for(finish_reason: str | None) -> JSON | None:
    reason = FINISH_REASON_TO_INCOMPLETE.get(finish_reason or "")
    return None if reason is None else {"reason": reason}


def echoed_request_fields(request: NeMoGymResponseCreateParamsNonStreaming) -> JSON:
    echoed = {name: getattr(request, name) for name in ECHOED_FIELDS}
    echoed["tools"] = [dict(tool) for tool in request.tools]
    echoed["tool_choice"] = "auto" if request.tool_choice is None else request.tool_choice
    echoed["parallel_tool_calls"] = request.parallel_tool_calls is not False
    return echoed


def chat_completion_to_response(
    request: NeMoGymResponseCreateParamsNonStreaming,
    completion: NeMoGymChatCompletion,
    *,
    served_model: str,
    uses_reasoning_parser: bool,
    created_at: float,
) -> JSON:
    """The Responses answer to `request` from the upstream's completion (its first choice)."""
    if not completion.choices:
        raise UpstreamReplyError("the upstream's chat completion has no choices")
    choice = completion.choices[0]
    incomplete = incomplete_details_for(choice.finish_reason)
    return {
        **echoed_request_fields(request),
        "id": new_id("resp"),
        "object": "response",
        "created_at": created_at,
        "model": served_model,
        "output": chat_message_to_output_items(choice.message, uses_reasoning_parser),
        "status": "completed" if incomplete is None else "incomplete",
        "incomplete_details": incomplete,
        "error": None,
        "usage": usage_to_responses(completion.usage),
    }


def empty_chat_completion(model: str, finish_reason: str, created: int) -> JSON:
    """A completion with an empty assistant message: the answer when the model cannot or may not
    generate, so the rollout ends as "incomplete" instead of failing."""
    return {
        "id": f"chatcmpl-{uuid.uuid4().hex}",
        "object": "chat.completion",
        "created": created,
        "model": model,
        "choices": [
            {"index": 0, "finish_reason": finish_reason, "message": {"role": "assistant", "content": ""}}
        ],
        "usage": None,
    }


# ---- training mode: token data on messages and items --------------------------------------------------------


def token_turns(messages: list[Mapping[str, Any]]) -> list[TokenTurn]:
    """The assistant messages that carry the token data of the model call that produced them (and generated
    at least one token)."""
    turns = []
    assistant_number = 0
    for index, message in enumerate(messages):
        if message.get("role") != "assistant":
            continue
        assistant_number += 1
        # A turn that generated nothing (a prompt that did not fit) has no ids to continue from.
        if message.get("generation_token_ids"):
            turns.append(
                TokenTurn(
                    assistant_number,
                    index,
                    list(message.get("prompt_token_ids") or []),
                    list(message["generation_token_ids"]),
                )
            )
    return turns


def untracked_turn(messages: list[Mapping[str, Any]], last: TokenTurn) -> ContinuityBreak | None:
    """An assistant message after the last recorded turn that carries no token data at all: its ids were
    lost (or the caller wrote it), so the template re-tokenises its text and the prompt is not what the
    model produced. A blank message, or an explicitly empty `generation_token_ids`, is a turn the model
    generated nothing for: no loss."""
    for number, message in enumerate(
        (message for message in messages[last.message_index + 1 :] if message.get("role") == "assistant"),
        start=last.number + 1,
    ):
        if "generation_token_ids" not in message and not _is_blank(message):
            return ContinuityBreak(
                number,
                f"assistant turn {number} carries no token ids (they were lost on the way back, or the "
                "caller wrote that message), so its text was re-tokenised",
            )
    return None


def _is_blank(message: Mapping[str, Any]) -> bool:
    return not (
        _message_text(message.get("content")).strip()
        or message.get("tool_calls")
        or _message_reasoning(message)
    )


def without_token_fields(messages: list[Mapping[str, Any]]) -> list[JSON]:
    """Messages as the chat template sees them: the token data is bookkeeping, not conversation."""
    return [{key: value for key, value in message.items() if key not in TOKEN_FIELDS} for message in messages]


def generated_text_to_chat_message(text: str, parsers: OutputParsers, payload: Mapping[str, Any]) -> JSON:
    """The chat message vLLM's parsers would make of a raw generation for the chat request `payload`,
    so a token-in/token-out turn is converted to Responses output exactly like a chat completion is."""
    return parsers.message(
        text, payload.get("tools"), payload.get("tool_choice"), payload.get("chat_template_kwargs")
    )


def completion_to_chat_completion(completion: Mapping[str, Any], message: JSON) -> JSON:
    """A `/v1/completions` answer reshaped as the chat completion of `message` (its first choice)."""
    choice = completion["choices"][0]
    finish_reason = choice.get("finish_reason")
    if finish_reason == "stop" and message["tool_calls"]:
        finish_reason = "tool_calls"
    return {
        "id": completion.get("id", new_id("chatcmpl")),
        "object": "chat.completion",
        "created": completion.get("created", 0),
        "model": completion.get("model", ""),
        "choices": [{"index": 0, "finish_reason": finish_reason, "message": message}],
        "usage": completion.get("usage"),
    }


def attach_token_fields(
    response: JSON, prompt_token_ids: list[int], generation_token_ids: list[int], log_probs: list[float]
) -> JSON:
    """Token data belongs to the model call, so it goes on the turn's last output item only."""
    response["output"][-1].update(
        prompt_token_ids=prompt_token_ids,
        generation_token_ids=generation_token_ids,
        generation_log_probs=log_probs,
    )
    return response


def attach_chat_token_fields(
    completion: JSON, prompt_token_ids: list[int], generation_token_ids: list[int], log_probs: list[float]
) -> JSON:
    """On the chat route the token data goes on the first choice's message, which makes it the
    assistant message a client sends back next turn (`NeMoGymChatCompletionMessageForTraining`)."""
    completion["choices"][0]["message"].update(
        prompt_token_ids=prompt_token_ids,
        generation_token_ids=generation_token_ids,
        generation_log_probs=log_probs,
    )
    return completion


def _message_text(content: Any) -> str:
    """A chat message's content as text: a string, or its text parts joined."""
    if isinstance(content, list):
        return "".join(str(part.get("text", "")) for part in content if isinstance(part, Mapping))
    return "" if content is None else str(content)


def _call_signature(call: Mapping[str, Any]) -> tuple[str, Any]:
    """A tool call's name and arguments, compared as JSON values (the template may reformat them)."""
    function = call.get("function", call)
    arguments = function.get("arguments")
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments)
        except json.JSONDecodeError:
            pass
    return str(function.get("name")), arguments


def _message_reasoning(message: Mapping[str, Any]) -> str:
    return next((str(message[key]) for key in UPSTREAM_REASONING_FIELDS if message.get(key)), "")


def generation_mismatch(
    message: Mapping[str, Any], generated_text: str, parsers: OutputParsers, payload: Mapping[str, Any]
) -> str | None:
    """What of a history assistant message no longer says what its recorded generation did (text,
    tool calls, reasoning), or None. Reasoning is compared only when the message still carries it (a
    template or config may drop old reasoning); surrounding whitespace is ignored. The turn may have been
    asked with another `tool_choice` than this request's, so it matches if either reading says it does."""
    readings = (
        [payload] if payload.get("tool_choice") is None else [payload, {**payload, "tool_choice": None}]
    )
    mismatches = [
        message_mismatch(message, generated_text_to_chat_message(generated_text, parsers, asked))
        for asked in readings
    ]
    return None if None in mismatches else mismatches[0]


def said(message: NeMoGymChatCompletionMessage) -> JSON:
    """What an assistant message says, as `message_mismatch` compares it: text, tool calls, reasoning."""
    calls = [
        {"function": {"name": call.function.name, "arguments": call.function.arguments}}
        for call in message.tool_calls or []
    ]
    return {"content": message.content, "tool_calls": calls, "reasoning": _upstream_reasoning(message)}


def message_mismatch(message: Mapping[str, Any], generated: Mapping[str, Any]) -> str | None:
    """What of a history assistant message differs from the message its generation was read as (text,
    tool calls, or reasoning when the history message still carries it), or None."""
    if _message_text(message.get("content")).strip() != _message_text(generated.get("content")).strip():
        return "text"
    calls = [_call_signature(call) for call in message.get("tool_calls") or []]
    if calls != [_call_signature(call) for call in generated.get("tool_calls") or []]:
        return "tool calls"
    reasoning = _message_reasoning(message).strip()
    if reasoning and reasoning != _message_reasoning(generated).strip():
        return "reasoning"
    return None
