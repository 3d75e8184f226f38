"""nemo_gym.http.upstream: what every model server does the same way with its upstream (client bounds, the key
masked in upstream errors, an invalid 2xx answer as a 502 naming its problems)."""

from __future__ import annotations

import pytest
from pydantic import SecretStr, ValidationError

from nemo_gym.http.client import HTTPStatusError, default_retry_policy
from nemo_gym.http.errors import GymError
from nemo_gym.http.upstream import (
    NeMoGymAsyncOpenAI,
    PermanentEndpointError,
    Upstream,
    UpstreamCallConfig,
    bad_upstream_answer,
    validated_answer,
)
from nemo_gym.openai_utils import NeMoGymChatCompletion
from tests.upstream_script import ScriptedUpstream, fresh_model

API_KEY = "sk-upstream-test-key-0123456789"
UPSTREAM_URL = "http://127.0.0.1:9/v1"
COMPLETION = {
    "id": "chatcmpl-1",
    "created": 1,
    "model": "m",
    "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": "Hi"}}],
}


def upstream(api_key: str = API_KEY, **bounds: object) -> Upstream:
    return Upstream(UpstreamCallConfig.model_validate(bounds), SecretStr(api_key), {"X-Team": "gym"})


def test_clients_carry_the_key_headers_and_bounds() -> None:
    client = upstream(max_attempts=2, timeout_s=7.5).client(NeMoGymAsyncOpenAI, UPSTREAM_URL)
    assert (client.base_url, client.api_key, client.default_headers) == (
        UPSTREAM_URL,
        API_KEY,
        {"X-Team": "gym"},
    )
    assert (client.max_attempts, client.timeout) == (2, 7.5)


class QueryClient(NeMoGymAsyncOpenAI):
    """A provider's client with a setting of its own (as azure_openai_model's query parameters)."""

    query: dict[str, str] = {}


def test_a_client_class_gets_its_own_fields_beside_the_bounds() -> None:
    client = upstream(max_attempts=3).client(QueryClient, UPSTREAM_URL, query={"api-version": "2024-10-21"})
    assert isinstance(client, QueryClient)
    assert (client.query, client.api_key, client.max_attempts) == ({"api-version": "2024-10-21"}, API_KEY, 3)


def test_without_timeout_s_a_client_has_the_deployment_deadline() -> None:
    config = UpstreamCallConfig()
    assert (config.max_attempts, config.timeout_s, config.max_concurrent_requests) == (5, None, None)
    client = upstream().client(NeMoGymAsyncOpenAI, UPSTREAM_URL)
    assert client.timeout == default_retry_policy().deadline_s


def test_the_old_name_max_retries_still_sets_max_attempts() -> None:
    assert UpstreamCallConfig.model_validate({"max_retries": 2}).max_attempts == 2
    assert upstream(max_retries=4).client(NeMoGymAsyncOpenAI, UPSTREAM_URL).max_attempts == 4
    assert NeMoGymAsyncOpenAI(base_url=UPSTREAM_URL, max_retries=3).max_attempts == 3


def test_both_names_for_the_attempts_setting_is_an_error_naming_both() -> None:
    with pytest.raises(ValidationError, match="'max_retries' and 'max_attempts' name the same setting"):
        UpstreamCallConfig.model_validate({"max_attempts": 2, "max_retries": 3})


def test_a_valid_answer_becomes_the_model() -> None:
    completion = validated_answer(NeMoGymChatCompletion, COMPLETION, UPSTREAM_URL, "chat completion")
    assert completion.choices[0].message.content == "Hi"


def test_an_invalid_answer_is_a_502_naming_its_first_problems() -> None:
    with pytest.raises(GymError) as raised:
        validated_answer(NeMoGymChatCompletion, {"choices": "none"}, UPSTREAM_URL, "chat completion")
    error = raised.value
    assert (error.status, error.error_type) == (502, "bad_upstream_response")
    assert str(error) == (
        f"upstream {UPSTREAM_URL} returned an invalid chat completion: "
        "id: Field required; choices: Input should be a valid list; created: Field required; ... and 1 more"
    )


def test_a_bad_upstream_answer_is_the_upstreams_fault() -> None:
    error = bad_upstream_answer("no tokens")
    assert (error.status, error.error_type, str(error)) == (502, "bad_upstream_response", "no tokens")


@pytest.mark.parametrize(
    ("api_key", "masked"), [(API_KEY, True), ("EMPTY", False)], ids=["key", "placeholder"]
)
async def test_an_upstream_error_leaves_a_call_with_the_key_masked(
    scripted_upstream: ScriptedUpstream, api_key: str, masked: bool
) -> None:
    model = fresh_model()
    echo = f"Incorrect API key provided: {api_key}"
    scripted_upstream.script(model, [{"status": 401, "body": {"error": {"message": echo}}}])
    calls = upstream(api_key)
    client = calls.client(NeMoGymAsyncOpenAI, scripted_upstream.base_url)

    with pytest.raises(HTTPStatusError) as raised:
        async with calls.call():
            await client.create_chat_completion(model=model, messages=[])

    body = raised.value.response_content.decode()
    assert raised.value.status == 401
    assert (api_key not in body, "Incorrect API key provided: ****" in body) == (masked, masked)


@pytest.mark.parametrize(
    ("status", "error"),
    [
        (401, {"message": "Incorrect API key provided: sk-...", "code": "invalid_api_key"}),
        (403, {"message": "forbidden", "type": "authentication_error"}),
        (429, {"message": "You exceeded your current quota", "code": "insufficient_quota"}),
    ],
)
async def test_a_refused_key_fails_at_once_and_then_without_calling_the_upstream(
    scripted_upstream: ScriptedUpstream, status: int, error: dict
) -> None:
    model = fresh_model()
    scripted_upstream.script(model, [{"status": status, "body": {"error": error}, "repeat": 10}])
    client = NeMoGymAsyncOpenAI(base_url=scripted_upstream.base_url, api_key=API_KEY, max_attempts=5)
    for _ in range(3):
        with pytest.raises(PermanentEndpointError) as raised:
            await client.create_chat_completion(model=model, messages=[])
        assert raised.value.status == status
    assert len(scripted_upstream.requests(model)) == 1  # no retry, and nothing sent after the refusal


async def test_a_rate_limit_that_is_not_a_spent_quota_is_retried(scripted_upstream: ScriptedUpstream) -> None:
    model = fresh_model()
    scripted_upstream.script(
        model, [{"status": 429, "body": {"error": {"code": "rate_limit_exceeded"}}, "retry_after": 0}]
    )
    scripted_upstream.script(model, [{"response": COMPLETION}])
    client = NeMoGymAsyncOpenAI(base_url=scripted_upstream.base_url, api_key=API_KEY, max_attempts=3)
    assert (await client.create_chat_completion(model=model, messages=[]))["id"] == "chatcmpl-1"
    assert len(scripted_upstream.requests(model)) == 2
