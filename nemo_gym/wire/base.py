"""What every wire model shares: the base class that keeps extra keys and dumps identifying constants,
and the training token fields a model call attaches to what it produced."""

from typing import Any, ClassVar, NotRequired, Required

from pydantic import BaseModel, ConfigDict
from typing_extensions import TypedDict  # pydantic needs this TypedDict on Python < 3.12

_TOKEN_FIELDS = ("prompt_token_ids", "generation_token_ids", "generation_log_probs")


class WireModel(BaseModel):
    """Base of the models exchanged with upstreams: extra keys are kept, identifying constants always dumped."""

    model_config = ConfigDict(extra="allow")

    _wire_constants: ClassVar[tuple[str, ...]] = ()

    def model_post_init(self, context: Any, /) -> None:
        # Marking the constants as set keeps them in `exclude_unset` dumps; without them the JSON would be
        # ambiguous (an item without `type` cannot be told apart) or rejected by OpenAI.
        self.__pydantic_fields_set__.update(self._wire_constants)


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


def has_token_fields(value: Any) -> bool:
    """Whether a model or raw dict carries training token data, which picks the `...ForTraining` variant."""
    if isinstance(value, BaseModel):
        return isinstance(value, TokenIDLogProbMixin)
    return isinstance(value, dict) and any(key in value for key in _TOKEN_FIELDS)
