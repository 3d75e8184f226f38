"""`POST /v1/responses` with `stream: true`: the request a streaming client (the `codex` CLI, the
`openai` client's `responses.create(stream=True)` / `responses.stream()`) sends, made into the strict
params, and a finished response written as the Responses event sequence.

Request side. Streaming clients send more than the strict params know: bookkeeping fields
(`client_metadata`, `prompt_cache_key`), `namespace` tools (functions grouped under a name, called back as
`namespace` + `name`), `additional_tools` input items carrying tools, input items a backend cannot take.
Namespace tools become plain functions named `<namespace>__<name>` (replayed calls too), carried tools are
moved to `tools`, and unknown items and fields are dropped (each logged). Unlike NeMo Gym, leading
system/developer messages stay input items (moving them into `instructions` would change the request a
replayed or captured trajectory is matched by).

Response side. `response.created` (in progress, no output), `response.in_progress`, then per output item
`response.output_item.added`, the item's content events (text and refusal parts, function-call
arguments, reasoning summaries: each `...added`, one delta holding the whole text, `...done`),
`response.output_item.done`, and `response.completed` with the whole response. Flattened names are split
back into `namespace` + `name`. Items keep every field the non-stream answer has (token ids included).
"""

from __future__ import annotations

import copy
import logging
from collections.abc import Iterator
from typing import Any, TypeVar
from uuid import uuid4

from pydantic import ValidationError

from nemo_gym.serving.model_streaming import sse_event
from nemo_gym.wire.responses import NeMoGymResponseCreateParamsNonStreaming

logger = logging.getLogger("nemo_gym.responses_streaming")

NAMESPACE_TOOL_DELIMITER = "__"
Params = TypeVar("Params", bound=NeMoGymResponseCreateParamsNonStreaming)
# A flattened function name -> (namespace, name), to give calls back their namespaced form.
NamespaceMap = dict[str, tuple[str, str]]

_ITEM_TYPES = frozenset({"message", "function_call", "function_call_output", "reasoning"})


def flatten_namespace_tools(tools: Any) -> tuple[list[Any], NamespaceMap]:
    """Each `namespace` tool's functions as plain function tools named `<namespace>__<name>`."""
    flat: list[Any] = []
    names: NamespaceMap = {}
    for tool in tools if isinstance(tools, list) else []:
        if not (isinstance(tool, dict) and tool.get("type") == "namespace"):
            flat.append(tool)
            continue
        namespace = str(tool.get("name") or "")
        functions = tool.get("tools")
        for function in functions if isinstance(functions, list) else []:
            if isinstance(function, dict) and function.get("name"):
                joined = f"{namespace}{NAMESPACE_TOOL_DELIMITER}{function['name']}"
                flat.append({**function, "type": "function", "name": joined})
                names[joined] = (namespace, str(function["name"]))
    return flat, names


def restore_namespace_tool_calls(items: list[Any], names: NamespaceMap) -> list[Any]:
    """Output items with each call of a flattened function given its `namespace` and `name` back."""
    restored = []
    for item in items:
        if isinstance(item, dict) and item.get("type") == "function_call" and item.get("name") in names:
            namespace, name = names[item["name"]]
            item = {**item, "namespace": namespace, "name": name}
        restored.append(item)
    return restored


def sanitize_streaming_responses_body(
    body: dict[str, Any],
    params_model: type[NeMoGymResponseCreateParamsNonStreaming] = NeMoGymResponseCreateParamsNonStreaming,
) -> tuple[dict[str, Any], NamespaceMap]:
    """The streaming request as a body for the strict params (`params_model`, a server's own subclass if it
    has one: its own fields are kept), and the namespace map of its tools."""
    known = params_model.model_fields.keys()
    body = copy.deepcopy(body)
    body.pop("stream", None)
    tools, names = flatten_namespace_tools(body.get("tools"))
    if isinstance(body.get("tools"), list):
        body["tools"] = tools
    items = body.get("input")
    if isinstance(items, list):
        kept, carried = _kept_input_items(items)
        carried_flat, carried_names = flatten_namespace_tools(carried)
        names.update(carried_names)
        if carried:
            body["tools"] = [*(body.get("tools") or []), *_function_tools(carried_flat)]
        body["input"] = kept
    dropped = sorted(set(body) - known)
    if dropped:
        logger.debug("streaming /v1/responses: dropped fields the params do not know: %s", dropped)
    return {key: value for key, value in body.items() if key in known}, names


def _kept_input_items(items: list[Any]) -> tuple[list[Any], list[Any]]:
    """The input items a backend can take (namespaced calls flattened), and the tools carried by
    `additional_tools` items."""
    kept: list[Any] = []
    carried: list[Any] = []
    for item in items:
        kind = item.get("type", "message") if isinstance(item, dict) else None
        if not isinstance(kind, str):
            logger.warning("streaming /v1/responses: dropped an input item without a type")
        elif kind == "additional_tools":
            tools = item.get("tools")
            carried.extend(tools if isinstance(tools, list) else [])
        elif kind in _ITEM_TYPES:
            if kind == "function_call" and item.get("namespace"):
                item["name"] = f"{item.pop('namespace')}{NAMESPACE_TOOL_DELIMITER}{item.get('name')}"
            kept.append(item)
        else:
            logger.warning("streaming /v1/responses: dropped an input item of type %r", kind)
    return kept, carried


def _function_tools(tools: list[Any]) -> list[Any]:
    usable = [tool for tool in tools if isinstance(tool, dict) and tool.get("type") == "function"]
    if len(usable) < len(tools):
        logger.warning(
            "streaming /v1/responses: dropped %d carried tools that are not functions",
            len(tools) - len(usable),
        )
    return usable


def validate_streaming_responses_params(
    body: dict[str, Any], params_model: type[Params] = NeMoGymResponseCreateParamsNonStreaming
) -> Params:
    """The strict params (`params_model`, a server's own subclass if it has one) of a sanitized body; a
    nested field the params forbid (newer than them, such as a tool key) is dropped and logged, any other
    problem raises the `ValidationError`."""
    body = copy.deepcopy(body)
    while True:
        try:
            return params_model.model_validate(body)
        except ValidationError as error:
            forbidden = [problem["loc"] for problem in error.errors() if problem["type"] == "extra_forbidden"]
            if not forbidden or not all(_delete_at(body, loc) for loc in forbidden):
                raise
            logger.warning(
                "streaming /v1/responses: dropped unknown fields %s",
                [".".join(map(str, loc)) for loc in forbidden],
            )


def _delete_at(body: Any, loc: tuple[Any, ...]) -> bool:
    """Delete the value at a validation error's location, whose steps may include the tag of a union
    branch (`tools.0.function.x`: `function` names the branch, not a key); False when there is no such
    value."""
    node = body
    for step in loc[:-1]:
        if isinstance(node, dict) and step in node:
            node = node[step]
        elif isinstance(node, list) and isinstance(step, int) and 0 <= step < len(node):
            node = node[step]
        elif not isinstance(step, str):
            return False
    if isinstance(node, dict) and loc[-1] in node:
        del node[loc[-1]]
        return True
    return False


class _Events:
    """Numbers the events of one stream (`sequence_number`, which clients order by)."""

    def __init__(self) -> None:
        self.count = 0

    def __call__(self, kind: str, **fields: Any) -> bytes:
        payload = {"type": kind, "sequence_number": self.count, **fields}
        self.count += 1
        return sse_event(kind, payload)


def synthesize_responses_sse(response: dict[str, Any], names: NamespaceMap | None = None) -> Iterator[bytes]:
    """The event sequence of a finished response (a JSON object)."""
    items = restore_namespace_tool_calls(list(response.get("output") or []), names or {})
    started = {**response, "status": "in_progress", "output": []}
    event = _Events()
    yield event("response.created", response=started)
    yield event("response.in_progress", response=started)
    for index, item in enumerate(items):
        yield from _item_events(event, index, item)
    yield event("response.completed", response={**response, "output": items})


def _item_events(event: _Events, index: int, item: Any) -> Iterator[bytes]:
    kind = item.get("type", "message") if isinstance(item, dict) else None
    item_id = (item.get("id") if isinstance(item, dict) else None) or f"item_{index}"
    where = {"item_id": item_id, "output_index": index}
    if kind == "message" and isinstance(item.get("content"), list):
        yield event(
            "response.output_item.added",
            output_index=index,
            item={**item, "status": "in_progress", "content": []},
        )
        for part_index, part in enumerate(item["content"]):
            yield from _part_events(event, {**where, "content_index": part_index}, part)
    elif kind == "function_call":
        yield event(
            "response.output_item.added",
            output_index=index,
            item={**item, "status": "in_progress", "arguments": ""},
        )
        arguments = str(item.get("arguments") or "")
        yield event("response.function_call_arguments.delta", **where, delta=arguments)
        yield event(
            "response.function_call_arguments.done", **where, name=item.get("name"), arguments=arguments
        )
    elif kind == "reasoning":
        yield event("response.output_item.added", output_index=index, item={**item, "summary": []})
        for summary_index, summary in enumerate(item.get("summary") or []):
            at = {**where, "summary_index": summary_index}
            text = str(summary.get("text") or "") if isinstance(summary, dict) else ""
            yield event(
                "response.reasoning_summary_part.added", **at, part={"type": "summary_text", "text": ""}
            )
            yield event("response.reasoning_summary_text.delta", **at, delta=text)
            yield event("response.reasoning_summary_text.done", **at, text=text)
            yield event(
                "response.reasoning_summary_part.done", **at, part={"type": "summary_text", "text": text}
            )
    else:
        yield event("response.output_item.added", output_index=index, item=item)
    yield event("response.output_item.done", output_index=index, item=item)


def _part_events(event: _Events, where: dict[str, Any], part: Any) -> Iterator[bytes]:
    kind = part.get("type") if isinstance(part, dict) else None
    if kind == "output_text":
        text = str(part.get("text") or "")
        yield event(
            "response.content_part.added",
            **where,
            part={"type": "output_text", "text": "", "annotations": []},
        )
        yield event("response.output_text.delta", **where, delta=text, logprobs=[])
        yield event("response.output_text.done", **where, text=text, logprobs=[])
    elif kind == "refusal":
        refusal = str(part.get("refusal") or "")
        yield event("response.content_part.added", **where, part={"type": "refusal", "refusal": ""})
        yield event("response.refusal.delta", **where, delta=refusal)
        yield event("response.refusal.done", **where, refusal=refusal)
    else:
        yield event("response.content_part.added", **where, part=part)
    yield event("response.content_part.done", **where, part=part)


def synthesize_responses_failure_sse(message: str, *, code: str = "server_error") -> Iterator[bytes]:
    """The end of a stream whose response failed after the stream had started (`response.failed`)."""
    response = {
        "id": f"resp_{uuid4().hex}",
        "object": "response",
        "status": "failed",
        "output": [],
        "error": {"code": code, "message": message},
    }
    event = _Events()
    yield event("response.created", response={**response, "status": "in_progress", "error": None})
    yield event("response.failed", response=response)
