"""vllm_model_with_compaction: vllm_model in training mode, for agents that rewrite the context between
calls (simple_agent_with_compaction).

Compatible with NeMo Gym 0.7's vllm_model_with_compaction: `/v1/responses` also takes
`required_prefix_token_ids`, passed to vLLM's chat route so the prompt the model is given starts with
exactly those ids (the agent sends the last call's prompt + generation ids when its new context only
appends to that call's), and `POST /tokenize` gives the ids of a request's prompt, for the agent's
`guards.max_total_tokens`. Every call goes through the chat route with vLLM's inline token ids
(`return_token_ids`): the prompt and generation ids are the ones vLLM reports, never a re-tokenisation,
and an upstream that reports none is a 502. Everything else (conversion, sampling defaults, retries,
deadlines, replicas, `/v1/chat/completions`) is vllm_model's.
"""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI, Request
from pydantic import Field, model_validator

from nemo_gym.http.errors import GymError
from nemo_gym.openai_utils import NeMoGymResponse, NeMoGymResponseCreateParamsNonStreaming
from responses_api_models.vllm_model import conversion
from responses_api_models.vllm_model.app import VLLMModel, VLLMModelConfig

REQUIRED_SETTINGS = {
    "return_token_id_information": True,
    "request_prompt_and_generation_token_ids": True,
    "supply_prefix_token_ids": False,
}


class VLLMModelWithCompactionConfig(VLLMModelConfig):
    """vllm_model's keys; the three that choose how token ids are obtained are fixed (see REQUIRED_SETTINGS)."""

    return_token_id_information: bool = True
    request_prompt_and_generation_token_ids: bool = True

    @model_validator(mode="after")
    def _exact_token_ids_only(self) -> VLLMModelWithCompactionConfig:
        for key, required in REQUIRED_SETTINGS.items():
            if getattr(self, key) is not required:
                raise ValueError(
                    f"{key}: vllm_model_with_compaction needs {str(required).lower()} (the agent chooses "
                    "the token prefix and vLLM reports the ids); remove the key or use vllm_model"
                )
        return self


class CompactionResponseCreateParams(NeMoGymResponseCreateParamsNonStreaming):
    required_prefix_token_ids: list[int] | None = Field(
        default=None,
        description="ids the prompt must start with: the last call's prompt + generation ids",
    )

    @model_validator(mode="after")
    def _token_ids_are_ids(self) -> CompactionResponseCreateParams:
        if self.required_prefix_token_ids is not None and (
            not self.required_prefix_token_ids or min(self.required_prefix_token_ids) < 0
        ):
            raise ValueError("required_prefix_token_ids must be a non-empty list of token ids (ints >= 0)")
        return self


class VLLMModelWithCompaction(VLLMModel):
    config: VLLMModelWithCompactionConfig

    def setup_webserver(self) -> FastAPI:
        app = super().setup_webserver()
        app.post("/tokenize")(self.tokenize)
        return app

    async def responses(self, request: Request, body: CompactionResponseCreateParams) -> NeMoGymResponse:
        """One generation whose prompt starts with the body's prefix, if any; token data on the last item."""
        standard, payload = await self._chat_payload(body)
        client = self._client_for(request)
        if self._must_not_continue(payload):
            turn = self._training.without_generation("content_filter")
        else:
            turn = await self._training.prefixed_turn(client, payload, body.required_prefix_token_ids)
        return NeMoGymResponse.model_validate(self._training_response(standard, turn))

    async def tokenize(self, request: Request, body: CompactionResponseCreateParams) -> dict[str, list[int]]:
        """The prompt ids the upstream would be given for this request (prefix included), uncharged."""
        _, payload = await self._chat_payload(body)
        client = self._client_for(request)
        return {"tokens": await self._training.prompt_ids(client, payload, body.required_prefix_token_ids)}

    async def _chat_payload(
        self, body: CompactionResponseCreateParams
    ) -> tuple[NeMoGymResponseCreateParamsNonStreaming, dict[str, Any]]:
        """The body without the prefix field, and the chat payload it becomes with the server's defaults
        (a speech row's audio in its prompt, as vllm_model puts it)."""
        standard = NeMoGymResponseCreateParamsNonStreaming.model_validate(
            body.model_dump(exclude={"required_prefix_token_ids"}, exclude_unset=True)
        )
        try:
            chat_body = conversion.responses_to_chat_body(standard, self._reasoning)
        except conversion.RequestConversionError as error:
            raise GymError(400, "invalid_request", str(error)) from None
        return standard, self._payload(await self._with_audio(chat_body))


if __name__ == "__main__":
    VLLMModelWithCompaction.run_webserver()
