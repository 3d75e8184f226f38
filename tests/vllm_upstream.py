"""A vLLM-compatible test upstream: scripted TEXT, real TOKENISATION.

Run as `python tests/vllm_upstream.py [--max-model-len N]`. Like tests/scripted_upstream.py it binds
127.0.0.1 on an OS-chosen port and writes {"host", "port", "pid"} atomically to the file named by
NEMO_GYM_BOUND_ADDRESS_FILE (or prints it when that variable is not set). It also runs as vLLM is run,
`python tests/vllm_upstream.py serve MODEL --host H --port P [vLLM flags]` (how local_vllm_model starts
it): on that address, `--max-model-len` applied, the other flags ignored.

Why it exists: the training path (responses_api_models/vllm_model) must return the token ids the model
really produced and keep multi-turn prompts token-contiguous. A double that counts words cannot show
re-tokenisation drift; this one can, because every token id comes from a real byte-level BPE tokenizer
(trained at startup, deterministically, on CORPUS below, in a few milliseconds) and BPE merges make
tokenisation context-dependent: tokenize("weather") != tokenize("wea") + tokenize("ther").

The chat template is plain Python (no jinja2), ChatML in the style of Qwen3:

    <|im_start|>system\n{system text}\n\n# Tools ... <tools>\n{tool json per line}\n</tools> ...<|im_end|>\n
    <|im_start|>user\n{text}<|im_end|>\n
    <|im_start|>assistant\n<think>\n{reasoning}\n</think>\n\n{content}\n<tool_call>\n{json}\n</tool_call><|im_end|>\n
    <|im_start|>user\n<tool_response>\n{tool output}\n</tool_response><|im_end|>\n
    <|im_start|>assistant\n                       (add_generation_prompt; + "<think>\n\n</think>\n\n" when
                                                   chat_template_kwargs.enable_thinking is false)

  * The system turn exists when the first message is a system message or tools are given.
  * Consecutive tool messages share one user turn, one <tool_response> block each.
  * Reasoning (`reasoning_content`, `reasoning`, or a `<think>` block inside `content`) is rendered only
    for assistant turns AFTER the last real user message, as Qwen3 does: older reasoning is dropped from
    the re-rendered history. A training server that re-tokenises history therefore loses tokens it
    generated; one that keeps token ids does not.
  * Tool-call arguments are rendered as json.dumps(dict) (", " and ": " separators); string arguments
    are parsed first, as vLLM does before templating.
  * Other roles (developer, non-first system) render as `<|im_start|>{role}\n{text}<|im_end|>\n`.

A generated turn is the assistant body of the template (the part between "<|im_start|>assistant\n" and
"<|im_end|>") for the scripted step, encoded with the tokenizer, plus the EOS <|im_end|> when the turn
ends normally, as vLLM reports it. The chat message is then parsed back from the decoded tokens like
vLLM's Qwen3 reasoning parser and hermes tool parser do (so a truncated or malformed turn looks as it
would from vLLM).

Model routes (the body's `model` selects the script; any name is served):

    POST /v1/chat/completions   vLLM chat completion; logprobs, top_logprobs, return_tokens_as_token_ids,
                                return_token_ids, max_tokens / max_completion_tokens, chat_template_kwargs,
                                add_generation_prompt, continue_final_message
    POST /v1/completions        prompt = list of token ids or a string; continues with the next scripted
                                turn; logprobs (int), return_tokens_as_token_ids, return_token_ids,
                                skip_special_tokens (default true, as in vLLM; also on chat);
                                max_tokens defaults to 16, as in vLLM
    POST /tokenize              {"model", "prompt"} or {"model", "messages", "tools"?, "add_generation_prompt"
                                (default true), "continue_final_message"?, "chat_template_kwargs"?,
                                "return_token_strs"?} -> {"count", "max_model_len", "tokens", "token_strs"?}
    POST /detokenize            {"model", "tokens"} -> {"prompt": text} (special tokens kept)
    GET  /v1/models             every model name scripted, configured or called

Control routes (JSON):

    POST   /_script/{model}     {"steps": [step, ...]} appends steps to the model's queue
    DELETE /_script/{model}     drops the model's queued steps
    GET    /_requests/{model}   [{"path", "headers", "body", "received_at", "prompt_token_ids"?,
                                 "prompt_text"?}, ...]; prompt_token_ids is what the engine was given
    POST   /_config/{model}     {"max_model_len"?: int, "reasoning_parser"?: bool, "stitch_token_prefix"?:
                                 bool, "honours_required_prefix"?: bool, "closing_text"?: str} -> the
                                 model's settings; GET /_config/{model} reads them
    GET    /_tokenizer          {"vocab_size", "eos_token", "eos_token_id", "special_tokens", "added_tokens"}
    POST   /_reset              forgets every script, setting and recorded request

A step is an object (every key optional):

    "text": str               the assistant content (default "ok" when neither text nor tool_calls given)
    "reasoning": str          emitted as a <think> block; returned as `reasoning_content`
    "tool_calls": [{"name": str, "arguments": dict | str, "id"?: str}]
                              emitted as <tool_call> blocks in the token stream and parsed back into the
                              message's `tool_calls`; string arguments are emitted verbatim (a compact or
                              invalid JSON string reproduces a model's formatting or a malformed call)
    "finish_reason": str      default "tool_calls" when calls were parsed, else "stop"; with "stop" or
                              "tool_calls" the EOS token ends the generation, otherwise it does not
    "noncanonical": true      encode the turn one character at a time: the same text, but token ids the
                              tokenizer would never produce for it, as sampled models sometimes do.
                              Re-tokenising such a turn's text cannot give back its ids
    "raw": str                the whole generated text instead of text/reasoning/tool_calls, written in any
                              model family's format (markers listed in FORMAT_SPECIAL_TOKENS tokenise as
                              special tokens, as in that family's tokenizer)
    "message": {"content"?, "reasoning_content"?, "tool_calls"?: [{"name", "arguments": str}]}
                              with "raw": the message the chat route returns for it, i.e. what vLLM's
                              parsers for that family make of the text (arguments verbatim)
    "status": int, "body": {...}, "retry_after": number
                              answer this HTTP error instead (default body: vLLM's error shape)
    "repeat": n               serve the step n times before it is consumed

Model settings: "max_model_len" (default --max-model-len, 32768): a prompt that does not fit gets vLLM's
400 "This model's maximum context length is N tokens. However, you requested M tokens ...";
"reasoning_parser" (default true): when false the <think> block stays in `content`;
"stitch_token_prefix" (default false): NeMo-RL's patched vLLM behaviour: when an assistant message carries
`prompt_token_ids` and `generation_token_ids`, the templated prompt up to that turn's <|im_end|> is
replaced by those ids, so multi-turn prompts stay token-contiguous;
"honours_required_prefix" (default false, as stock vLLM ignores the field): the extension NeMo Gym's
`supply_prefix_token_ids` relies on: a chat or /tokenize request's `required_prefix_token_ids` (the
parent turn's prompt + generation ids) replaces the templated prompt up to the last assistant message's
<|im_end|>, the same way;
"closing_text" (default ""): text the template writes between a history assistant turn and its
<|im_end|>, which the model itself never generates (templates that put a token before the end marker).

Log-probs are deterministic (a function of position and token id), so the same request gives the same
tokens and log-probs. This file imports nothing from nemo_gym (only the tests' local-service starter): it
stands for vLLM.
"""

from __future__ import annotations

import argparse
import itertools
import json
import logging
import re
import sys
import time
import uuid
import zlib
from collections import deque
from dataclasses import asdict, dataclass
from typing import Any

import orjson
from aiohttp import web
from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers, trainers

from tests.local_service import serve

CHAT_PATH = "/v1/chat/completions"
COMPLETIONS_PATH = "/v1/completions"
TOKENIZE_PATH = "/tokenize"
DETOKENIZE_PATH = "/detokenize"

IM_START = "<|im_start|>"
IM_END = "<|im_end|>"
END_OF_TEXT = "<|endoftext|>"
THINK_OPEN, THINK_CLOSE = "<think>", "</think>"
CALL_OPEN, CALL_CLOSE = "<tool_call>", "</tool_call>"
RESPONSE_OPEN, RESPONSE_CLOSE = "<tool_response>", "</tool_response>"
# Tool-call markers that are special tokens in other model families' tokenizers (Mistral, Kimi K2,
# Granite, gpt-oss, Llama 3 and 4): a `raw` step written in those formats tokenises them as the real model
# does, so they vanish from generated text unless the request sets `skip_special_tokens: false`.
FORMAT_SPECIAL_TOKENS = (
    "[TOOL_CALLS]",
    "[ARGS]",
    "<|tool_calls_section_begin|>",
    "<|tool_calls_section_end|>",
    "<|tool_call_begin|>",
    "<|tool_call_argument_begin|>",
    "<|tool_call_end|>",
    "<|tool_call|>",
    "<|start|>",
    "<|channel|>",
    "<|message|>",
    "<|constrain|>",
    "<|end|>",
    "<|call|>",
    "<|python_tag|>",
    "<|python_start|>",
    "<|python_end|>",
)
# Special tokens are dropped from generated text (skip_special_tokens); the markup tokens stay, as in Qwen3.
SPECIAL_TOKENS = (END_OF_TEXT, IM_START, IM_END, *FORMAT_SPECIAL_TOKENS)
MARKUP_TOKENS = (THINK_OPEN, THINK_CLOSE, CALL_OPEN, CALL_CLOSE, RESPONSE_OPEN, RESPONSE_CLOSE)
EOS_TOKEN = IM_END

BPE_VOCAB_SIZE = 1024
DEFAULT_MAX_MODEL_LEN = 32768
COMPLETIONS_DEFAULT_MAX_TOKENS = 16  # vLLM's CompletionRequest default; chat has none
DEFAULT_TEXT = "ok"
TURN_KEYS = ("raw", "message", "text", "reasoning", "tool_calls", "finish_reason", "noncanonical")
STEP_KEYS = (
    *TURN_KEYS,
    "status",
    "body",
    "retry_after",
    "repeat",
)
CONFIG_KEYS = {
    "max_model_len": int,
    "reasoning_parser": bool,
    "stitch_token_prefix": bool,
    "honours_required_prefix": bool,
    "closing_text": str,
}

# The training text of the tokenizer. Fixed, so the vocabulary and merges are the same in every process.
CORPUS = (
    "The weather in Paris is sunny today. The weather in London is rainy and the weather in Berlin is cold.",
    "What is the weather like in Tokyo? Let me check the weather for you with the weather tool.",
    "Hello there! How are you doing today? I am doing well, thank you for asking.",
    "You are a helpful assistant. Answer the question of the user and call a tool when you need one.",
    "The user asks about the weather. I should call the get_weather function with the city argument.",
    "I think the answer is 42 because 6 times 7 is 42. Let me think about the question again.",
    "system user assistant tool function arguments name city answer question result value content",
    '{"name": "get_weather", "arguments": {"city": "Paris"}}',
    '{"name": "add", "arguments": {"a": 1, "b": 2}}',
    '{"type": "function", "function": {"name": "get_weather", "description": "Weather of a city", '
    '"parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}',
    "The result of the tool call is: sunny, 25 degrees. The temperature in the city is 25 degrees.",
    "Numbers: 0 1 2 3 4 5 6 7 8 9 10 11 12 20 25 42 100 1000 2024 2025.",
    "def add(a, b):\n    return a + b\n\nprint(add(1, 2))\n",
    "Thinking step by step: first read the question, then compute the answer, then check the answer.",
)

logger = logging.getLogger("vllm_upstream")


class BadRequest(ValueError):
    """A request vLLM would refuse with 400 (bad messages, unknown token ids, context too long)."""


class StepError(ValueError):
    """A step that cannot be scripted."""


# ----------------------------------------------------------------------------------------- tokenizer


def build_tokenizer() -> Tokenizer:
    """Train a small byte-level BPE on CORPUS: real merges, so tokenisation depends on context."""
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=BPE_VOCAB_SIZE,
        min_frequency=2,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),  # every byte encodes, whatever the text
        show_progress=False,
    )
    tokenizer.train_from_iterator(CORPUS * 2, trainer)  # twice: every pair seen once still merges
    tokenizer.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in SPECIAL_TOKENS])
    tokenizer.add_tokens([AddedToken(t, special=False, normalized=False) for t in MARKUP_TOKENS])
    return tokenizer


class TextTokenizer:
    """The few operations the routes need, with vLLM's conventions (no BOS, specials matched in text)."""

    def __init__(self, tokenizer: Tokenizer) -> None:
        self.tokenizer = tokenizer
        self.vocab_size = tokenizer.get_vocab_size()
        self.eos_id = self.token_id(EOS_TOKEN)

    def token_id(self, token: str) -> int:
        token_id = self.tokenizer.token_to_id(token)
        if token_id is None:
            raise KeyError(token)
        return token_id

    def encode(self, text: str) -> list[int]:
        return self.tokenizer.encode(text, add_special_tokens=False).ids

    def encode_per_character(self, text: str) -> list[int]:
        """Valid ids for `text` that BPE would never choose (markup tokens kept whole)."""
        pieces = re.split(f"({'|'.join(re.escape(t) for t in (*SPECIAL_TOKENS, *MARKUP_TOKENS))})", text)
        ids: list[int] = []
        for piece in pieces:
            if piece in SPECIAL_TOKENS or piece in MARKUP_TOKENS:
                ids.append(self.token_id(piece))
            else:
                ids.extend(itertools.chain.from_iterable(self.encode(char) for char in piece))
        return ids

    def decode(self, ids: list[int], skip_special_tokens: bool = False) -> str:
        self.check_ids(ids)
        return self.tokenizer.decode(ids, skip_special_tokens=skip_special_tokens)

    def token_text(self, token_id: int) -> str:
        """One token as vLLM shows it in logprobs (a partial UTF-8 sequence shows as U+FFFD)."""
        return self.tokenizer.decode([token_id], skip_special_tokens=False)

    def check_ids(self, ids: Any) -> list[int]:
        if not isinstance(ids, list) or not all(isinstance(i, int) and not isinstance(i, bool) for i in ids):
            raise BadRequest("token ids must be a list of integers")
        for token_id in ids:
            if not 0 <= token_id < self.vocab_size:
                raise BadRequest(f"Token id {token_id} is out of vocabulary")
        return ids


# ------------------------------------------------------------------------------------- chat template


def content_text(content: Any) -> str:
    """Message content as text: a string, or the text parts of a content list joined."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = [part.get("text", "") for part in content if isinstance(part, dict) and "text" in part]
        return "".join(str(part) for part in parts)
    raise BadRequest(f"unsupported message content {content!r}")


def arguments_json(arguments: Any) -> str:
    """Tool-call arguments as the template writes them: strings are parsed first, as vLLM does."""
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments)
        except json.JSONDecodeError:
            return arguments
    return json.dumps(arguments, ensure_ascii=False)


def render_tool_call(name: str, arguments: str) -> str:
    return f'{CALL_OPEN}\n{{"name": {json.dumps(name, ensure_ascii=False)}, "arguments": {arguments}}}\n{CALL_CLOSE}'


def render_assistant_body(reasoning: str | None, content: str, calls: list[tuple[str, str]]) -> str:
    """The assistant turn between "<|im_start|>assistant\\n" and "<|im_end|>": what the model generates."""
    body = content
    if reasoning:
        thought = reasoning.strip("\n")
        body = f"{THINK_OPEN}\n{thought}\n{THINK_CLOSE}\n\n" + content.lstrip("\n")
    for index, (name, arguments) in enumerate(calls):
        separator = "\n" if index > 0 or content else ""
        body += separator + render_tool_call(name, arguments)
    return body


def message_calls(message: dict[str, Any]) -> list[tuple[str, str]]:
    """(name, arguments json) of an assistant message's tool_calls, OpenAI or flat shape."""
    calls = []
    for call in message.get("tool_calls") or []:
        function = call.get("function", call) if isinstance(call, dict) else None
        if not isinstance(function, dict) or not isinstance(function.get("name"), str):
            raise BadRequest(f"malformed tool call {call!r}")
        calls.append((function["name"], arguments_json(function.get("arguments", {}))))
    return calls


def split_reasoning(message: dict[str, Any]) -> tuple[str | None, str]:
    """Reasoning and content of an assistant message: a reasoning field, or a <think> block in content."""
    content = content_text(message.get("content"))
    reasoning = message.get("reasoning_content") or message.get("reasoning")
    if isinstance(reasoning, str) and reasoning:
        return reasoning, content
    if THINK_CLOSE in content:
        before, _, after = content.partition(THINK_CLOSE)
        return before.split(THINK_OPEN)[-1], after
    return None, content


def is_tool_response_wrapper(message: dict[str, Any]) -> bool:
    text = content_text(message.get("content"))
    return text.startswith(RESPONSE_OPEN) and text.endswith(RESPONSE_CLOSE)


def last_query_index(messages: list[dict[str, Any]]) -> int:
    """Index of the last real user message; reasoning of assistant turns before it is not rendered."""
    for index in range(len(messages) - 1, -1, -1):
        message = messages[index]
        if message.get("role") == "user" and not is_tool_response_wrapper(message):
            return index
    return -1


def render_tools(tools: list[Any]) -> str:
    lines = "\n".join(json.dumps(tool, ensure_ascii=False) for tool in tools)
    return (
        "# Tools\n\nFunctions you can call, one JSON signature per line:\n"
        f"<tools>\n{lines}\n</tools>\n\n"
        f'To call a function, answer with {CALL_OPEN}\n{{"name": <name>, "arguments": <JSON object>}}\n{CALL_CLOSE}'
    )


def render_system(messages: list[dict[str, Any]], tools: list[Any]) -> tuple[str, int]:
    """The system turn (first system message and tools) and how many messages it consumed."""
    has_system = bool(messages) and messages[0].get("role") == "system"
    system_text = content_text(messages[0].get("content")) if has_system else ""
    if tools:
        text = f"{system_text}\n\n{render_tools(tools)}" if has_system else render_tools(tools)
    elif has_system:
        text = system_text
    else:
        return "", 0
    return f"{IM_START}system\n{text}{IM_END}\n", int(has_system)


def render_tool_responses(messages: list[dict[str, Any]], index: int) -> str:
    """One tool message; consecutive tool messages share one user turn."""
    previous_is_tool = index > 0 and messages[index - 1].get("role") == "tool"
    next_is_tool = index + 1 < len(messages) and messages[index + 1].get("role") == "tool"
    opening = "" if previous_is_tool else f"{IM_START}user"
    closing = "" if next_is_tool else f"{IM_END}\n"
    text = content_text(messages[index].get("content"))
    return f"{opening}\n{RESPONSE_OPEN}\n{text}\n{RESPONSE_CLOSE}{closing}"


def render_chat(
    messages: list[Any],
    tools: list[Any] | None = None,
    add_generation_prompt: bool = True,
    continue_final_message: bool = False,
    template_kwargs: dict[str, Any] | None = None,
    closing_text: str = "",
) -> str:
    """The prompt text for a conversation (see the module docstring for the format)."""
    if not all(isinstance(m, dict) and isinstance(m.get("role"), str) for m in messages):
        raise BadRequest("every message must be an object with a string 'role'")
    if add_generation_prompt and continue_final_message:
        raise BadRequest("Cannot set both `continue_final_message` and `add_generation_prompt` to True.")
    if continue_final_message and (not messages or messages[-1]["role"] != "assistant"):
        raise BadRequest("continue_final_message needs a final assistant message")
    text, start = render_system(messages, tools or [])
    query_index = last_query_index(messages)
    for index in range(start, len(messages)):
        message = messages[index]
        role = message["role"]
        open_turn = continue_final_message and index == len(messages) - 1
        if role == "assistant":
            reasoning, content = split_reasoning(message)
            kept = reasoning if index > query_index else None
            body = render_assistant_body(kept, content, message_calls(message))
            text += f"{IM_START}assistant\n{body}" + ("" if open_turn else f"{closing_text}{IM_END}\n")
        elif role == "tool":
            text += render_tool_responses(messages, index)
        else:
            text += f"{IM_START}{role}\n{content_text(message.get('content'))}{IM_END}\n"
    if add_generation_prompt:
        text += f"{IM_START}assistant\n"
        if (template_kwargs or {}).get("enable_thinking") is False:
            text += f"{THINK_OPEN}\n\n{THINK_CLOSE}\n\n"
    return text


# ------------------------------------------------------------------------------------ output parsers


@dataclass
class ParsedTurn:
    reasoning: str | None
    content: str | None
    calls: list[dict[str, Any]]


def parse_reasoning(text: str) -> tuple[str | None, str]:
    """vLLM's qwen3 reasoning parser: the template's newlines around the reasoning stay where they are."""
    if THINK_CLOSE in text:
        before, _, after = text.partition(THINK_CLOSE)
        return before.removeprefix(THINK_OPEN), after
    if text.startswith(THINK_OPEN):  # cut off while thinking
        return text.removeprefix(THINK_OPEN).removeprefix("\n"), ""
    return None, text


def parse_tool_calls(text: str) -> tuple[str, list[dict[str, Any]]]:
    """Hermes-style tool parser: any unparsable block leaves the whole text as content, no calls."""
    if CALL_OPEN not in text:
        return text, []
    blocks = re.findall(f"{re.escape(CALL_OPEN)}\n?(.*?)\n?{re.escape(CALL_CLOSE)}", text, flags=re.DOTALL)
    calls = []
    for block in blocks:
        try:
            call = json.loads(block)
        except json.JSONDecodeError:
            return text, []
        if not isinstance(call, dict) or not isinstance(call.get("name"), str) or "arguments" not in call:
            return text, []
        calls.append(call)
    if not calls:
        return text, []
    return text[: text.index(CALL_OPEN)], calls  # vLLM's hermes parser does not strip the content


def parse_turn(text: str, reasoning_parser: bool) -> ParsedTurn:
    reasoning, rest = parse_reasoning(text) if reasoning_parser else (None, text)
    content, calls = parse_tool_calls(rest)
    if not content and (reasoning is not None or calls):
        return ParsedTurn(reasoning, None, calls)
    return ParsedTurn(reasoning, content, calls)


# ---------------------------------------------------------------------------------------- generation


@dataclass
class Generation:
    token_ids: list[int]
    logprobs: list[float]
    finish_reason: str  # before tool parsing: "stop", "length" or the scripted reason


def token_logprob(position: int, token_id: int) -> float:
    """A deterministic log-prob in [-4, -0.001]: same position and id, same value, in every process."""
    return -((zlib.crc32(f"{position}:{token_id}".encode()) % 4000) + 1) / 1000


def step_body(step: dict[str, Any]) -> str:
    """The scripted turn as generated text. String arguments go out verbatim (the model's formatting)."""
    if "raw" in step:
        return step["raw"]
    calls = [
        (
            call["name"],
            args if isinstance(args := call["arguments"], str) else json.dumps(args, ensure_ascii=False),
        )
        for call in step.get("tool_calls") or []
    ]
    text = step.get("text", DEFAULT_TEXT if not calls else "")
    return render_assistant_body(step.get("reasoning"), text, calls)


def generate(tok: TextTokenizer, step: dict[str, Any], max_tokens: int) -> Generation:
    """The scripted turn as the model would sample it, ended by EOS, cut at max_tokens."""
    body = step_body(step)
    ids = tok.encode_per_character(body) if step.get("noncanonical") else tok.encode(body)
    scripted_reason = step.get("finish_reason", "stop")
    if scripted_reason in ("stop", "tool_calls"):
        ids.append(tok.eos_id)
    finish_reason = "stop" if scripted_reason == "tool_calls" else scripted_reason
    if len(ids) > max_tokens:
        ids, finish_reason = ids[:max_tokens], "length"
    return Generation(ids, [token_logprob(pos, token_id) for pos, token_id in enumerate(ids)], finish_reason)


# -------------------------------------------------------------------------------------------- state


@dataclass
class ModelSettings:
    max_model_len: int
    reasoning_parser: bool = True
    stitch_token_prefix: bool = False
    honours_required_prefix: bool = False
    closing_text: str = ""


class Upstream:
    """Tokenizer, per-model scripts, settings and request logs. One event loop, so no locks."""

    def __init__(self, tok: TextTokenizer, max_model_len: int) -> None:
        self.tok = tok
        self.default_max_model_len = max_model_len
        self.scripts: dict[str, deque[list[Any]]] = {}
        self.settings: dict[str, ModelSettings] = {}
        self.requests: dict[str, list[dict[str, Any]]] = {}

    def settings_of(self, model: str) -> ModelSettings:
        return self.settings.get(model) or ModelSettings(self.default_max_model_len)

    def append(self, model: str, steps: list[dict[str, Any]]) -> None:
        self.scripts.setdefault(model, deque()).extend([step, step.get("repeat", 1)] for step in steps)

    def take(self, model: str) -> dict[str, Any]:
        """The model's next step (consumed once served `repeat` times), else {} for the default turn."""
        queue = self.scripts.get(model)
        if not queue:
            return {}
        entry = queue[0]
        entry[1] -= 1
        if entry[1] <= 0:
            queue.popleft()
        return entry[0]

    def record(self, model: str, request: web.Request, body: Any) -> dict[str, Any]:
        """Log the request; the returned entry is completed with what the engine was given."""
        entry = {
            "path": request.path,
            "headers": {str(k): v for k, v in request.headers.items()},
            "body": body,
            "received_at": time.time(),
        }
        self.requests.setdefault(model, []).append(entry)
        return entry


def validate_tool_call(call: Any) -> None:
    if not isinstance(call, dict) or not isinstance(call.get("name"), str):
        raise StepError(
            f"a tool call must be {{'name': str, 'arguments': dict|str, 'id'?: str}}, got {call!r}"
        )
    if set(call) - {"name", "arguments", "id"}:
        raise StepError(f"unknown tool call keys {sorted(set(call) - {'name', 'arguments', 'id'})}")
    if not isinstance(call.get("arguments"), dict | str):
        raise StepError(f"tool call 'arguments' must be an object or a JSON string, got {call!r}")


def validate_step(step: Any) -> dict[str, Any]:
    if not isinstance(step, dict):
        raise StepError(f"a step must be an object, got {step!r}")
    unknown = set(step) - set(STEP_KEYS)
    if unknown:
        raise StepError(f"unknown step keys {sorted(unknown)}; allowed: {list(STEP_KEYS)}")
    if "status" in step:
        if not (isinstance(step["status"], int) and 100 <= step["status"] <= 599):
            raise StepError(f"'status' must be an HTTP status code, got {step['status']!r}")
        turn_keys = set(TURN_KEYS) & set(step)
        if turn_keys:
            raise StepError(f"an error step takes no turn keys, got {sorted(turn_keys)}")
    elif "body" in step or "retry_after" in step:
        raise StepError("'body' and 'retry_after' need 'status'")
    if "message" in step and "raw" not in step:
        raise StepError("'message' describes how a 'raw' step is parsed; give 'raw' too")
    if "raw" in step and {"text", "reasoning", "tool_calls"} & set(step):
        raise StepError("a 'raw' step is the whole generated text: no 'text', 'reasoning' or 'tool_calls'")
    if not isinstance(step.get("message", {}), dict):
        raise StepError("'message' must be an object")
    for key in ("raw", "text", "reasoning", "finish_reason"):
        if key in step and not isinstance(step[key], str):
            raise StepError(f"'{key}' must be a string")
    if not isinstance(step.get("tool_calls", []), list):
        raise StepError("'tool_calls' must be a list")
    for call in step.get("tool_calls", []):
        validate_tool_call(call)
    repeat = step.get("repeat", 1)
    if not isinstance(repeat, int) or isinstance(repeat, bool) or repeat < 1:
        raise StepError(f"'repeat' must be a positive integer, got {repeat!r}")
    return step


def validate_settings(payload: Any) -> dict[str, Any]:
    if not isinstance(payload, dict) or set(payload) - set(CONFIG_KEYS):
        raise StepError(f"settings must be an object with keys among {sorted(CONFIG_KEYS)}")
    for key, kind in CONFIG_KEYS.items():
        if key in payload and (type(payload[key]) is not kind):
            raise StepError(f"'{key}' must be {kind.__name__}")
    if payload.get("max_model_len", 1) < 1:
        raise StepError("'max_model_len' must be positive")
    return payload


# ------------------------------------------------------------------------------------ HTTP helpers


def json_response(payload: Any, status: int = 200, headers: dict[str, str] | None = None) -> web.Response:
    return web.Response(
        body=orjson.dumps(payload), status=status, headers=headers, content_type="application/json"
    )


def error_response(status: int, message: str, kind: str = "BadRequestError") -> web.Response:
    """vLLM's error shape."""
    return json_response({"error": {"message": message, "type": kind, "param": None, "code": status}}, status)


def scripted_error(step: dict[str, Any]) -> web.Response:
    status = step["status"]
    headers = {"Retry-After": str(step["retry_after"])} if "retry_after" in step else None
    payload = step.get("body") or {
        "error": {"message": f"scripted {status}", "type": "scripted", "param": None, "code": status}
    }
    return json_response(payload, status=status, headers=headers)


async def read_json_object(request: web.Request) -> dict[str, Any]:
    try:
        body = orjson.loads(await request.read())
    except orjson.JSONDecodeError:
        body = None
    if not isinstance(body, dict):
        raise BadRequest("body must be a JSON object")
    return body


def context_length_error(prompt_tokens: int, max_tokens: int | None, max_model_len: int) -> str | None:
    """vLLM's wording when the prompt, or prompt plus max_tokens, does not fit the model."""
    head = f"This model's maximum context length is {max_model_len} tokens. However, you requested"
    if max_tokens is None and prompt_tokens >= max_model_len:
        return f"{head} {prompt_tokens} tokens in the messages, Please reduce the length of the messages."
    if max_tokens is not None and prompt_tokens + max_tokens > max_model_len:
        return (
            f"{head} {prompt_tokens + max_tokens} tokens ({prompt_tokens} in the messages, {max_tokens} "
            "in the completion). Please reduce the length of the messages or completion."
        )
    return None


def optional_int(body: dict[str, Any], *keys: str) -> int | None:
    for key in keys:
        value = body.get(key)
        if value is not None:
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise BadRequest(f"'{key}' must be a non-negative integer")
            return value
    return None


def shown_token(tok: TextTokenizer, token_id: int, as_ids: bool) -> str:
    return f"token_id:{token_id}" if as_ids else tok.token_text(token_id)


def alternatives(tok: TextTokenizer, position: int, token_id: int, count: int) -> list[tuple[int, float]]:
    """The sampled token first, then `count - 1` deterministic runners-up with lower log-probs."""
    ranked = [(token_id, token_logprob(position, token_id))]
    for rank in range(1, count):
        other = (token_id + rank) % tok.vocab_size
        ranked.append((other, round(ranked[0][1] - rank, 3)))
    return ranked[:count]


# ----------------------------------------------------------------------------- prompt construction


def last_turn_with_ids(messages: list[dict[str, Any]]) -> int | None:
    for index in range(len(messages) - 1, -1, -1):
        if messages[index].get("role") == "assistant" and messages[index].get("generation_token_ids"):
            return index
    return None


def last_assistant(messages: list[dict[str, Any]]) -> int | None:
    for index in range(len(messages) - 1, -1, -1):
        if messages[index].get("role") == "assistant":
            return index
    return None


def stitched_prompt(
    tok: TextTokenizer,
    messages: list[dict[str, Any]],
    tools: list[Any] | None,
    prompt_ids: list[int],
    index: int | None,
    model_prefix: list[int],
) -> list[int]:
    """NeMo-RL's prefix replacement: the ids the model really saw and produced up to the assistant turn
    at `index` (`model_prefix`), then the templated tokens from that turn's closing <|im_end|> on. The
    turn's <|im_end|> is found by counting: the templated conversation up to it has k of them."""
    if index is None or not model_prefix:
        return prompt_ids
    if model_prefix[-1] == tok.eos_id:
        model_prefix = model_prefix[:-1]
    prefix_text = render_chat(messages[: index + 1], tools, add_generation_prompt=False)
    eos_count = tok.encode(prefix_text).count(tok.eos_id)
    eos_positions = [pos for pos, token_id in enumerate(prompt_ids) if token_id == tok.eos_id]
    if eos_count == 0 or len(eos_positions) < eos_count:
        raise BadRequest("no <|im_end|> closes the assistant turn that carries token ids")
    return model_prefix + prompt_ids[eos_positions[eos_count - 1] :]


def chat_prompt(state: Upstream, body: dict[str, Any], model: str) -> tuple[str, list[int]]:
    """The templated prompt text and the ids the engine would be given for a messages request."""
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise BadRequest("'messages' must be a non-empty list")
    tools = body.get("tools")
    if tools is not None and not isinstance(tools, list):
        raise BadRequest("'tools' must be a list")
    kwargs = body.get("chat_template_kwargs") or {}
    if not isinstance(kwargs, dict):
        raise BadRequest("'chat_template_kwargs' must be an object")
    continue_final = bool(body.get("continue_final_message", False))
    add_generation_prompt = bool(body.get("add_generation_prompt", not continue_final))
    settings = state.settings_of(model)
    text = render_chat(messages, tools, add_generation_prompt, continue_final, kwargs, settings.closing_text)
    ids = state.tok.encode(text)
    required = body.get("required_prefix_token_ids")
    if settings.honours_required_prefix and required is not None:
        required = state.tok.check_ids(required)
        ids = stitched_prompt(state.tok, messages, tools, ids, last_assistant(messages), required)
    elif settings.stitch_token_prefix and (index := last_turn_with_ids(messages)) is not None:
        carried = messages[index]
        model_prefix = state.tok.check_ids(carried.get("prompt_token_ids") or [])
        model_prefix += state.tok.check_ids(carried["generation_token_ids"])
        ids = stitched_prompt(state.tok, messages, tools, ids, index, model_prefix)
    return text, ids


# ----------------------------------------------------------------------------------------- handlers


def chat_logprobs(tok: TextTokenizer, generation: Generation, as_ids: bool, top: int) -> dict[str, Any]:
    content = []
    for position, (token_id, logprob) in enumerate(
        zip(generation.token_ids, generation.logprobs, strict=True)
    ):
        shown = shown_token(tok, token_id, as_ids)
        content.append(
            {
                "token": shown,
                "logprob": logprob,
                "bytes": list(tok.token_text(token_id).encode("utf-8", errors="replace")),
                "top_logprobs": [
                    {
                        "token": shown_token(tok, other, as_ids),
                        "logprob": other_logprob,
                        "bytes": list(tok.token_text(other).encode("utf-8", errors="replace")),
                    }
                    for other, other_logprob in alternatives(tok, position, token_id, top)
                ],
            }
        )
    return {"content": content}


def response_tool_calls(parsed: ParsedTurn, step: dict[str, Any]) -> list[dict[str, Any]]:
    scripted_ids = [call.get("id") for call in step.get("tool_calls") or []]
    calls = []
    for index, call in enumerate(parsed.calls):
        call_id = scripted_ids[index] if index < len(scripted_ids) and scripted_ids[index] else None
        # A `raw` step's message gives the arguments exactly as that family's parser writes them.
        arguments = call["arguments"] if "message" in step else arguments_json(call["arguments"])
        calls.append(
            {
                "id": call_id or f"chatcmpl-tool-{uuid.uuid4().hex}",
                "type": "function",
                "function": {"name": call["name"], "arguments": arguments},
            }
        )
    return calls


def build_chat_completion(
    state: Upstream, body: dict[str, Any], step: dict[str, Any], prompt_ids: list[int], generation: Generation
) -> dict[str, Any]:
    settings = state.settings_of(str(body.get("model", "")))
    text = generated_text(state.tok, body, generation)
    parsed = scripted_parse(step) or parse_turn(text, settings.reasoning_parser)
    tool_calls = response_tool_calls(parsed, step)
    finish_reason = generation.finish_reason
    if finish_reason == "stop" and tool_calls:
        finish_reason = "tool_calls"
    logprobs = None
    if body.get("logprobs"):
        top = optional_int(body, "top_logprobs") or 0
        logprobs = chat_logprobs(state.tok, generation, bool(body.get("return_tokens_as_token_ids")), top)
    choice: dict[str, Any] = {
        "index": 0,
        "message": {
            "role": "assistant",
            "content": parsed.content,
            "reasoning_content": parsed.reasoning,
            "tool_calls": tool_calls,
        },
        "logprobs": logprobs,
        "finish_reason": finish_reason,
        "stop_reason": None,
    }
    completion: dict[str, Any] = {
        "id": f"chatcmpl-{uuid.uuid4().hex}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": body.get("model", ""),
        "choices": [choice],
        "usage": token_usage(prompt_ids, generation),
        "prompt_logprobs": None,
    }
    if body.get("return_token_ids"):
        completion["prompt_token_ids"] = prompt_ids
        choice["token_ids"] = generation.token_ids
    return completion


def skips_special_tokens(body: dict[str, Any]) -> bool:
    """vLLM's `skip_special_tokens` sampling parameter, true unless the request says false."""
    return body.get("skip_special_tokens") is not False


def generated_text(tok: TextTokenizer, body: dict[str, Any], generation: Generation) -> str:
    """The text vLLM returns for a generation: never the EOS that stopped it, even with special tokens kept."""
    ids = generation.token_ids
    if ids and ids[-1] == tok.eos_id:
        ids = ids[:-1]
    return tok.decode(ids, skip_special_tokens=skips_special_tokens(body))


def scripted_parse(step: dict[str, Any]) -> ParsedTurn | None:
    """A `raw` step's `message`: what vLLM's parsers for that model family make of the raw text."""
    message = step.get("message")
    if message is None:
        return None
    calls = [{"name": call["name"], "arguments": call["arguments"]} for call in message.get("tool_calls", [])]
    return ParsedTurn(message.get("reasoning_content"), message.get("content"), calls)


def token_usage(prompt_ids: list[int], generation: Generation) -> dict[str, Any]:
    return {
        "prompt_tokens": len(prompt_ids),
        "completion_tokens": len(generation.token_ids),
        "total_tokens": len(prompt_ids) + len(generation.token_ids),
        "prompt_tokens_details": None,
    }


def completion_logprobs(tok: TextTokenizer, generation: Generation, as_ids: bool, top: int) -> dict[str, Any]:
    tokens, offsets, tops, offset = [], [], [], 0
    for position, token_id in enumerate(generation.token_ids):
        tokens.append(shown_token(tok, token_id, as_ids))
        offsets.append(offset)
        offset += len(tok.decode([token_id], skip_special_tokens=True))
        ranked = alternatives(tok, position, token_id, top + 1)
        tops.append({shown_token(tok, other, as_ids): logprob for other, logprob in ranked})
    return {
        "text_offset": offsets,
        "token_logprobs": generation.logprobs,
        "tokens": tokens,
        "top_logprobs": tops,
    }


def build_completion(
    state: Upstream, body: dict[str, Any], prompt_ids: list[int], generation: Generation
) -> dict[str, Any]:
    logprobs = None
    if body.get("logprobs") is not None and body.get("logprobs") is not False:
        top = 0 if body["logprobs"] is True else optional_int(body, "logprobs") or 0
        logprobs = completion_logprobs(
            state.tok, generation, bool(body.get("return_tokens_as_token_ids")), top
        )
    choice: dict[str, Any] = {
        "index": 0,
        "text": generated_text(state.tok, body, generation),
        "logprobs": logprobs,
        "finish_reason": generation.finish_reason,
        "stop_reason": None,
        "prompt_logprobs": None,
    }
    if body.get("return_token_ids"):
        choice["prompt_token_ids"] = prompt_ids
        choice["token_ids"] = generation.token_ids
    return {
        "id": f"cmpl-{uuid.uuid4().hex}",
        "object": "text_completion",
        "created": int(time.time()),
        "model": body.get("model", ""),
        "choices": [choice],
        "usage": token_usage(prompt_ids, generation),
    }


def completion_prompt(tok: TextTokenizer, body: dict[str, Any]) -> list[int]:
    """The ids of a completions prompt: token ids as given (one prompt only), or an encoded string."""
    prompt = body.get("prompt")
    if isinstance(prompt, list) and len(prompt) == 1 and isinstance(prompt[0], list | str):
        prompt = prompt[0]  # a batch of one
    if isinstance(prompt, str):
        return tok.encode(prompt)
    if isinstance(prompt, list) and prompt:
        return tok.check_ids(prompt)
    raise BadRequest("'prompt' must be a string or a non-empty list of token ids (one prompt)")


def generate_or_refuse(
    state: Upstream, model: str, prompt_ids: list[int], max_tokens: int | None
) -> tuple[Generation, dict[str, Any]] | web.Response:
    """Check the context length (before a step is consumed), then take the step and generate."""
    max_model_len = state.settings_of(model).max_model_len
    refusal = context_length_error(len(prompt_ids), max_tokens, max_model_len)
    if refusal:
        return error_response(400, refusal)
    step = state.take(model)
    if "status" in step:
        return scripted_error(step)
    budget = max_model_len - len(prompt_ids) if max_tokens is None else max_tokens
    return generate(state.tok, step, budget), step


def make_chat_handler(state: Upstream):
    async def handle(request: web.Request) -> web.Response:
        body = await read_json_object(request)
        model = str(body.get("model", ""))
        record = state.record(model, request, body)
        prompt_text, prompt_ids = chat_prompt(state, body, model)
        record.update(prompt_token_ids=prompt_ids, prompt_text=prompt_text)
        outcome = generate_or_refuse(
            state, model, prompt_ids, optional_int(body, "max_completion_tokens", "max_tokens")
        )
        if isinstance(outcome, web.Response):
            return outcome
        generation, step = outcome
        return json_response(build_chat_completion(state, body, step, prompt_ids, generation))

    return handle


def make_completions_handler(state: Upstream):
    async def handle(request: web.Request) -> web.Response:
        body = await read_json_object(request)
        model = str(body.get("model", ""))
        record = state.record(model, request, body)
        prompt_ids = completion_prompt(state.tok, body)
        record["prompt_token_ids"] = prompt_ids
        max_tokens = optional_int(body, "max_tokens")
        outcome = generate_or_refuse(
            state, model, prompt_ids, COMPLETIONS_DEFAULT_MAX_TOKENS if max_tokens is None else max_tokens
        )
        if isinstance(outcome, web.Response):
            return outcome
        generation, _ = outcome
        return json_response(build_completion(state, body, prompt_ids, generation))

    return handle


def make_tokenize_handler(state: Upstream):
    async def handle(request: web.Request) -> web.Response:
        body = await read_json_object(request)
        model = str(body.get("model", ""))
        state.record(model, request, body)
        if "messages" in body:
            _, ids = chat_prompt(state, body, model)
        elif isinstance(body.get("prompt"), str):
            ids = state.tok.encode(body["prompt"])
        else:
            raise BadRequest("give 'prompt' (a string) or 'messages'")
        answer: dict[str, Any] = {
            "count": len(ids),
            "max_model_len": state.settings_of(model).max_model_len,
            "tokens": ids,
        }
        if body.get("return_token_strs"):
            answer["token_strs"] = [state.tok.tokenizer.id_to_token(token_id) for token_id in ids]
        return json_response(answer)

    return handle


def make_detokenize_handler(state: Upstream):
    async def handle(request: web.Request) -> web.Response:
        body = await read_json_object(request)
        state.record(str(body.get("model", "")), request, body)
        return json_response({"prompt": state.tok.decode(body.get("tokens"))})

    return handle


@web.middleware
async def bad_requests_as_400(request: web.Request, handler) -> web.StreamResponse:
    """BadRequest anywhere in a handler is vLLM's 400; StepError is the test author's 400."""
    try:
        return await handler(request)
    except BadRequest as error:
        return error_response(400, str(error))
    except StepError as error:
        return error_response(400, str(error), "invalid_script")


def make_control_routes(state: Upstream) -> list[web.RouteDef]:
    async def append_steps(request: web.Request) -> web.Response:
        payload = await read_json_object(request)
        if not isinstance(payload.get("steps"), list):
            raise StepError('body must be {"steps": [...]}')
        steps = [validate_step(step) for step in payload["steps"]]
        model = request.match_info["model"]
        state.append(model, steps)
        return json_response({"model": model, "queued": len(state.scripts[model])})

    async def clear_steps(request: web.Request) -> web.Response:
        state.scripts.pop(request.match_info["model"], None)
        return json_response({"cleared": True})

    async def recorded(request: web.Request) -> web.Response:
        return json_response(state.requests.get(request.match_info["model"], []))

    async def set_settings(request: web.Request) -> web.Response:
        model = request.match_info["model"]
        update = validate_settings(await read_json_object(request))
        state.settings[model] = ModelSettings(**{**asdict(state.settings_of(model)), **update})
        return json_response(asdict(state.settings[model]))

    async def get_settings(request: web.Request) -> web.Response:
        return json_response(asdict(state.settings_of(request.match_info["model"])))

    async def tokenizer_info(request: web.Request) -> web.Response:
        tok = state.tok
        return json_response(
            {
                "vocab_size": tok.vocab_size,
                "eos_token": EOS_TOKEN,
                "eos_token_id": tok.eos_id,
                "special_tokens": {token: tok.token_id(token) for token in SPECIAL_TOKENS},
                "added_tokens": {token: tok.token_id(token) for token in MARKUP_TOKENS},
            }
        )

    async def reset(request: web.Request) -> web.Response:
        state.scripts.clear()
        state.settings.clear()
        state.requests.clear()
        return json_response({"reset": True})

    return [
        web.post("/_script/{model:.+}", append_steps),
        web.delete("/_script/{model:.+}", clear_steps),
        web.get("/_requests/{model:.+}", recorded),
        web.post("/_config/{model:.+}", set_settings),
        web.get("/_config/{model:.+}", get_settings),
        web.get("/_tokenizer", tokenizer_info),
        web.post("/_reset", reset),
    ]


def make_models_handler(state: Upstream):
    async def handle(request: web.Request) -> web.Response:
        names = sorted(state.scripts.keys() | state.settings.keys() | state.requests.keys())
        data = [
            {
                "id": name,
                "object": "model",
                "created": int(time.time()),
                "owned_by": "vllm",
                "max_model_len": state.settings_of(name).max_model_len,
            }
            for name in names
        ]
        return json_response({"object": "list", "data": data})

    return handle


def make_app(max_model_len: int = DEFAULT_MAX_MODEL_LEN) -> web.Application:
    state = Upstream(TextTokenizer(build_tokenizer()), max_model_len)
    app = web.Application(client_max_size=64 * 1024 * 1024, middlewares=[bad_requests_as_400])
    app.router.add_post(CHAT_PATH, make_chat_handler(state))
    app.router.add_post(COMPLETIONS_PATH, make_completions_handler(state))
    app.router.add_post(TOKENIZE_PATH, make_tokenize_handler(state))
    app.router.add_post(DETOKENIZE_PATH, make_detokenize_handler(state))
    app.router.add_get("/v1/models", make_models_handler(state))
    app.router.add_routes(make_control_routes(state))
    return app


def main() -> None:
    """`vllm_upstream.py [--max-model-len N]`, or as `vllm serve` is called (how local_vllm_model starts
    vLLM): `vllm_upstream.py serve MODEL --host H --port P [--max-model-len N] [other vLLM flags]`, where
    flags this double does not know are accepted and ignored."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--max-model-len", type=int, default=DEFAULT_MAX_MODEL_LEN)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    if sys.argv[1:2] == ["serve"]:
        parser.add_argument("serve", choices=["serve"])
        parser.add_argument("model")
        args, ignored = parser.parse_known_args()
        logging.getLogger("vllm_upstream").warning("serving %s; flags ignored here: %s", args.model, ignored)
    else:
        args = parser.parse_args()
    # The tokenizer is trained here, before the address is published.
    serve(make_app(args.max_model_len), args.host, args.port)


if __name__ == "__main__":
    main()
