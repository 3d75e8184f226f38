"""Responses API types: content parts, the item union (training variants included), the request body and
the response. The conventions they follow are described in `nemo_gym.wire`."""

from typing import Annotated, Any, Literal, NotRequired, Required

from pydantic import BaseModel, ConfigDict, Discriminator, Field, Tag, model_validator, with_config
from typing_extensions import TypedDict  # pydantic needs this TypedDict on Python < 3.12

from nemo_gym.wire.base import TokenIDLogProbMixin, WireModel, has_token_fields

# ------------------------------------------------------------------------------------------------------
# Responses API content parts
# ------------------------------------------------------------------------------------------------------


class NeMoGymResponseInputText(WireModel):
    _wire_constants = ("type",)

    text: str
    type: Literal["input_text"] = "input_text"


class NeMoGymResponseInputImage(WireModel):
    _wire_constants = ("type",)

    detail: Literal["low", "high", "auto"] = "auto"
    type: Literal["input_image"] = "input_image"
    file_id: str | None = None
    image_url: str | None = None


class NeMoGymResponseInputFile(WireModel):
    _wire_constants = ("type",)

    type: Literal["input_file"] = "input_file"
    file_data: str | None = None
    file_id: str | None = None
    file_url: str | None = None
    filename: str | None = None


NeMoGymResponseInputContent = Annotated[
    NeMoGymResponseInputText | NeMoGymResponseInputImage | NeMoGymResponseInputFile,
    Field(discriminator="type"),
]


class NeMoGymResponseOutputText(WireModel):
    _wire_constants = ("type",)

    annotations: list[dict[str, Any]]
    text: str
    type: Literal["output_text"] = "output_text"
    logprobs: list[dict[str, Any]] | None = None


class NeMoGymResponseOutputRefusal(WireModel):
    _wire_constants = ("type",)

    refusal: str
    type: Literal["refusal"] = "refusal"


NeMoGymContent = Annotated[
    NeMoGymResponseOutputText | NeMoGymResponseOutputRefusal, Field(discriminator="type")
]


class NeMoGymSummary(WireModel):
    _wire_constants = ("type",)

    text: str
    type: Literal["summary_text"] = "summary_text"


# ------------------------------------------------------------------------------------------------------
# Responses API items (the same union is used for input and output)
# ------------------------------------------------------------------------------------------------------


class NeMoGymEasyInputMessage(WireModel):
    """A chat-style message; ``type`` may be omitted on the wire, so it is not forced into dumps."""

    content: str | list[NeMoGymResponseInputContent]
    role: Literal["user", "assistant", "system", "developer"]
    type: Literal["message"] = "message"


class NeMoGymMessage(WireModel):
    """An input message with content parts and a status (never from the assistant)."""

    content: list[NeMoGymResponseInputContent]
    role: Literal["user", "system", "developer"]
    status: Literal["in_progress", "completed", "incomplete"] = "completed"
    type: Literal["message"] = "message"


class NeMoGymResponseOutputMessage(WireModel):
    """An assistant message produced by a model (also valid as input for the next turn)."""

    _wire_constants = ("type", "role")

    id: str
    content: list[NeMoGymContent]
    role: Literal["assistant"] = "assistant"
    status: Literal["in_progress", "completed", "incomplete"] = "completed"
    type: Literal["message"] = "message"


class NeMoGymResponseFunctionToolCall(WireModel):
    _wire_constants = ("type",)

    arguments: str  # JSON text, exactly as the model generated it (may be invalid JSON)
    call_id: str
    name: str
    type: Literal["function_call"] = "function_call"
    id: str | None = None
    status: Literal["in_progress", "completed", "incomplete"] | None = None


class NeMoGymFunctionCallOutput(WireModel):
    _wire_constants = ("type",)

    call_id: str
    output: str
    type: Literal["function_call_output"] = "function_call_output"
    id: str | None = None
    status: Literal["in_progress", "completed", "incomplete"] | None = None


class NeMoGymResponseReasoningItem(WireModel):
    """Reasoning summary. Deliberately without ``status``: OpenAI rejects it when the item is re-submitted,
    so an upstream's ``status`` is dropped on validation instead of being kept as an extra key."""

    _wire_constants = ("type",)

    id: str
    summary: list[NeMoGymSummary]
    type: Literal["reasoning"] = "reasoning"
    encrypted_content: str | None = None

    @model_validator(mode="before")
    @classmethod
    def _without_status(cls, value: Any) -> Any:
        if isinstance(value, dict) and "status" in value:
            return {key: item for key, item in value.items() if key != "status"}
        return value


class NeMoGymEasyInputMessageForTraining(TokenIDLogProbMixin, NeMoGymEasyInputMessage):
    pass


class NeMoGymMessageForTraining(TokenIDLogProbMixin, NeMoGymMessage):
    pass


class NeMoGymResponseOutputMessageForTraining(TokenIDLogProbMixin, NeMoGymResponseOutputMessage):
    pass


class NeMoGymResponseFunctionToolCallForTraining(TokenIDLogProbMixin, NeMoGymResponseFunctionToolCall):
    pass


class NeMoGymResponseReasoningItemForTraining(TokenIDLogProbMixin, NeMoGymResponseReasoningItem):
    pass


RESPONSES_TO_TRAIN: dict[type[BaseModel], type[BaseModel]] = {
    NeMoGymEasyInputMessage: NeMoGymEasyInputMessageForTraining,
    NeMoGymMessage: NeMoGymMessageForTraining,
    NeMoGymResponseOutputMessage: NeMoGymResponseOutputMessageForTraining,
    NeMoGymResponseFunctionToolCall: NeMoGymResponseFunctionToolCallForTraining,
    NeMoGymResponseReasoningItem: NeMoGymResponseReasoningItemForTraining,
}

_ITEM_KIND_BY_CLASS: dict[type, str] = {
    NeMoGymEasyInputMessage: "easy_message",
    NeMoGymMessage: "message",
    NeMoGymResponseOutputMessage: "output_message",
    NeMoGymResponseFunctionToolCall: "function_call",
    NeMoGymFunctionCallOutput: "function_call_output",
    NeMoGymResponseReasoningItem: "reasoning",
}
_TRAINABLE_ITEM_KINDS = {_ITEM_KIND_BY_CLASS[cls] for cls in RESPONSES_TO_TRAIN}
_OUTPUT_PART_TYPES = ("output_text", "refusal")  # a tuple: part types from the wire may be unhashable


def _kind_of_instance(value: BaseModel, kind_by_class: dict[type, str]) -> str | None:
    """The kind registered for the instance's class or its nearest registered base class."""
    for cls in type(value).__mro__:
        if cls in kind_by_class:
            return kind_by_class[cls]
    return None


def _part_type(part: Any) -> Any:
    return part.get("type") if isinstance(part, dict) else getattr(part, "type", None)


def _message_kind(value: dict[str, Any]) -> str | None:
    """Which message shape a ``type: "message"`` (or untyped) item is, from its role and content."""
    role, content = value.get("role"), value.get("content")
    if role == "assistant":
        # Assistant text as a plain string is an easy message; a model's output message carries an id
        # and output_text/refusal parts.
        if isinstance(content, list) and (
            "id" in value or any(_part_type(part) in _OUTPUT_PART_TYPES for part in content)
        ):
            return "output_message"
        return "easy_message"
    if role in ("user", "system", "developer"):
        return "message" if "status" in value and isinstance(content, list) else "easy_message"
    return None


def _item_tag(value: Any) -> str | None:
    """Union tag of a Responses item: its kind, plus ``_for_training`` when it carries token fields."""
    if isinstance(value, BaseModel):
        kind = _kind_of_instance(value, _ITEM_KIND_BY_CLASS)
    elif isinstance(value, dict):
        kind = value.get("type", "message")  # `type` is optional only on messages
        if kind == "message":
            kind = _message_kind(value)
    else:
        return None
    if not isinstance(kind, str):
        return None
    if kind in _TRAINABLE_ITEM_KINDS and has_token_fields(value):
        return f"{kind}_for_training"
    return kind


NeMoGymResponseInputItem = Annotated[
    Annotated[NeMoGymEasyInputMessage, Tag("easy_message")]
    | Annotated[NeMoGymEasyInputMessageForTraining, Tag("easy_message_for_training")]
    | Annotated[NeMoGymMessage, Tag("message")]
    | Annotated[NeMoGymMessageForTraining, Tag("message_for_training")]
    | Annotated[NeMoGymResponseOutputMessage, Tag("output_message")]
    | Annotated[NeMoGymResponseOutputMessageForTraining, Tag("output_message_for_training")]
    | Annotated[NeMoGymResponseFunctionToolCall, Tag("function_call")]
    | Annotated[NeMoGymResponseFunctionToolCallForTraining, Tag("function_call_for_training")]
    | Annotated[NeMoGymFunctionCallOutput, Tag("function_call_output")]
    | Annotated[NeMoGymResponseReasoningItem, Tag("reasoning")]
    | Annotated[NeMoGymResponseReasoningItemForTraining, Tag("reasoning_for_training")],
    Discriminator(
        _item_tag,
        custom_error_type="unknown_response_item",
        custom_error_message=(
            "Unknown Responses item: 'type' must be one of 'message', 'function_call', "
            "'function_call_output', 'reasoning', and a message needs a 'role' of "
            "'user', 'assistant', 'system' or 'developer'"
        ),
    ),
]
NeMoGymResponseOutputItem = NeMoGymResponseInputItem
NeMoGymResponseInput = list[NeMoGymResponseInputItem]

# `input` is text or items; choosing the branch by Python type reports item errors only for the items branch.
_TextOrItems = Annotated[
    Annotated[str, Tag("text")] | Annotated[NeMoGymResponseInput, Tag("items")],
    Discriminator(lambda value: "text" if isinstance(value, str) else "items"),
]


# ------------------------------------------------------------------------------------------------------
# Responses API request
# ------------------------------------------------------------------------------------------------------


@with_config(ConfigDict(extra="forbid"))
class NeMoGymFunctionToolParam(TypedDict):
    """A Responses function tool. Unknown keys are rejected, like unknown request keys."""

    name: Required[str]
    type: Required[Literal["function"]]
    parameters: NotRequired[dict[str, Any] | None]
    strict: NotRequired[bool | None]
    description: NotRequired[str | None]


def _tool_tag(value: Any) -> str | None:
    if not isinstance(value, dict) or "type" not in value:
        return None
    return "function" if value["type"] == "function" else "other"


NeMoGymResponseToolParam = Annotated[
    Annotated[NeMoGymFunctionToolParam, Tag("function")] | Annotated[dict[str, Any], Tag("other")],
    Discriminator(
        _tool_tag,
        custom_error_type="unknown_tool",
        custom_error_message="A tool must be an object with a 'type' (e.g. 'function', 'web_search')",
    ),
]
"""Function tools are typed; other tool kinds (web_search, file_search, mcp, ...) pass through as dicts."""

NeMoGymToolChoice = Literal["none", "auto", "required"] | dict[str, Any]


class NeMoGymResponseCreateParamsNonStreaming(BaseModel):
    """Body of ``POST /v1/responses`` and the ``responses_create_params`` of every task row.

    Unknown keys are an error (NeMo Gym's contract): server-specific sampling extras go through
    ``metadata`` (string values). ``stream`` may only be false/null here: a model server's ``/v1/responses``
    takes ``stream: true`` itself and validates the rest with this model (``nemo_gym.serving.responses_streaming``).
    """

    model_config = ConfigDict(extra="forbid")

    input: _TextOrItems
    background: bool | None = None
    include: list[str] | None = None
    instructions: str | None = None
    max_output_tokens: int | None = None
    max_tool_calls: int | None = None
    metadata: dict[str, str] | None = None
    model: str | None = None
    parallel_tool_calls: bool | None = True
    previous_response_id: str | None = None
    prompt: dict[str, Any] | None = None
    reasoning: dict[str, Any] | None = None
    service_tier: Literal["auto", "default", "flex", "scale", "priority"] | None = None
    store: bool | None = None
    temperature: float | None = None
    text: dict[str, Any] | None = None
    tool_choice: NeMoGymToolChoice | None = "auto"
    tools: list[NeMoGymResponseToolParam] = Field(default_factory=list)
    top_logprobs: int | None = None
    top_p: float | None = None
    truncation: Literal["auto", "disabled"] | None = None
    user: str | None = None
    stream: Literal[False] | None = None


# ------------------------------------------------------------------------------------------------------
# Responses API response
# ------------------------------------------------------------------------------------------------------


class NeMoGymResponseInputTokensDetails(WireModel):
    cached_tokens: int | None = None  # None: the server did not say (not "none were cached")


class NeMoGymResponseOutputTokensDetails(WireModel):
    reasoning_tokens: int | None = None


class NeMoGymResponseUsage(WireModel):
    input_tokens: int
    input_tokens_details: NeMoGymResponseInputTokensDetails
    output_tokens: int
    output_tokens_details: NeMoGymResponseOutputTokensDetails
    total_tokens: int


def accumulate_response_usage(
    total: NeMoGymResponseUsage | None, additional: NeMoGymResponseUsage | None
) -> NeMoGymResponseUsage | None:
    """The usage of two model calls together. A detail count one of them does not report stays unknown
    (None) rather than being counted as 0."""
    if total is None or additional is None:
        return (total or additional).model_copy(deep=True) if (total or additional) else None

    def plus(first: int | None, second: int | None) -> int | None:
        return None if first is None or second is None else first + second

    return NeMoGymResponseUsage(
        input_tokens=total.input_tokens + additional.input_tokens,
        input_tokens_details=NeMoGymResponseInputTokensDetails(
            cached_tokens=plus(
                total.input_tokens_details.cached_tokens, additional.input_tokens_details.cached_tokens
            )
        ),
        output_tokens=total.output_tokens + additional.output_tokens,
        output_tokens_details=NeMoGymResponseOutputTokensDetails(
            reasoning_tokens=plus(
                total.output_tokens_details.reasoning_tokens,
                additional.output_tokens_details.reasoning_tokens,
            )
        ),
        total_tokens=total.total_tokens + additional.total_tokens,
    )


class NeMoGymResponseIncompleteDetails(WireModel):
    reason: Literal["max_output_tokens", "content_filter"] | None = None


class NeMoGymResponse(WireModel):
    """A Responses API response whose ``output`` uses Gym's item union (training variants included).

    Extra keys are kept so fields newer OpenAI or vLLM versions add (``store``, ``billing``, ...) survive.
    """

    _wire_constants = ("object",)

    id: str
    created_at: float
    model: str
    object: Literal["response"] = "response"
    output: list[NeMoGymResponseOutputItem]
    parallel_tool_calls: bool
    tool_choice: NeMoGymToolChoice
    tools: list[dict[str, Any]]
    error: dict[str, Any] | None = None
    incomplete_details: NeMoGymResponseIncompleteDetails | None = None
    instructions: str | list[dict[str, Any]] | None = None
    metadata: dict[str, Any] | None = None
    temperature: float | None = None
    top_p: float | None = None
    background: bool | None = None
    conversation: dict[str, Any] | None = None
    max_output_tokens: int | None = None
    max_tool_calls: int | None = None
    previous_response_id: str | None = None
    prompt: dict[str, Any] | None = None
    prompt_cache_key: str | None = None
    reasoning: dict[str, Any] | None = None
    safety_identifier: str | None = None
    service_tier: str | None = None
    status: str | None = None
    text: dict[str, Any] | None = None
    top_logprobs: int | None = None
    truncation: str | None = None
    user: str | None = None
    usage: NeMoGymResponseUsage | None = None

    @property
    def output_text(self) -> str:
        """The text of every `output_text` part of every assistant message, in order, joined without a
        separator (as the OpenAI SDK's property of the same name); reasoning and tool calls are left out.
        An assistant message whose content is a plain string contributes that string."""
        return "".join(text for item in self.output for text in assistant_texts(item))


def assistant_texts(item: NeMoGymResponseOutputItem) -> list[str]:
    """The texts an output item says as the assistant: its `output_text` parts, or its whole content when
    that is a plain string (which the Responses input side allows); none for any other item."""
    if isinstance(item, NeMoGymResponseOutputMessage):
        return [part.text for part in item.content if part.type == "output_text"]
    if (
        isinstance(item, NeMoGymEasyInputMessage)
        and item.role == "assistant"
        and isinstance(item.content, str)
    ):
        return [item.content]
    return []
