"""NeMo Gym 0.7's vllm_model settings, each with the meaning NeMo Gym gives it, against the fake vLLM."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest

from responses_api_models.vllm_model.tests.test_app import rollout_session, start_refusal
from responses_api_models.vllm_model.tests.test_training import (
    CITIES,
    WEATHER_TOOL,
    generation_prompts,
    item_index,
    run_turns,
    token_fields,
    training_server,
    weather_steps,
)
from tests.vllm_script import VllmUpstream, fresh_model

CHAT_PATH = "/v1/chat/completions"


def chat_bodies(upstream: VllmUpstream, model: str) -> list[dict[str, Any]]:
    return [call["body"] for call in upstream.requests(model) if call["path"] == CHAT_PATH]


async def supplied_prefix_rollout(
    tmp_path: Path, upstream: VllmUpstream, model: str, turns: int, **settings: Any
) -> list[dict[str, Any]]:
    """The first turn's ids are not the canonical ones: only a prompt that starts with them continues it."""
    first, *rest = weather_steps()
    upstream.script(model, [{**first, "noncanonical": True}, *rest])
    history: list[dict[str, Any]] = [{"role": "user", "content": "Which city is sunniest?"}]
    server = training_server(
        tmp_path, upstream, model, uses_reasoning_parser=True, supply_prefix_token_ids=True, **settings
    )
    async with server as vllm, rollout_session() as session:
        return await run_turns(vllm, session, history, turns=turns)


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
        if call["path"] == "/tokenize" and call["body"].get("add_generation_prompt")
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
    first, *rest = weather_steps()
    vllm_upstream.script(model, [{**first, "noncanonical": True}, *rest])
    history: list[dict[str, Any]] = [{"role": "user", "content": "Which city is sunniest?"}]
    server = training_server(
        tmp_path, vllm_upstream, model, uses_reasoning_parser=True, supply_prefix_token_ids=True
    )
    async with server as vllm, rollout_session() as session:
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
    vllm_upstream.script(model, weather_steps())
    history: list[dict[str, Any]] = [{"role": "user", "content": "Which city is sunniest?"}]
    server = training_server(
        tmp_path, vllm_upstream, model, uses_reasoning_parser=True, supply_prefix_token_ids=True
    )
    async with server as vllm, rollout_session() as session:
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
