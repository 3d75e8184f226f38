"""Chat Completions types: the completion an upstream answers (training variant included) and the
dict-based request params, as in the OpenAI SDK."""

from typing import Annotated, Any, Literal, NotRequired, Required

from pydantic import BaseModel, ConfigDict, Discriminator, Field, Tag
from typing_extensions import TypedDict  # pydantic needs this TypedDict on Python < 3.12

from nemo_gym.wire.base import TokenIDLogProbMixin, TokenIDLogProbTypedDictMixin, WireModel, has_token_fields
from nemo_gym.wire.responses import NeMoGymToolChoice

# ------------------------------------------------------------------------------------------------------
# Chat Completions response
# ------------------------------------------------------------------------------------------------------


class NeMoGymFunction(WireModel):
    name: str
    arguments: str  # JSON text


class NeMoGymChatCompletionMessageToolCall(WireModel):
    _wire_constants = ("type",)

    id: str
    function: NeMoGymFunction
    type: Literal["function"] = "function"


class NeMoGymChatCompletionMessage(WireModel):
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


class NeMoGymChatCompletionTokenLogprob(WireModel):
    token: str
    logprob: float
    bytes: list[int] | None = None
    top_logprobs: list[dict[str, Any]] = Field(default_factory=list)


class NeMoGymChoiceLogprobs(WireModel):
    content: list[NeMoGymChatCompletionTokenLogprob] | None = None
    refusal: list[NeMoGymChatCompletionTokenLogprob] | None = None


def _chat_message_tag(value: Any) -> str:
    return "training" if has_token_fields(value) else "plain"


class NeMoGymChoice(WireModel):
    finish_reason: str | None = None
    index: int
    logprobs: NeMoGymChoiceLogprobs | None = None
    message: Annotated[
        Annotated[NeMoGymChatCompletionMessage, Tag("plain")]
        | Annotated[NeMoGymChatCompletionMessageForTraining, Tag("training")],
        Discriminator(_chat_message_tag),
    ]


class NeMoGymCompletionUsage(WireModel):
    completion_tokens: int
    prompt_tokens: int
    total_tokens: int


class NeMoGymChatCompletion(WireModel):
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
    if role == "assistant" and has_token_fields(value):
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
