"""NeMo Gym 0.7's vllm_model settings, each with the meaning NeMo Gym gives it, against the fake vLLM."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest
from pydantic import ValidationError

from responses_api_models.vllm_model.app import REASONING_FIELD_ENV_VAR, VLLMModelConfig
from responses_api_models.vllm_model.tests.test_app import (
    prompts_seen,
    rollout_session,
    second_upstream,
    served,
    start_refusal,
)
from responses_api_models.vllm_model.tests.test_training import (
    CITIES,
    WEATHER_TOOL,
    generation_prompts,
    item_index,
    noncanonical_weather_steps,
    run_turns,
    token_fields,
    training_server,
    weather_question,
    weather_rollout,
)
from responses_api_models.vllm_model.training import PROMPT_PROBES
from tests.upstream_script import ScriptedUpstream
from tests.vllm_script import VllmUpstream, fresh_model

CHAT_PATH = "/v1/chat/completions"


def chat_bodies(upstream: VllmUpstream, model: str) -> list[dict[str, Any]]:
    return [call["body"] for call in upstream.requests(model) if call["path"] == CHAT_PATH]


async def supplied_prefix_rollout(
    tmp_path: Path, upstream: VllmUpstream, model: str, turns: int, **settings: Any
) -> list[dict[str, Any]]:
    """The first turn's ids are not the canonical ones: only a prompt that starts with them continues it."""
    steps = noncanonical_weather_steps()
    rollout = weather_rollout(tmp_path, upstream, model, steps, supply_prefix_token_ids=True, **settings)
    async with rollout as (vllm, session):
        return await run_turns(vllm, session, weather_question(), turns=turns)


@pytest.mark.parametrize("inline_ids", [False, True])
async def test_a_supplied_prefix_carries_every_turn_through_the_chat_route_with_the_parents_ids(
    tmp_path: Path, vllm_upstream: VllmUpstream, inline_ids: bool
) -> None:
    model = fresh_model("vllm")
    vllm_upstream.configure(model, honours_required_prefix=True)
    responses = await supplied_prefix_rollout(
        tmp_path, vllm_upstream, model, 5, request_prompt_and_generation_token_ids=inline_ids
    )

    fields = [token_fields(response) for response in responses]
    bodies = chat_bodies(vllm_upstream, model)
    assert len(bodies) == 5 and generation_prompts(vllm_upstream, model) == [p for p, _, _ in fields]
    assert "required_prefix_token_ids" not in bodies[0]
    for (prompt, generated, _), body, (next_prompt, _, _) in zip(
        fields, bodies[1:], fields[1:], strict=False
    ):
        assert body["required_prefix_token_ids"] == prompt + generated
        assert next_prompt[: len(prompt) + len(generated)] == prompt + generated
    assert all(body.get("return_token_ids", False) is inline_ids for body in bodies)
    prompts_tokenized = [
        call
        for call in vllm_upstream.requests(model)
        if call["path"] == "/tokenize"
        and call["body"].get("add_generation_prompt")
        and call["body"]["messages"] not in PROMPT_PROBES
    ]
    assert len(prompts_tokenized) == (0 if inline_ids else 5)
    for response, city in zip(responses, CITIES, strict=False):
        [call] = [item for item in response["output"] if item["type"] == "function_call"]
        assert orjson.loads(call["arguments"]) == {"city": city}
        assert "token_continuity" not in response
        assert not {"prompt_token_ids", "token_ids"} & set(response)


async def test_an_upstream_without_the_prefix_extension_is_a_502_naming_the_setting(
    tmp_path: Path, vllm_upstream: VllmUpstream
) -> None:
    """Stock vLLM ignores the field and re-tokenises the history: the proof fails as soon as the ids
    sampled were not the canonical ones (here the first turn's)."""
    model = fresh_model("vllm")
    history = weather_question()
    steps = noncanonical_weather_steps()
    rollout = weather_rollout(tmp_path, vllm_upstream, model, steps, supply_prefix_token_ids=True)
    async with rollout as (vllm, session):
        await run_turns(vllm, session, history, turns=1)
        status, body = await vllm.post("/v1/responses", {"input": history, "tools": [WEATHER_TOOL]}, session)

    assert status == 502
    assert "required_prefix_token_ids" in body["error"]["message"]
    assert "supply_prefix_token_ids: false" in body["error"]["message"]


async def test_a_history_edited_before_the_parent_is_flagged_and_sent_without_a_prefix(
    tmp_path: Path, vllm_upstream: VllmUpstream
) -> None:
    model = fresh_model("vllm")
    vllm_upstream.configure(model, honours_required_prefix=True)
    history = weather_question()
    async with weather_rollout(tmp_path, vllm_upstream, model, supply_prefix_token_ids=True) as (
        vllm,
        session,
    ):
        await run_turns(vllm, session, history, turns=2)
        first_call = item_index(history, "function_call")
        history[first_call] = {**history[first_call], "arguments": '{"city": "Madrid"}'}
        [response] = await run_turns(vllm, session, history, turns=1)

    assert response["token_continuity"]["broken_at_turn"] == 1
    assert "required_prefix_token_ids" not in chat_bodies(vllm_upstream, model)[-1]
    assert token_fields(response)[0] == generation_prompts(vllm_upstream, model)[-1]


def test_a_supplied_prefix_without_token_data_refuses_to_start(tmp_path: Path) -> None:
    [line] = start_refusal(tmp_path, supply_prefix_token_ids=True)
    assert line.startswith("Error: invalid config for server instance 'policy_model': ")
    assert "supply_prefix_token_ids: true needs return_token_id_information: true" in line


REASONED_HISTORY = [
    {"role": "user", "content": "Hi"},
    {"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": "Greet back."}]},
    {
        "type": "message",
        "role": "assistant",
        "id": "msg_1",
        "status": "completed",
        "content": [{"type": "output_text", "text": "Hello!", "annotations": []}],
    },
    {"role": "user", "content": "Bye"},
]


@pytest.mark.parametrize(
    ("setting", "fields"),
    [
        ({}, {"reasoning", "reasoning_content"}),
        ({"reasoning_field": "reasoning"}, {"reasoning"}),
        ({"reasoning_field": "reasoning_content"}, {"reasoning_content"}),
    ],
)
async def test_reasoning_field_names_the_keys_that_carry_earlier_reasoning_upstream(
    tmp_path: Path, scripted_upstream: ScriptedUpstream, setting: dict[str, str], fields: set[str]
) -> None:
    model = fresh_model()
    scripted_upstream.script(model, [{"message": {"content": "Goodbye"}}])
    async with served(tmp_path, scripted_upstream.base_url, model, **setting) as vllm:
        status, answer = await vllm.post("/v1/responses", {"input": REASONED_HISTORY})

    assert status == 200, answer
    [call] = scripted_upstream.requests(model)
    [assistant] = [message for message in call["body"]["messages"] if message["role"] == "assistant"]
    assert {key for key in ("reasoning", "reasoning_content") if key in assistant} == fields
    assert all(assistant[key] == "Greet back." for key in fields)


def test_reasoning_field_defaults_to_nemo_gyms_environment_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    settings = {"name": "m", "entrypoint": "app.py", "host": "127.0.0.1", "port": 0}
    settings |= {"base_url": "http://127.0.0.1:9/v1"}
    settings |= {"api_key": "k", "model": "m", "uses_reasoning_parser": True}
    assert VLLMModelConfig.model_validate(settings).reasoning_field == "both"
    monkeypatch.setenv(REASONING_FIELD_ENV_VAR, "reasoning_content")
    assert VLLMModelConfig.model_validate(settings).reasoning_field == "reasoning_content"
    monkeypatch.setenv(REASONING_FIELD_ENV_VAR, "thoughts")
    with pytest.raises(ValidationError, match="reasoning_field"):
        VLLMModelConfig.model_validate(settings)


@pytest.mark.parametrize("forward", [False, True])
async def test_a_requests_own_chat_template_kwargs_reach_the_template_only_when_forwarded(
    tmp_path: Path, scripted_upstream: ScriptedUpstream, forward: bool
) -> None:
    model = fresh_model()
    scripted_upstream.script(model, [{"message": {"content": "ok"}}])
    settings = {"chat_template_kwargs": {"lang": "en"}, "forward_request_chat_template_kwargs": forward}
    body = {
        "messages": [{"role": "user", "content": "Hi"}],
        "chat_template_kwargs": {"enable_thinking": False, "lang": "fr"},
        "metadata": {"chat_template_kwargs": '{"lang": "de"}'},
    }
    async with served(tmp_path, scripted_upstream.base_url, model, **settings) as vllm:
        status, _ = await vllm.post("/v1/chat/completions", body)

    assert status == 200
    [call] = scripted_upstream.requests(model)
    expected = {"enable_thinking": False, "lang": "de"} if forward else {"lang": "de"}
    assert call["body"]["chat_template_kwargs"] == expected


async def test_a_final_assistant_message_is_continued_when_configured(
    tmp_path: Path, scripted_upstream: ScriptedUpstream
) -> None:
    model = fresh_model()
    scripted_upstream.script(model, [{"message": {"content": " world"}}, {"message": {"content": "Hi"}}])
    prefill = [{"role": "user", "content": "Say hello world"}, {"role": "assistant", "content": "Hello"}]
    async with served(
        tmp_path, scripted_upstream.base_url, model, continue_final_assistant_message=True
    ) as vllm:
        assert (await vllm.post("/v1/chat/completions", {"messages": prefill}))[0] == 200
        assert (await vllm.post("/v1/chat/completions", {"messages": prefill[:1]}))[0] == 200

    continued, fresh = (call["body"] for call in scripted_upstream.requests(model))
    assert (continued["continue_final_message"], continued["add_generation_prompt"]) == (True, False)
    assert "continue_final_message" not in fresh and "add_generation_prompt" not in fresh


async def test_a_turn_cut_by_max_tokens_is_continued_from_its_own_ids_when_left_open(
    tmp_path: Path, vllm_upstream: VllmUpstream
) -> None:
    model = fresh_model("vllm")
    vllm_upstream.script(model, [{"text": "Hello there, how are you today?"}, {"text": " Fine."}])
    question = {"role": "user", "content": "Hello?"}
    server = training_server(tmp_path, vllm_upstream, model, continue_final_assistant_message=True)
    async with server as vllm, rollout_session() as session:
        status, first = await vllm.post(
            "/v1/chat/completions", {"messages": [question], "max_completion_tokens": 3}, session
        )
        assert status == 200 and first["choices"][0]["finish_reason"] == "length", first
        reply = first["choices"][0]["message"]
        status, second = await vllm.post("/v1/chat/completions", {"messages": [question, reply]}, session)

    assert status == 200, second
    assert "token_continuity" not in second
    continued = second["choices"][0]["message"]["prompt_token_ids"]
    assert continued == reply["prompt_token_ids"] + reply["generation_token_ids"]
    assert continued == generation_prompts(vllm_upstream, model)[-1]


async def test_calls_follow_the_backend_the_endpoint_file_names(
    tmp_path: Path, scripted_upstream: ScriptedUpstream
) -> None:
    model = fresh_model()
    endpoint_file = tmp_path / "endpoint.txt"
    endpoint_file.write_text(f"{scripted_upstream.base_url}\n")
    settings = {"endpoint_file": str(endpoint_file), "endpoint_check_interval_s": 0}
    with second_upstream(tmp_path) as moved:
        for upstream in (scripted_upstream, moved):
            upstream.script(model, [{"message": {"content": "ok"}, "repeat": 2}])
        async with served(tmp_path, scripted_upstream.base_url, model, **settings) as vllm:
            assert (await vllm.post("/v1/responses", {"input": "first"}))[0] == 200
            endpoint_file.write_text(moved.base_url)
            assert (await vllm.post("/v1/responses", {"input": "second"}))[0] == 200
            endpoint_file.unlink()  # within the grace period the last backend is kept
            assert (await vllm.post("/v1/responses", {"input": "third"}))[0] == 200
        assert prompts_seen(scripted_upstream, model) == ["first"]
        assert prompts_seen(moved, model) == ["second", "third"]


async def test_an_endpoint_file_that_names_no_backend_past_the_grace_is_a_503_naming_it(
    tmp_path: Path, scripted_upstream: ScriptedUpstream
) -> None:
    model = fresh_model()
    endpoint_file = tmp_path / "endpoint.txt"
    endpoint_file.write_text("")
    settings = {
        "endpoint_file": str(endpoint_file),
        "endpoint_check_interval_s": 0,
        "endpoint_stale_grace_s": 0,
    }
    async with served(tmp_path, scripted_upstream.base_url, model, **settings) as vllm:
        status, body = await vllm.post("/v1/responses", {"input": "hi"})

    assert status == 503
    assert (
        str(endpoint_file) in body["error"]["message"]
        and "endpoint_stale_grace_s" in body["error"]["message"]
    )
    assert scripted_upstream.requests(model) == []
