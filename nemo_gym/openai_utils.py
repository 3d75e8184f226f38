"""OpenAI-compatible request/response types (Responses API and Chat Completions) as pydantic v2 models.

Gym declares its own types instead of importing the OpenAI SDK's, so that validation does not change
when the SDK does, and so that the wire shapes stay exactly those NeMo Gym servers exchange.

Conventions every caller should know:

- Names ending in ``Param`` are ``TypedDict``s (plain dicts at runtime, like the SDK's request params);
  everything else is a pydantic model.
- Extra keys: the Responses request (`NeMoGymResponseCreateParamsNonStreaming`) forbids unknown top-level
  keys, as NeMo Gym does (a typo or a vLLM-only sampling key is a 422, not silently ignored). Items,
  content parts and response models allow extra keys, so fields a newer OpenAI or vLLM adds survive a
  round trip instead of being dropped. The Chat Completions request ignores unknown keys (see its
  docstring for why).
- Union members are chosen deterministically by discriminator functions (``type``, ``role`` and whether
  the token fields are present), never by pydantic's "smart" guessing: an item carrying
  ``prompt_token_ids``/``generation_token_ids``/``generation_log_probs`` always becomes its
  ``...ForTraining`` variant and keeps them.
- Constant fields that identify a shape (``type``, ``object``, ``role`` of an output message) have
  defaults for convenience but are always dumped, even with ``exclude_unset=True``, so a dump can be parsed
  back into the same class. Other defaults are not emitted under ``exclude_unset=True``:
  ``model_dump(mode="json", exclude_unset=True)`` reproduces exactly the JSON that was validated, and a
  plain ``model_dump(mode="json")`` gives the all-defaults shape NeMo Gym sends to ``/verify``.
- To validate a single item or an item list, use ``TypeAdapter(NeMoGymResponseInputItem)`` or
  ``TypeAdapter(NeMoGymResponseInput)``.
"""

from typing import Annotated, Any, ClassVar, Literal, NotRequired, Required

from pydantic import BaseModel, ConfigDict, Discriminator, Field, Tag, model_validator, with_config
from typing_extensions import TypedDict  # pydantic needs this TypedDict on Python < 3.12
from yarl import URL

from nemo_gym.http_client import (
    DEFAULT_DEADLINE_S,
    MAX_NUM_TRIES,
    RetryPolicy,
    checked_json,
    default_retry_policy,
    request,
)

RATE_LIMIT_ERROR_CODES = [429, 502, 503, 504, 520]
RETRY_ERROR_CODES = RATE_LIMIT_ERROR_CODES + [500]

_TOKEN_FIELDS = ("prompt_token_ids", "generation_token_ids", "generation_log_probs")


class _WireModel(BaseModel):
    """Base of the models exchanged with upstreams: extra keys are kept, identifying constants always dumped."""

    model_config = ConfigDict(extra="allow")

    _wire_constants: ClassVar[tuple[str, ...]] = ()

    def model_post_init(self, context: Any, /) -> None:
        # Marking the constants as set keeps them in `exclude_unset` dumps; without them the JSON would be
        # ambiguous (an item without `type` cannot be told apart) or rejected by OpenAI.
        self.__pydantic_fields_set__.update(self._wire_constants)


def _has_token_fields(value: Any) -> bool:
    if isinstance(value, BaseModel):
        return isinstance(value, TokenIDLogProbMixin)
    return isinstance(value, dict) and any(key in value for key in _TOKEN_FIELDS)


def _kind_of_instance(value: BaseModel, kind_by_class: dict[type, str]) -> str | None:
    """The kind registered for the instance's class or its nearest registered base class."""
    for cls in type(value).__mro__:
        if cls in kind_by_class:
            return kind_by_class[cls]
    return None


# ------------------------------------------------------------------------------------------------------
# Training mixins: token ids and log-probs of one model call, attached to the item that call produced.
# ------------------------------------------------------------------------------------------------------


class TokenIDLogProbMixin(BaseModel):
    """Token data a trainer needs to compute log-prob ratios without re-tokenising.

    Training variants list this mixin first so that the token fields come last in dumps.
    """

    prompt_token_ids: list[int]
    generation_token_ids: list[int]
    generation_log_probs: list[float]
    # Mixture-of-experts routing per generated token, shaped [tokens][layers][top-k].
    routed_experts: list[list[list[int]]] | None = None


class TokenIDLogProbTypedDictMixin(TypedDict):
    """Same token data for the dict-based (``...Param``) chat message types."""

    prompt_token_ids: Required[list[int]]
    generation_token_ids: Required[list[int]]
    generation_log_probs: Required[list[float]]
    routed_experts: NotRequired[list[list[list[int]]] | None]


# ------------------------------------------------------------------------------------------------------
# Responses API content parts
# ------------------------------------------------------------------------------------------------------


class NeMoGymResponseInputText(_WireModel):
    _wire_constants = ("type",)

    text: str
    type: Literal["input_text"] = "input_text"


class NeMoGymResponseInputImage(_WireModel):
    _wire_constants = ("type",)

    detail: Literal["low", "high", "auto"] = "auto"
    type: Literal["input_image"] = "input_image"
    file_id: str | None = None
    image_url: str | None = None


class NeMoGymResponseInputFile(_WireModel):
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


class NeMoGymResponseOutputText(_WireModel):
    _wire_constants = ("type",)

    annotations: list[dict[str, Any]]
    text: str
    type: Literal["output_text"] = "output_text"
    logprobs: list[dict[str, Any]] | None = None


class NeMoGymResponseOutputRefusal(_WireModel):
    _wire_constants = ("type",)

    refusal: str
    type: Literal["refusal"] = "refusal"


NeMoGymContent = Annotated[
    NeMoGymResponseOutputText | NeMoGymResponseOutputRefusal, Field(discriminator="type")
]


class NeMoGymSummary(_WireModel):
    _wire_constants = ("type",)

    text: str
    type: Literal["summary_text"] = "summary_text"


# ------------------------------------------------------------------------------------------------------
# Responses API items (the same union is used for input and output)
# ------------------------------------------------------------------------------------------------------


class NeMoGymEasyInputMessage(_WireModel):
    """A chat-style message; ``type`` may be omitted on the wire, so it is not forced into dumps."""

    content: str | list[NeMoGymResponseInputContent]
    role: Literal["user", "assistant", "system", "developer"]
    type: Literal["message"] = "message"


class NeMoGymMessage(_WireModel):
    """An input message with content parts and a status (never from the assistant)."""

    content: list[NeMoGymResponseInputContent]
    role: Literal["user", "system", "developer"]
    status: Literal["in_progress", "completed", "incomplete"] = "completed"
    type: Literal["message"] = "message"


class NeMoGymResponseOutputMessage(_WireModel):
    """An assistant message produced by a model (also valid as input for the next turn)."""

    _wire_constants = ("type", "role")

    id: str
    content: list[NeMoGymContent]
    role: Literal["assistant"] = "assistant"
    status: Literal["in_progress", "completed", "incomplete"] = "completed"
    type: Literal["message"] = "message"


class NeMoGymResponseFunctionToolCall(_WireModel):
    _wire_constants = ("type",)

    arguments: str  # JSON text, exactly as the model generated it (may be invalid JSON)
    call_id: str
    name: str
    type: Literal["function_call"] = "function_call"
    id: str | None = None
    status: Literal["in_progress", "completed", "incomplete"] | None = None


class NeMoGymFunctionCallOutput(_WireModel):
    _wire_constants = ("type",)

    call_id: str
    output: str
    type: Literal["function_call_output"] = "function_call_output"
    id: str | None = None
    status: Literal["in_progress", "completed", "incomplete"] | None = None


class NeMoGymResponseReasoningItem(_WireModel):
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
    if kind in _TRAINABLE_ITEM_KINDS and _has_token_fields(value):
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
    ``metadata`` (string values). Streaming is not supported anywhere, so ``stream`` may only be false/null.
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


class NeMoGymResponseInputTokensDetails(_WireModel):
    cached_tokens: int


class NeMoGymResponseOutputTokensDetails(_WireModel):
    reasoning_tokens: int


class NeMoGymResponseUsage(_WireModel):
    input_tokens: int
    input_tokens_details: NeMoGymResponseInputTokensDetails
    output_tokens: int
    output_tokens_details: NeMoGymResponseOutputTokensDetails
    total_tokens: int


class NeMoGymResponseIncompleteDetails(_WireModel):
    reason: Literal["max_output_tokens", "content_filter"] | None = None


class NeMoGymResponse(_WireModel):
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


# ------------------------------------------------------------------------------------------------------
# Chat Completions response
# ------------------------------------------------------------------------------------------------------


class NeMoGymFunction(_WireModel):
    name: str
    arguments: str  # JSON text


class NeMoGymChatCompletionMessageToolCall(_WireModel):
    _wire_constants = ("type",)

    id: str
    function: NeMoGymFunction
    type: Literal["function"] = "function"


class NeMoGymChatCompletionMessage(_WireModel):
    """The assistant message of a choice; extras such as vLLM's ``reasoning_content`` are kept."""

    _wire_constants = ("role",)

    content: str | None = None
    refusal: str | None = None
    role: Literal["assistant"] = "assistant"
    annotations: list[dict[str, Any]] | None = None
    audio: dict[str, Any] | None = None
    function_call: dict[str, Any] | None = None
    tool_calls: list[NeMoGymChatCompletionMessageToolCall] | None = None


class NeMoGymChatCompletionMessageForTraining(TokenIDLogProbMixin, NeMoGymChatCompletionMessage):
    pass


class NeMoGymChatCompletionTokenLogprob(_WireModel):
    token: str
    logprob: float
    bytes: list[int] | None = None
    top_logprobs: list[dict[str, Any]] = Field(default_factory=list)


class NeMoGymChoiceLogprobs(_WireModel):
    content: list[NeMoGymChatCompletionTokenLogprob] | None = None
    refusal: list[NeMoGymChatCompletionTokenLogprob] | None = None


def _chat_message_tag(value: Any) -> str:
    return "training" if _has_token_fields(value) else "plain"


class NeMoGymChoice(_WireModel):
    finish_reason: str | None = None
    index: int
    logprobs: NeMoGymChoiceLogprobs | None = None
    message: Annotated[
        Annotated[NeMoGymChatCompletionMessage, Tag("plain")]
        | Annotated[NeMoGymChatCompletionMessageForTraining, Tag("training")],
        Discriminator(_chat_message_tag),
    ]


class NeMoGymCompletionUsage(_WireModel):
    completion_tokens: int
    prompt_tokens: int
    total_tokens: int


class NeMoGymChatCompletion(_WireModel):
    _wire_constants = ("object",)

    id: str
    choices: list[NeMoGymChoice]
    created: int
    model: str
    object: Literal["chat.completion"] = "chat.completion"
    service_tier: str | None = None
    system_fingerprint: str | None = None
    usage: NeMoGymCompletionUsage | None = None


# ------------------------------------------------------------------------------------------------------
# Chat Completions request (dict-based params, as in the SDK)
# ------------------------------------------------------------------------------------------------------


class NeMoGymFunctionDefinition(TypedDict):
    name: Required[str]
    description: NotRequired[str]
    parameters: NotRequired[dict[str, Any]]
    strict: NotRequired[bool | None]


class NeMoGymChatCompletionToolParam(TypedDict):
    type: Required[Literal["function"]]
    function: Required[NeMoGymFunctionDefinition]


class NeMoGymChatCompletionContentPartTextParam(TypedDict):
    type: Required[Literal["text"]]
    text: Required[str]


class NeMoGymImageURLParam(TypedDict):
    url: Required[str]
    detail: NotRequired[Literal["auto", "low", "high"]]


class NeMoGymChatCompletionContentPartImageParam(TypedDict):
    type: Required[Literal["image_url"]]
    image_url: Required[NeMoGymImageURLParam]


class NeMoGymChatCompletionContentPartRefusalParam(TypedDict):
    type: Required[Literal["refusal"]]
    refusal: Required[str]


def _user_part_tag(value: Any) -> str | None:
    if not isinstance(value, dict):
        return None
    return value.get("type") if value.get("type") in ("text", "image_url") else "other"


NeMoGymChatCompletionUserContentPartParam = Annotated[
    Annotated[NeMoGymChatCompletionContentPartTextParam, Tag("text")]
    | Annotated[NeMoGymChatCompletionContentPartImageParam, Tag("image_url")]
    | Annotated[dict[str, Any], Tag("other")],
    Discriminator(_user_part_tag),
]
"""Text and image parts are typed; other kinds (input_audio, file, ...) pass through as dicts."""


class NeMoGymChatCompletionUserMessageParam(TypedDict):
    content: Required[str | list[NeMoGymChatCompletionUserContentPartParam]]
    role: Required[Literal["user"]]
    name: NotRequired[str]


class NeMoGymChatCompletionSystemMessageParam(TypedDict):
    content: Required[str | list[NeMoGymChatCompletionContentPartTextParam]]
    role: Required[Literal["system"]]
    name: NotRequired[str]


class NeMoGymChatCompletionDeveloperMessageParam(TypedDict):
    content: Required[str | list[NeMoGymChatCompletionContentPartTextParam]]
    role: Required[Literal["developer"]]
    name: NotRequired[str]


class NeMoGymChatCompletionMessageToolCallFunctionParam(TypedDict):
    name: Required[str]
    arguments: Required[str]


class NeMoGymChatCompletionMessageToolCallParam(TypedDict):
    id: Required[str]
    function: Required[NeMoGymChatCompletionMessageToolCallFunctionParam]
    type: Required[Literal["function"]]


class NeMoGymChatCompletionAssistantMessageParam(TypedDict):
    role: Required[Literal["assistant"]]
    content: NotRequired[
        str
        | list[NeMoGymChatCompletionContentPartTextParam | NeMoGymChatCompletionContentPartRefusalParam]
        | None
    ]
    refusal: NotRequired[str | None]
    name: NotRequired[str]
    audio: NotRequired[dict[str, Any] | None]
    function_call: NotRequired[dict[str, Any] | None]
    tool_calls: NotRequired[list[NeMoGymChatCompletionMessageToolCallParam]]


class NeMoGymChatCompletionAssistantMessageForTrainingParam(
    NeMoGymChatCompletionAssistantMessageParam, TokenIDLogProbTypedDictMixin
):
    """A previous assistant turn with its token data, so multi-turn prompts can be stitched token-exactly."""


class NeMoGymChatCompletionToolMessageParam(TypedDict):
    content: Required[str | list[NeMoGymChatCompletionContentPartTextParam]]
    role: Required[Literal["tool"]]
    tool_call_id: Required[str]


def _chat_message_param_tag(value: Any) -> str | None:
    if not isinstance(value, dict):
        return None
    role = value.get("role")
    if role == "assistant" and _has_token_fields(value):
        return "assistant_for_training"
    return role if isinstance(role, str) else None


NeMoGymChatCompletionMessageParam = Annotated[
    Annotated[NeMoGymChatCompletionDeveloperMessageParam, Tag("developer")]
    | Annotated[NeMoGymChatCompletionSystemMessageParam, Tag("system")]
    | Annotated[NeMoGymChatCompletionUserMessageParam, Tag("user")]
    | Annotated[NeMoGymChatCompletionAssistantMessageParam, Tag("assistant")]
    | Annotated[NeMoGymChatCompletionAssistantMessageForTrainingParam, Tag("assistant_for_training")]
    | Annotated[NeMoGymChatCompletionToolMessageParam, Tag("tool")],
    Discriminator(
        _chat_message_param_tag,
        custom_error_type="unknown_chat_message",
        custom_error_message="A chat message needs a 'role' of 'developer', 'system', 'user', 'assistant' or 'tool'",
    ),
]


class NeMoGymChatCompletionCreateParamsNonStreaming(BaseModel):
    """Body of ``POST /v1/chat/completions``.

    Unknown keys are ignored (dropped), unlike the Responses request which forbids them. This is kept on
    purpose for compatibility: OpenAI-compatible clients used by trainers send vendor sampling params
    (``top_k``, ``min_p``, ``return_tokens_as_token_ids``, ...) and deprecated ``functions`` /
    ``function_call`` on this route, and NeMo Gym accepts such requests; rejecting them would break
    working clients. Unknown keys inside messages are dropped the same way.
    """

    model_config = ConfigDict(extra="ignore")

    messages: list[NeMoGymChatCompletionMessageParam]
    model: str | None = None
    audio: dict[str, Any] | None = None
    frequency_penalty: float | None = None
    logit_bias: dict[str, int] | None = None
    logprobs: bool | None = None
    max_completion_tokens: int | None = None
    max_tokens: int | None = None
    metadata: dict[str, str] | None = None
    modalities: list[str] | None = None
    n: int | None = None
    parallel_tool_calls: bool | None = True
    prediction: dict[str, Any] | None = None
    presence_penalty: float | None = None
    reasoning_effort: str | None = None
    response_format: dict[str, Any] | None = None
    seed: int | None = None
    service_tier: str | None = None
    stop: str | list[str] | None = None
    store: bool | None = None
    stream_options: dict[str, Any] | None = None
    temperature: float | None = None
    tool_choice: NeMoGymToolChoice | None = None
    tools: list[NeMoGymChatCompletionToolParam] | None = None
    top_logprobs: int | None = None
    top_p: float | None = None
    user: str | None = None
    web_search_options: dict[str, Any] | None = None
    stream: Literal[False] | None = None


class NeMoGymAsyncOpenAI(BaseModel):
    """Minimal async client for an OpenAI-compatible upstream (OpenAI, vLLM, ...), returning plain JSON.

    Statuses in RETRY_ERROR_CODES are retried with exponential backoff and jitter, honouring
    `Retry-After`, for at most `max_retries` attempts within `timeout` seconds in all; any other non-2xx
    status raises `HTTPStatusError` at once, carrying the upstream's body. A reply that breaks off, is
    not HTTP or not JSON, or is not whole by `timeout` raises the `RequestFailedError` saying so (a 502
    or 504 in a Gym server's answer).
    """

    base_url: str
    api_key: str = Field(default="", repr=False)
    internal: bool = False
    default_headers: dict[str, str] = Field(default_factory=dict, repr=False)
    max_retries: int = Field(default=MAX_NUM_TRIES + 2, ge=1)
    timeout: float = Field(default=DEFAULT_DEADLINE_S, gt=0)

    def _retry_policy(self) -> RetryPolicy:
        return default_retry_policy().with_overrides(
            max_attempts=self.max_retries, deadline_s=self.timeout, retry_statuses=RETRY_ERROR_CODES
        )

    def _headers(self) -> dict[str, str]:
        """The key goes as a bearer token, unless the base URL carries a user and password: then, as with
        the OpenAI client, those are sent (Basic) instead, since a request has one Authorization."""
        headers = dict(self.default_headers)
        if self.api_key and not URL(self.base_url).raw_user:
            headers["Authorization"] = f"Bearer {self.api_key}"
        return headers

    async def _call(self, method: str, url: str, body: dict[str, Any] | None = None) -> Any:
        response = await request(
            method,
            url,
            json=body,
            headers=self._headers(),
            retry_policy=self._retry_policy(),
            _internal=self.internal,
        )
        return await checked_json(response)

    async def create_response(self, **body: Any) -> dict[str, Any]:
        return await self._call("POST", f"{self.base_url.rstrip('/')}/responses", body)

    async def create_chat_completion(self, **body: Any) -> dict[str, Any]:
        return await self._call("POST", f"{self.base_url.rstrip('/')}/chat/completions", body)

    async def create_tokenize(self, **body: Any) -> dict[str, Any]:
        """vLLM's `/tokenize` lives beside `/v1`, not under it."""
        root = self.base_url.rstrip("/").removesuffix("/v1")
        return await self._call("POST", f"{root}/tokenize", body)

    async def create_models(self) -> dict[str, Any]:
        return await self._call("GET", f"{self.base_url.rstrip('/')}/models")
