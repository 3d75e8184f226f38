"""The scripted upstream behaves like an OpenAI-compatible server, and fails exactly as scripted."""

import asyncio
import time
from pathlib import Path

import orjson
import pytest

from nemo_gym.http.client import (
    BadResponseError,
    ConnectionFailedError,
    DeadlineExceededError,
    RetryPolicy,
    close_global_aiohttp_client,
    get_response_json,
    request,
)
from nemo_gym.openai_utils import (
    NeMoGymChatCompletion,
    NeMoGymResponse,
    NeMoGymResponseFunctionToolCall,
    NeMoGymResponseOutputMessage,
    NeMoGymResponseReasoningItem,
)
from tests.helpers import run_server
from tests.upstream_script import (
    ScriptedUpstream,
    ScriptedUpstreamError,
    assistant_message,
    chat_tool_call,
    fresh_model,
    function_call,
    reasoning,
)

ONE_SHOT = RetryPolicy(max_attempts=1, deadline_s=5)
WEATHER_TOOL = {
    "type": "function",
    "name": "get_weather",
    "description": "Weather of a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    "strict": True,
}


@pytest.fixture(autouse=True)
async def close_http_client():
    """Each test has its own event loop; close the pooled session made in it before the loop goes."""
    yield
    await close_global_aiohttp_client()


async def post_json(url: str, body: dict, policy: RetryPolicy = ONE_SHOT, **kwargs) -> tuple[int, object]:
    response = await request("POST", url, json=body, retry_policy=policy, **kwargs)
    return response.status, await get_response_json(response)


async def create_response(upstream: ScriptedUpstream, model: str, **extra) -> NeMoGymResponse:
    status, body = await post_json(f"{upstream.base_url}/responses", {"model": model, "input": "hi", **extra})
    assert status == 200, body
    return NeMoGymResponse.model_validate(body)


async def test_scripted_turns_are_served_in_order_as_valid_responses(scripted_upstream):
    model = fresh_model()
    call = function_call("get_weather", {"city": "Paris"}, call_id="call_paris")
    scripted_upstream.script(
        model,
        [
            {"output": [reasoning("look it up"), call]},
            {"output": [assistant_message("It is sunny in Paris.")], "usage": {"input_tokens": 42}},
        ],
    )

    first = await create_response(scripted_upstream, model, tools=[WEATHER_TOOL])
    assert first.model == model and first.object == "response" and first.id.startswith("resp_")
    assert isinstance(first.output[0], NeMoGymResponseReasoningItem)
    tool_call = first.output[1]
    assert isinstance(tool_call, NeMoGymResponseFunctionToolCall)
    assert (tool_call.name, tool_call.call_id, tool_call.id) == ("get_weather", "call_paris", call["id"])
    assert orjson.loads(tool_call.arguments) == {"city": "Paris"}
    assert first.tools == [WEATHER_TOOL] and first.tool_choice == "auto" and first.parallel_tool_calls
    assert first.usage is not None
    assert (first.usage.input_tokens, first.usage.output_tokens, first.usage.total_tokens) == (10, 5, 15)

    second = await create_response(scripted_upstream, model)
    message = second.output[0]
    assert isinstance(message, NeMoGymResponseOutputMessage)
    assert message.content[0].text == "It is sunny in Paris."
    assert second.id != first.id and second.tools == []
    assert second.usage is not None and (second.usage.input_tokens, second.usage.total_tokens) == (42, 47)

    third = await create_response(scripted_upstream, model)  # the script is used up: default answer
    assert third.output[0].content[0].text == "ok"


async def test_requests_are_recorded_with_path_body_and_authorization(scripted_upstream):
    model = fresh_model()
    body = {"model": model, "input": [{"role": "user", "content": "hello"}], "temperature": 0.5}
    await post_json(f"{scripted_upstream.base_url}/responses", body, headers={"Authorization": "Bearer sk-a"})
    chat = {"model": model, "messages": [{"role": "user", "content": "hey"}]}
    await post_json(
        f"{scripted_upstream.base_url}/chat/completions", chat, headers={"Authorization": "Bearer b"}
    )

    recorded = scripted_upstream.requests(model)
    assert [entry["path"] for entry in recorded] == ["/v1/responses", "/v1/chat/completions"]
    assert [entry["body"] for entry in recorded] == [body, chat]
    assert [entry["headers"]["Authorization"] for entry in recorded] == ["Bearer sk-a", "Bearer b"]
    assert scripted_upstream.requests(fresh_model()) == []


async def test_unscripted_model_gets_valid_default_answers(scripted_upstream):
    model = fresh_model()
    response = await create_response(scripted_upstream, model, temperature=0.25)
    assert len(response.output) == 1 and response.output[0].content[0].text == "ok"
    assert response.status == "completed" and response.temperature == 0.25

    status, body = await post_json(
        f"{scripted_upstream.base_url}/chat/completions",
        {"model": model, "messages": [{"role": "user", "content": "hi"}]},
    )
    assert status == 200
    completion = NeMoGymChatCompletion.model_validate(body)
    assert completion.model == model and completion.choices[0].message.content == "ok"
    assert completion.choices[0].finish_reason == "stop"
    assert completion.usage is not None and completion.usage.total_tokens == 15


async def test_chat_message_shorthand_validates_as_chat_completion(scripted_upstream):
    model = fresh_model()
    call = chat_tool_call("get_weather", {"city": "Oslo"}, call_id="call_oslo")
    scripted_upstream.script(
        model,
        [
            {"message": {"content": None, "tool_calls": [call]}, "usage": {"prompt_tokens": 7}},
            {"message": {"content": "Cold.", "reasoning_content": "brr"}},
        ],
    )
    url = f"{scripted_upstream.base_url}/chat/completions"
    payload = {"model": model, "messages": [{"role": "user", "content": "weather in Oslo?"}]}

    first = NeMoGymChatCompletion.model_validate((await post_json(url, payload))[1])
    choice = first.choices[0]
    assert choice.finish_reason == "tool_calls" and choice.message.content is None
    assert choice.message.tool_calls[0].id == "call_oslo"
    assert orjson.loads(choice.message.tool_calls[0].function.arguments) == {"city": "Oslo"}
    assert first.usage is not None and (first.usage.prompt_tokens, first.usage.total_tokens) == (7, 12)

    second = NeMoGymChatCompletion.model_validate((await post_json(url, payload))[1])
    assert second.choices[0].message.content == "Cold."
    assert second.choices[0].message.model_extra == {"reasoning_content": "brr"}
    assert second.id != first.id


async def test_429_twice_with_retry_after_then_200_succeeds_on_attempt_3(scripted_upstream):
    model = fresh_model()
    scripted_upstream.script(
        model,
        [{"status": 429, "retry_after": 0.1, "repeat": 2}, {"output": [assistant_message("finally")]}],
    )
    policy = RetryPolicy(max_attempts=5, deadline_s=5, backoff_base_s=0.01, retry_statuses=frozenset({429}))

    started = time.monotonic()
    status, body = await post_json(f"{scripted_upstream.base_url}/responses", {"model": model}, policy)

    assert status == 200
    assert NeMoGymResponse.model_validate(body).output[0].content[0].text == "finally"
    assert len(scripted_upstream.requests(model)) == 3
    assert time.monotonic() - started >= 0.2  # both Retry-After waits were honoured


async def test_status_step_sends_its_body_or_an_openai_style_error(scripted_upstream):
    model = fresh_model()
    scripted_upstream.script(
        model, [{"status": 400, "body": {"error": {"message": "too long"}}}, {"status": 503}]
    )
    url = f"{scripted_upstream.base_url}/responses"

    assert await post_json(url, {"model": model}) == (400, {"error": {"message": "too long"}})
    status, body = await post_json(url, {"model": model})
    assert (status, body) == (503, {"error": {"message": "scripted 503", "type": "scripted", "code": 503}})


async def test_hang_ends_in_the_client_deadline_without_blocking_other_requests(scripted_upstream):
    model = fresh_model()
    scripted_upstream.script(model, [{"hang": True}])
    url = f"{scripted_upstream.base_url}/responses"

    async def hung() -> float:
        started = time.monotonic()
        with pytest.raises(DeadlineExceededError):
            await request("POST", url, json={"model": model}, retry_policy=RetryPolicy(deadline_s=0.5))
        return time.monotonic() - started

    hung_for, (status, _) = await asyncio.gather(hung(), post_json(url, {"model": fresh_model()}))
    assert status == 200
    assert hung_for >= 0.45  # ended by its deadline; pytest-timeout catches a hang


async def test_disconnect_closes_the_connection_without_a_response(scripted_upstream):
    model = fresh_model()
    scripted_upstream.script(model, [{"disconnect": True}])
    url = f"{scripted_upstream.base_url}/responses"

    with pytest.raises(ConnectionFailedError) as raised:
        await request("POST", url, json={"model": model}, retry_policy=ONE_SHOT)
    assert raised.value.attempts == 1

    status, _ = await post_json(url, {"model": model})  # the step was consumed; the server is fine
    assert status == 200


async def test_malformed_step_answers_200_json_that_does_not_parse(scripted_upstream):
    model = fresh_model()
    scripted_upstream.script(model, [{"malformed": True}])

    response = await request(
        "POST", f"{scripted_upstream.base_url}/responses", json={"model": model}, retry_policy=ONE_SHOT
    )
    assert response.status == 200 and response.content_type == "application/json"
    with pytest.raises(BadResponseError):
        await get_response_json(response)


async def test_response_step_is_returned_as_is_after_its_delay(scripted_upstream):
    model = fresh_model()
    raw = {"anything": ["the", "test", "wants"]}
    scripted_upstream.script(model, [{"response": raw, "delay_s": 0.2}])

    started = time.monotonic()
    assert await post_json(f"{scripted_upstream.base_url}/responses", {"model": model}) == (200, raw)
    assert time.monotonic() - started >= 0.2


async def test_incomplete_details_mark_the_response_incomplete(scripted_upstream):
    model = fresh_model()
    scripted_upstream.script(
        model,
        [{"output": [assistant_message("trunc")], "incomplete_details": {"reason": "max_output_tokens"}}],
    )
    response = await create_response(scripted_upstream, model)
    assert response.status == "incomplete"
    assert response.incomplete_details is not None
    assert response.incomplete_details.reason == "max_output_tokens"


async def test_shorthand_on_the_wrong_route_is_a_script_error(scripted_upstream):
    model = fresh_model()
    scripted_upstream.script(model, [{"message": {"content": "x"}}])
    status, body = await post_json(f"{scripted_upstream.base_url}/responses", {"model": model})
    assert status == 500 and body["error"]["type"] == "script_error"


async def test_control_api_rejects_bad_steps_and_clears_scripts(scripted_upstream):
    model = fresh_model("org/name")  # model names may contain slashes
    for bad in ({"stauts": 500}, {"status": 500, "hang": True}, {"retry_after": 1}, {"repeat": 0}):
        with pytest.raises(ScriptedUpstreamError, match="HTTP 400"):
            scripted_upstream.script(model, [bad])

    scripted_upstream.script(model, [{"status": 500, "repeat": 3}])
    scripted_upstream.clear(model)

    assert (await post_json(f"{scripted_upstream.base_url}/responses", {"model": model}))[0] == 200
    assert [entry["body"]["model"] for entry in scripted_upstream.requests(model)] == [model]


async def test_match_rules_answer_every_matching_request_before_the_queue(scripted_upstream):
    model = fresh_model()
    scripted_upstream.script(
        model,
        [{"status": 500, "match": "row-7"}, {"output": [assistant_message("queued")]}],
    )
    url = f"{scripted_upstream.base_url}/responses"
    for _ in range(2):  # a rule is never consumed
        assert (await post_json(url, {"model": model, "input": "task row-7"}))[0] == 500
    status, body = await post_json(url, {"model": model, "input": "task row-8"})
    assert status == 200 and body["output"][0]["content"][0]["text"] == "queued"
    with pytest.raises(ScriptedUpstreamError, match="HTTP 400"):
        scripted_upstream.script(model, [{"status": 500, "match": "row-7", "repeat": 2}])
    scripted_upstream.clear(model)
    assert (await post_json(url, {"model": model, "input": "task row-7"}))[0] == 200


async def test_tokenize_is_deterministic_per_word(scripted_upstream):
    model = fresh_model()
    url = f"{scripted_upstream.url}/tokenize"
    _, first = await post_json(url, {"model": model, "prompt": "the cat the"})
    _, again = await post_json(
        url, {"model": model, "messages": [{"role": "user", "content": "the cat the"}]}
    )
    assert first["tokens"] == again["tokens"] and first["count"] == 3
    assert first["tokens"][0] == first["tokens"][2] != first["tokens"][1]
    assert scripted_upstream.requests(model)[0]["path"] == "/tokenize"


async def test_reset_forgets_scripts_and_requests(tmp_path: Path):
    # A private instance: resetting the shared one would wipe the scripts of other tests.
    with run_server([str(Path(__file__).parent / "scripted_upstream.py")], tmp_path) as server:
        upstream = ScriptedUpstream(server.host, server.port)
        model = fresh_model()
        upstream.script(model, [{"status": 500}])

        url = f"{upstream.base_url}/responses"

        assert (await post_json(url, {"model": model}))[0] == 500
        upstream.script(model, [{"status": 500}])
        upstream.reset()
        assert upstream.requests(model) == []
        assert (await post_json(url, {"model": model}))[0] == 200


async def test_a_gate_holds_requests_until_it_is_opened_and_counts_them(scripted_upstream):
    model, gate = fresh_model(), fresh_model("gate")
    scripted_upstream.script(model, [{"gate": gate, "output": [assistant_message("released")], "repeat": 3}])
    url = f"{scripted_upstream.base_url}/responses"
    held = [asyncio.ensure_future(post_json(url, {"model": model})) for _ in range(2)]
    while scripted_upstream.gate_waiting(gate) < 2:
        await asyncio.sleep(0.01)
    assert not any(call.done() for call in held)
    scripted_upstream.open_gate(gate)
    answers = await asyncio.gather(*held, post_json(url, {"model": model}))
    assert [status for status, _ in answers] == [200, 200, 200]
    assert {body["output"][0]["content"][0]["text"] for _, body in answers} == {"released"}
    assert scripted_upstream.gate_waiting(gate) == 0
