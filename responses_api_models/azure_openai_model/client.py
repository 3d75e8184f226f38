"""Azure OpenAI as this server calls it: the key in an `api-key` header (not a bearer token), the
deployment in the path and `api-version` in the query, as the official `AsyncAzureOpenAI` sends them."""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

from pydantic import Field
from yarl import URL

from nemo_gym.http.upstream import NeMoGymAsyncOpenAI

API_VERSION = "api-version"
# Azure's v1 API (`https://<resource>.openai.azure.com/openai/v1`) takes the deployment as `model` in the
# body, like OpenAI; any other base URL is an Azure endpoint whose deployments are in the path.
V1_SUFFIX = "/v1"


def uses_v1_api(base_url: str) -> bool:
    return base_url.rstrip("/").endswith(V1_SUFFIX)


def chat_completions_url(base_url: str, deployment: str, query: dict[str, str]) -> str:
    """`{endpoint}/openai/deployments/{deployment}/chat/completions?api-version=...`, or on the v1 API
    `{base}/chat/completions` (with the query, if any)."""
    root = base_url.rstrip("/")
    if uses_v1_api(root):
        path = f"{root}/chat/completions"
    else:
        path = f"{root}/openai/deployments/{quote(deployment, safe='')}/chat/completions"
    return str(URL(path, encoded=True).update_query(query)) if query else path


class AzureOpenAIClient(NeMoGymAsyncOpenAI):
    query: dict[str, str] = Field(default_factory=dict)

    def _headers(self) -> dict[str, str]:
        return {**self.default_headers, "api-key": self.api_key} if self.api_key else self.default_headers

    async def create_chat_completion(self, **body: Any) -> dict[str, Any]:
        url = chat_completions_url(self.base_url, str(body.get("model", "")), self.query)
        return await self._call("POST", url, body)
