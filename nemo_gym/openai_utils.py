"""The historical import path of the OpenAI-compatible types and the upstream client.

The types live in `nemo_gym.wire` (no HTTP layer); the client lives in `nemo_gym.http.upstream` and is only
imported when asked for, so importing this module never loads aiohttp or FastAPI.
"""

from typing import TYPE_CHECKING, Any

from nemo_gym.wire.base import (
    TokenIDLogProbMixin,
    TokenIDLogProbTypedDictMixin,
)
from nemo_gym.wire.chat_completions import (
    NeMoGymChatCompletion,
    NeMoGymChatCompletionAssistantMessageForTrainingParam,
    NeMoGymChatCompletionAssistantMessageParam,
    NeMoGymChatCompletionContentPartImageParam,
    NeMoGymChatCompletionContentPartRefusalParam,
    NeMoGymChatCompletionContentPartTextParam,
    NeMoGymChatCompletionCreateParamsNonStreaming,
    NeMoGymChatCompletionDeveloperMessageParam,
    NeMoGymChatCompletionMessage,
    NeMoGymChatCompletionMessageForTraining,
    NeMoGymChatCompletionMessageParam,
    NeMoGymChatCompletionMessageToolCall,
    NeMoGymChatCompletionMessageToolCallFunctionParam,
    NeMoGymChatCompletionMessageToolCallParam,
    NeMoGymChatCompletionSystemMessageParam,
    NeMoGymChatCompletionTokenLogprob,
    NeMoGymChatCompletionToolMessageParam,
    NeMoGymChatCompletionToolParam,
    NeMoGymChatCompletionUserContentPartParam,
    NeMoGymChatCompletionUserMessageParam,
    NeMoGymChoice,
    NeMoGymChoiceLogprobs,
    NeMoGymCompletionUsage,
    NeMoGymFunction,
    NeMoGymFunctionDefinition,
    NeMoGymImageURLParam,
)
from nemo_gym.wire.responses import (
    RESPONSES_TO_TRAIN,
    NeMoGymContent,
    NeMoGymEasyInputMessage,
    NeMoGymEasyInputMessageForTraining,
    NeMoGymFunctionCallOutput,
    NeMoGymFunctionToolParam,
    NeMoGymMessage,
    NeMoGymMessageForTraining,
    NeMoGymResponse,
    NeMoGymResponseCreateParamsNonStreaming,
    NeMoGymResponseFunctionToolCall,
    NeMoGymResponseFunctionToolCallForTraining,
    NeMoGymResponseIncompleteDetails,
    NeMoGymResponseInput,
    NeMoGymResponseInputContent,
    NeMoGymResponseInputFile,
    NeMoGymResponseInputImage,
    NeMoGymResponseInputItem,
    NeMoGymResponseInputText,
    NeMoGymResponseInputTokensDetails,
    NeMoGymResponseOutputItem,
    NeMoGymResponseOutputMessage,
    NeMoGymResponseOutputMessageForTraining,
    NeMoGymResponseOutputRefusal,
    NeMoGymResponseOutputText,
    NeMoGymResponseOutputTokensDetails,
    NeMoGymResponseReasoningItem,
    NeMoGymResponseReasoningItemForTraining,
    NeMoGymResponseToolParam,
    NeMoGymResponseUsage,
    NeMoGymSummary,
    NeMoGymToolChoice,
    accumulate_response_usage,
    assistant_texts,
)

if TYPE_CHECKING:
    from nemo_gym.http.upstream import (
        RATE_LIMIT_ERROR_CODES,
        RETRY_ERROR_CODES,
        NeMoGymAsyncOpenAI,
    )

__all__ = [
    "NeMoGymAsyncOpenAI",
    "NeMoGymChatCompletion",
    "NeMoGymChatCompletionAssistantMessageForTrainingParam",
    "NeMoGymChatCompletionAssistantMessageParam",
    "NeMoGymChatCompletionContentPartImageParam",
    "NeMoGymChatCompletionContentPartRefusalParam",
    "NeMoGymChatCompletionContentPartTextParam",
    "NeMoGymChatCompletionCreateParamsNonStreaming",
    "NeMoGymChatCompletionDeveloperMessageParam",
    "NeMoGymChatCompletionMessage",
    "NeMoGymChatCompletionMessageForTraining",
    "NeMoGymChatCompletionMessageParam",
    "NeMoGymChatCompletionMessageToolCall",
    "NeMoGymChatCompletionMessageToolCallFunctionParam",
    "NeMoGymChatCompletionMessageToolCallParam",
    "NeMoGymChatCompletionSystemMessageParam",
    "NeMoGymChatCompletionTokenLogprob",
    "NeMoGymChatCompletionToolMessageParam",
    "NeMoGymChatCompletionToolParam",
    "NeMoGymChatCompletionUserContentPartParam",
    "NeMoGymChatCompletionUserMessageParam",
    "NeMoGymChoice",
    "NeMoGymChoiceLogprobs",
    "NeMoGymCompletionUsage",
    "NeMoGymContent",
    "NeMoGymEasyInputMessage",
    "NeMoGymEasyInputMessageForTraining",
    "NeMoGymFunction",
    "NeMoGymFunctionCallOutput",
    "NeMoGymFunctionDefinition",
    "NeMoGymFunctionToolParam",
    "NeMoGymImageURLParam",
    "NeMoGymMessage",
    "NeMoGymMessageForTraining",
    "NeMoGymResponse",
    "NeMoGymResponseCreateParamsNonStreaming",
    "NeMoGymResponseFunctionToolCall",
    "NeMoGymResponseFunctionToolCallForTraining",
    "NeMoGymResponseIncompleteDetails",
    "NeMoGymResponseInput",
    "NeMoGymResponseInputContent",
    "NeMoGymResponseInputFile",
    "NeMoGymResponseInputImage",
    "NeMoGymResponseInputItem",
    "NeMoGymResponseInputText",
    "NeMoGymResponseInputTokensDetails",
    "NeMoGymResponseOutputItem",
    "NeMoGymResponseOutputMessage",
    "NeMoGymResponseOutputMessageForTraining",
    "NeMoGymResponseOutputRefusal",
    "NeMoGymResponseOutputText",
    "NeMoGymResponseOutputTokensDetails",
    "NeMoGymResponseReasoningItem",
    "NeMoGymResponseReasoningItemForTraining",
    "NeMoGymResponseToolParam",
    "NeMoGymResponseUsage",
    "NeMoGymSummary",
    "NeMoGymToolChoice",
    "RATE_LIMIT_ERROR_CODES",
    "RESPONSES_TO_TRAIN",
    "RETRY_ERROR_CODES",
    "TokenIDLogProbMixin",
    "TokenIDLogProbTypedDictMixin",
    "accumulate_response_usage",
    "assistant_texts",
]


# Importing these loads the HTTP layer, so they are resolved on first access only (PEP 562).
_UPSTREAM_NAMES = frozenset({"RATE_LIMIT_ERROR_CODES", "RETRY_ERROR_CODES", "NeMoGymAsyncOpenAI"})


def __getattr__(name: str) -> Any:
    if name in _UPSTREAM_NAMES:
        from nemo_gym.http import upstream

        return getattr(upstream, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
