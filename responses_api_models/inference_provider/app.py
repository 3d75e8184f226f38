"""inference_provider: the Responses API over a hosted provider's OpenAI-compatible Chat Completions
endpoint (Fireworks, Together, OpenRouter, DeepInfra, Nebius, Friendli, Baseten, HF Inference, Gemini, ...).

It is vllm_model without training mode: the same conversion of `/v1/responses` to a chat completion and
back (responses_api_models/vllm_model/conversion.py), the same bounded upstream calls, with NeMo Gym's
inference_provider keys and defaults (`base_url`, `api_key`, `model`, `uses_reasoning_parser: false`,
`num_concurrent_requests: 1000`, `extra_body`). A provider gives no token ids, so training mode is refused
at start, and its 400s (a prompt too long included) reach the caller as sent.
"""

from __future__ import annotations

from pydantic import AliasChoices, Field, field_validator

from responses_api_models.vllm_model.app import VLLMModel, VLLMModelConfig


class InferenceProviderConfig(VLLMModelConfig):
    uses_reasoning_parser: bool = False
    # NeMo Gym calls the in-flight cap `num_concurrent_requests` here; `max_concurrent_requests` works too.
    max_concurrent_requests: int | None = Field(
        default=1000,
        ge=1,
        validation_alias=AliasChoices("num_concurrent_requests", "max_concurrent_requests"),
        description="upstream calls in flight per server process; null = no cap",
    )
    # A hosted provider's 400 is the caller's to see, not an empty turn (vllm_model's default).
    propagate_context_overflow_errors: bool = True

    @field_validator("return_token_id_information")
    @classmethod
    def _no_training_mode(cls, value: bool) -> bool:
        if value:
            raise ValueError("a hosted provider returns no token ids; use vllm_model for training")
        return value


class InferenceProvider(VLLMModel):
    config: InferenceProviderConfig


if __name__ == "__main__":
    InferenceProvider.run_webserver()
