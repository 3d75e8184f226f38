"""nemo_gym.agents.cli_model_relay: the relay passes a CLI's model calls on unchanged and keeps the token ids
each answer carries, in a JSON body or a stream (against the scripted upstream, a real server process)."""

from __future__ import annotations

import orjson

from nemo_gym.agents.cli_model_relay import ModelCallRelay, token_fields_of
from nemo_gym.http.client import get_response_json, request
from tests.shared_fixtures import closed_port
from tests.upstream_script import ScriptedUpstream, assistant_message, fresh_model, function_call

TOKENS = {"prompt_token_ids": [1, 2], "generation_token_ids": [3, 4], "generation_log_probs": [-0.5, -0.25]}


def test_token_fields_are_found_in_json_and_in_server_sent_events() -> None:
    item = {"type": "message", **TOKENS}
    assert token_fields_of(orjson.dumps({"output": [{"type": "reasoning"}, item]})) == TOKENS
    stream = b"event: response.created\ndata: {}\n\nevent: response.completed\ndata: " + orjson.dumps(
        {"response": {"output": [item]}}
    )
    assert token_fields_of(stream + b"\n\ndata: [DONE]\n\n") == TOKENS
    assert token_fields_of(b'{"output": [{"type": "message"}]}') is None


async def test_the_relay_passes_calls_on_and_keeps_each_ones_token_ids(
    scripted_upstream: ScriptedUpstream,
) -> None:
    model = fresh_model("relay")
    scripted_upstream.script(
        model,
        [{"output": [function_call("ls", {}), {**assistant_message("done"), **TOKENS}]},
         {"output": [assistant_message("no ids")]}],
    )  # fmt: skip
    relay = ModelCallRelay()
    async with relay.relayed(scripted_upstream.base_url, timeout_s=30) as (url, run):
        for _ in range(2):
            answer = await request("POST", f"{url}/responses?probe=1", json={"model": model, "input": "hi"})
            assert answer.status == 200
        assert (await get_response_json(answer))["output"][0]["content"][0]["text"] == "no ids"
    assert run.calls == [TOKENS, None]
    (first, _) = scripted_upstream.requests(model)
    assert first["path"] == "/v1/responses" and first["body"]["input"] == "hi"
    stale = await request("POST", f"{url}/responses", json={"model": model, "input": "hi"})
    assert stale.status == 404, "a finished run's ticket no longer relays"


async def test_an_error_answer_goes_back_as_it_came_and_records_no_token_ids(
    scripted_upstream: ScriptedUpstream,
) -> None:
    model = fresh_model("relay-error")
    refusal = {"error": {"message": "prompt too long"}, "output": [{"type": "message", **TOKENS}]}
    scripted_upstream.script(model, [{"status": 400, "body": refusal}])
    relay = ModelCallRelay()
    async with relay.relayed(scripted_upstream.base_url, timeout_s=30) as (url, run):
        headers = {"Authorization": "Bearer sk-of-the-cli", "x-cli-session": "s1"}
        answer = await request(
            "POST", f"{url}/responses", json={"model": model, "input": "hi"}, headers=headers
        )
        assert (answer.status, await get_response_json(answer)) == (400, refusal)
        assert answer.headers["content-type"].startswith("application/json")
    assert run.calls == [None]
    (sent,) = scripted_upstream.requests(model)
    assert (sent["headers"]["Authorization"], sent["headers"]["x-cli-session"]) == (
        "Bearer sk-of-the-cli",
        "s1",
    )


async def test_an_unreachable_model_server_is_a_502_that_says_so() -> None:
    relay = ModelCallRelay()
    async with relay.relayed(f"http://127.0.0.1:{closed_port()}/v1", timeout_s=5) as (url, run):
        answer = await request("POST", f"{url}/responses", json={"input": "hi"})
        body = await get_response_json(answer)
    assert answer.status == 502 and body["error"]["type"] == "relay_failed"
    assert run.calls == [None]
