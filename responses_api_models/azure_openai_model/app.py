"""azure_openai_model: the Responses API over an Azure OpenAI deployment's Chat Completions.

NeMo Gym's azure_openai_model keys (`openai_base_url` = the Azure endpoint, `openai_api_key`,
`openai_model` = the deployment, `default_query` with `api-version`, `num_concurrent_requests: 8`) on
inference_provider's server: `/v1/responses` is converted to a chat completion and back, as NeMo Gym does;
`/v1/chat/completions` goes to the deployment as is. Only the client differs (client.py): the
deployment URL, the `api-version` query and the `api-key` header. An `openai_base_url` ending in `/v1`
(Azure's v1 API) takes the deployment in the body instead, and needs no `api-version`.
"""

from __future__ import annotations

from pydantic import AliasChoices, Field, SecretStr, ValidationInfo, field_validator

from responses_api_models.azure_openai_model.client import API_VERSION, AzureOpenAIClient, uses_v1_api
from responses_api_models.inference_provider.app import InferenceProvider, InferenceProviderConfig


class AzureOpenAIModelConfig(InferenceProviderConfig):
    base_url: list[str] = Field(
        min_length=1,
        validation_alias=AliasChoices("openai_base_url", "base_url"),
        description="the Azure endpoint, e.g. https://<resource>.openai.azure.com (or .../openai/v1)",
    )
    api_key: SecretStr = Field(
        validation_alias=AliasChoices("openai_api_key", "api_key"),
        description="sent as the `api-key` header; never shown",
    )
    model: str = Field(
        validation_alias=AliasChoices("openai_model", "model"), description="the deployment name"
    )
    default_query: dict[str, str] = Field(
        default_factory=dict, validate_default=True, description="query parameters of every call"
    )
    max_concurrent_requests: int | None = Field(
        default=8,
        ge=1,
        validation_alias=AliasChoices("num_concurrent_requests", "max_concurrent_requests"),
        description="upstream calls in flight per server process; null = no cap",
    )

    @field_validator("default_query")
    @classmethod
    def _api_version_for_deployment_urls(cls, query: dict[str, str], info: ValidationInfo) -> dict[str, str]:
        urls = info.data.get("base_url") or []
        if not query.get(API_VERSION) and not all(map(uses_v1_api, urls)):
            raise ValueError(
                "api-version is required for an Azure deployment URL: set it, e.g. "
                "+default_query.api-version=2024-10-21 (or use an openai_base_url ending in /openai/v1)"
            )
        return query


class AzureOpenAIModel(InferenceProvider):
    config: AzureOpenAIModelConfig

    def _vllm_client(self, url: str) -> AzureOpenAIClient:
        return self._upstream.client(AzureOpenAIClient, url, query=self.config.default_query)


if __name__ == "__main__":
    AzureOpenAIModel.run_webserver()
