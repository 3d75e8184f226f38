"""Anthropic Messages API request types, as far as a Gym model server takes them (`POST /v1/messages`).

Unknown keys are ignored at every level (clients such as the `claude` CLI send beta fields, `cache_control`
marks, `metadata`), but a field the conversion uses must have its documented type, so a malformed request is
a 400 naming it. Content block kinds that cannot be expressed as Responses input are refused by name.
"""

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Discriminator, Field, Tag

SUPPORTED_ANTHROPIC_IMAGE_MEDIA_TYPES = frozenset({"image/jpeg", "image/png", "image/gif", "image/webp"})


class AnthropicModel(BaseModel):
    model_config = ConfigDict(extra="ignore")


class AnthropicTextBlock(AnthropicModel):
    type: Literal["text"]
    text: str


class AnthropicBase64Source(AnthropicModel):
    type: Literal["base64"]
    media_type: Literal["image/jpeg", "image/png", "image/gif", "image/webp"]
    data: str


class AnthropicURLSource(AnthropicModel):
    type: Literal["url"]
    url: str


class AnthropicImageBlock(AnthropicModel):
    type: Literal["image"]
    source: Annotated[AnthropicBase64Source | AnthropicURLSource, Field(discriminator="type")]


class AnthropicToolUseBlock(AnthropicModel):
    type: Literal["tool_use"]
    id: str
    name: str
    input: dict[str, Any]


class AnthropicToolResultBlock(AnthropicModel):
    type: Literal["tool_result"]
    tool_use_id: str
    content: str | list[Annotated[AnthropicTextBlock | AnthropicImageBlock, Field(discriminator="type")]] = ""
    is_error: bool | None = None


class AnthropicThinkingBlock(AnthropicModel):
    type: Literal["thinking"]
    thinking: str
    signature: str | None = None


class AnthropicRedactedThinkingBlock(AnthropicModel):
    type: Literal["redacted_thinking"]
    data: str


_BLOCK_TYPES = ("text", "image", "tool_use", "tool_result", "thinking", "redacted_thinking")


def _block_tag(value: Any) -> str | None:
    kind = value.get("type") if isinstance(value, dict) else getattr(value, "type", None)
    return kind if kind in _BLOCK_TYPES else None


AnthropicContentBlock = Annotated[
    Annotated[AnthropicTextBlock, Tag("text")]
    | Annotated[AnthropicImageBlock, Tag("image")]
    | Annotated[AnthropicToolUseBlock, Tag("tool_use")]
    | Annotated[AnthropicToolResultBlock, Tag("tool_result")]
    | Annotated[AnthropicThinkingBlock, Tag("thinking")]
    | Annotated[AnthropicRedactedThinkingBlock, Tag("redacted_thinking")],
    Discriminator(
        _block_tag,
        custom_error_type="unsupported_content_block",
        custom_error_message=(
            "A content block's 'type' must be one of 'text', 'image', 'tool_use', 'tool_result', "
            "'thinking', 'redacted_thinking'"
        ),
    ),
]


class AnthropicMessageParam(AnthropicModel):
    role: Literal["user", "assistant"]
    content: str | list[AnthropicContentBlock]


class AnthropicTool(AnthropicModel):
    """A client tool (`input_schema`); a server tool (`type` such as `web_search_20250305`) has none and
    is not offered to the model, since nothing here would run it."""

    name: str
    type: str | None = None
    description: str | None = None
    input_schema: dict[str, Any] | None = None


class AnthropicToolChoice(AnthropicModel):
    type: Literal["auto", "any", "tool", "none"]
    name: str | None = None
    disable_parallel_tool_use: bool | None = None


class AnthropicThinkingConfig(AnthropicModel):
    type: Literal["enabled", "disabled", "adaptive"]
    budget_tokens: int | None = Field(default=None, ge=0)


class AnthropicMetadata(AnthropicModel):
    user_id: str | None = None


class AnthropicMessagesRequest(AnthropicModel):
    """Body of `POST /v1/messages`."""

    model: str
    max_tokens: int = Field(ge=1)
    messages: list[AnthropicMessageParam]
    system: str | list[AnthropicTextBlock] | None = None
    temperature: float | None = Field(default=None, ge=0, allow_inf_nan=False)
    top_p: float | None = Field(default=None, ge=0, le=1, allow_inf_nan=False)
    top_k: int | None = None
    stop_sequences: list[str] | None = None
    stream: bool | None = None
    tools: list[AnthropicTool] | None = None
    tool_choice: AnthropicToolChoice | None = None
    thinking: AnthropicThinkingConfig | None = None
    metadata: AnthropicMetadata | None = None


class AnthropicCountTokensRequest(AnthropicModel):
    """Body of `POST /v1/messages/count_tokens`: a Messages request without `max_tokens`."""

    model: str
    messages: list[AnthropicMessageParam]
    system: str | list[AnthropicTextBlock] | None = None
    tools: list[AnthropicTool] | None = None
    tool_choice: AnthropicToolChoice | None = None
    thinking: AnthropicThinkingConfig | None = None
