"""`use_completions_api` against the vLLM-compatible upstream: a real vllm_model process, real BPE ids.

Each test asserts both sides: the `/v1/completions` body the upstream received (prompt text, sampling
fields, no chat fields) and the Responses or chat answer the caller got back.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from omegaconf import OmegaConf

from responses_api_models.vllm_model.app import VLLMModelConfig
from responses_api_models.vllm_model.tests.test_app import CONFIGS, served, start_refusal
from tests.vllm_script import VllmUpstream, fresh_model

COMPLETIONS_PATH = "/v1/completions"


def completion_calls(upstream: VllmUpstream, model: str) -> list[dict[str, Any]]:
    return [call for call in upstream.requests(model) if call["path"] == COMPLETIONS_PATH]


async def test_instructions_and_input_become_one_raw_prompt_and_the_text_comes_back(
    tmp_path: Path, vllm_upstream: VllmUpstream
) -> None:
    model = fresh_model("completions")
    vllm_upstream.script(model, [{"text": " Paris is the capital."}])
    settings = {"use_completions_api": True, "uses_reasoning_parser": False, "extra_body": {"top_k": 5}}
    async with served(tmp_path, vllm_upstream.base_url, model, **settings) as vllm:
        status, answer = await vllm.post(
            "/v1/responses",
            {
                "instructions": "Answer in one sentence.",
                "input": "Q: What is the capital of France?\nA:",
                "max_output_tokens": 40,
                "temperature": 0.0,
            },
        )
    assert status == 200, answer
    [call] = vllm_upstream.requests(model)
    assert call["path"] == COMPLETIONS_PATH
    body = call["body"]
    assert body["prompt"] == "Answer in one sentence.\n\nQ: What is the capital of France?\nA:"
    assert (body["model"], body["max_tokens"], body["temperature"], body["top_k"]) == (model, 40, 0.0, 5)
    assert not {"messages", "tools", "chat_template_kwargs", "max_completion_tokens"} & body.keys()
    # The engine saw the prompt's own tokens, no template around them.
    assert vllm_upstream.detokenize(model, call["prompt_token_ids"]) == body["prompt"]
    [message] = answer["output"]
    assert message["type"] == "message"
    assert message["content"][0]["text"] == " Paris is the capital."
    assert answer["status"] == "completed"
    assert answer["usage"]["input_tokens"] == len(call["prompt_token_ids"])


async def test_think_blocks_in_the_text_become_a_reasoning_item_with_the_reasoning_parser(
    tmp_path: Path, vllm_upstream: VllmUpstream
) -> None:
    model = fresh_model("completions")
    vllm_upstream.script(model, [{"reasoning": "Six times seven.", "text": "42"}])
    async with served(
        tmp_path, vllm_upstream.base_url, model, use_completions_api=True, uses_reasoning_parser=True
    ) as vllm:
        status, answer = await vllm.post(
            "/v1/responses", {"input": "What is 6 times 7?", "max_output_tokens": 64}
        )
    assert status == 200, answer
    reasoning, message = answer["output"]
    assert reasoning["type"] == "reasoning"
    assert reasoning["summary"][0]["text"].strip() == "Six times seven."
    assert message["content"][0]["text"].strip() == "42"
    assert "<think>" not in message["content"][0]["text"]


async def test_training_mode_returns_the_engine_s_prompt_and_generated_ids(
    tmp_path: Path, vllm_upstream: VllmUpstream
) -> None:
    model = fresh_model("completions")
    vllm_upstream.script(model, [{"text": "The weather is sunny."}])
    settings = {
        "use_completions_api": True,
        "uses_reasoning_parser": False,
        "return_token_id_information": True,
    }
    async with served(tmp_path, vllm_upstream.base_url, model, **settings) as vllm:
        status, answer = await vllm.post(
            "/v1/responses", {"input": "Weather in Paris?", "max_output_tokens": 64}
        )
    assert status == 200, answer
    [call] = completion_calls(vllm_upstream, model)
    assert call["body"]["logprobs"] == 0
    assert call["body"]["return_tokens_as_token_ids"] is True
    last = answer["output"][-1]
    assert last["prompt_token_ids"] == call["prompt_token_ids"]
    generated = last["generation_token_ids"]
    assert vllm_upstream.detokenize(model, generated).startswith("The weather is sunny.")
    assert len(last["generation_log_probs"]) == len(generated)
    assert last["content"][0]["text"] == "The weather is sunny."


async def test_the_chat_route_goes_through_completions_too(
    tmp_path: Path, vllm_upstream: VllmUpstream
) -> None:
    model = fresh_model("completions")
    vllm_upstream.script(model, [{"text": "Hello there!"}])
    async with served(
        tmp_path, vllm_upstream.base_url, model, use_completions_api=True, uses_reasoning_parser=False
    ) as vllm:
        status, answer = await vllm.post(
            "/v1/chat/completions",
            {
                "model": "any",
                "messages": [{"role": "user", "content": "Greet me."}],
                "max_completion_tokens": 9,
            },
        )
    assert status == 200, answer
    [call] = vllm_upstream.requests(model)
    assert (call["path"], call["body"]["prompt"], call["body"]["max_tokens"]) == (
        COMPLETIONS_PATH,
        "Greet me.",
        9,
    )
    message = answer["choices"][0]["message"]
    assert (message["role"], message["content"]) == ("assistant", "Hello there!")


@pytest.mark.parametrize(
    ("route", "body", "named"),
    [
        (
            "/v1/responses",
            {"input": "Hi", "tools": [{"type": "function", "name": "f", "parameters": {}}]},
            "tools",
        ),
        (
            "/v1/responses",
            {
                "input": [
                    {"role": "user", "content": "Hi"},
                    {"role": "assistant", "content": "Hello"},
                    {"role": "user", "content": "Again"},
                ]
            },
            "input",
        ),
        (
            "/v1/responses",
            {"input": "Hi", "metadata": {"audio_data": "data:audio/wav;base64,AAAA"}},
            "metadata.audio_data",
        ),
        (
            "/v1/chat/completions",
            {"model": "m", "messages": [{"role": "system", "content": "Be brief."}]},
            "messages",
        ),
    ],
    ids=["tools", "multi-turn", "audio", "no-user-message"],
)
async def test_what_a_raw_prompt_cannot_hold_is_a_400_naming_the_field_and_never_sent(
    tmp_path: Path, vllm_upstream: VllmUpstream, route: str, body: dict[str, Any], named: str
) -> None:
    model = fresh_model("completions")
    async with served(
        tmp_path, vllm_upstream.base_url, model, use_completions_api=True, uses_reasoning_parser=False
    ) as vllm:
        status, answer = await vllm.post(route, body)
    assert status == 400, answer
    assert answer["error"]["message"].startswith(f"{named}: ")
    assert "use_completions_api" in answer["error"]["message"]
    assert vllm_upstream.requests(model) == []


def test_render_chat_template_refuses_to_start_in_one_line(tmp_path: Path) -> None:
    lines = start_refusal(tmp_path, use_completions_api=True, render_chat_template=True)
    assert len(lines) == 1
    assert "render_chat_template" in lines[0] and "not implemented" in lines[0]


def test_the_shipped_completions_config_is_a_valid_server_config() -> None:
    policy = {"policy_base_url": "http://127.0.0.1:1/v1", "policy_api_key": "k", "policy_model_name": "base"}
    merged = OmegaConf.merge(OmegaConf.load(CONFIGS / "vllm_model_completions.yaml"), policy)
    inner = OmegaConf.to_container(merged, resolve=True)["policy_model"]["responses_api_models"]["vllm_model"]
    config = VLLMModelConfig.model_validate({**inner, "name": "policy_model", "host": "127.0.0.1", "port": 0})
    assert config.use_completions_api and not config.uses_reasoning_parser
    assert not config.render_chat_template and not config.return_token_id_information
