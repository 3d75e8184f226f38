"""Every tool-call format through the training path: turn 1 is vLLM's chat endpoint (which returns what
vLLM's own parser makes of the text), turns 2 to 5 are token-in/token-out, parsed here. The same text
must give the same message both ways, and every prompt must continue the last token for token."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from responses_api_models.vllm_model.parsers import REASONING_PARSERS, TOOL_CALL_PARSERS, OutputParsers
from responses_api_models.vllm_model.tests.format_samples_a import SAMPLES as SAMPLES_A
from responses_api_models.vllm_model.tests.format_samples_b import SAMPLES as SAMPLES_B
from responses_api_models.vllm_model.tests.test_app import rollout_session, start_refusal
from responses_api_models.vllm_model.tests.test_training import (
    CITIES,
    WEATHER_TOOL,
    generation_prompts,
    token_fields,
    training_server,
)
from tests.vllm_script import VllmUpstream, fresh_model

SAMPLES = {**SAMPLES_A, **SAMPLES_B}
ANSWER = "Paris is the sunniest."
# Formats whose reasoning is part of the format itself, with the reasoning parser vLLM pairs them with.
REASONING_PARSER_FOR = {"openai": "openai_gptoss"}


def scripted_turns(parser: str) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Four one-call turns and an answer in `parser`'s format: the raw steps and the messages vLLM's
    chat endpoint returns for them."""
    samples = [SAMPLES[parser]("", [("get_weather", {"city": city})]) for city in CITIES]
    samples.append(SAMPLES[parser](ANSWER, []))
    return [{"raw": raw, "message": message} for raw, message in samples], [m for _, m in samples]


def calls_of(output: list[dict[str, Any]]) -> list[tuple[str, str]]:
    return [(item["name"], item["arguments"]) for item in output if item["type"] == "function_call"]


def text_of(output: list[dict[str, Any]]) -> str:
    return "".join(part["text"] for item in output if item["type"] == "message" for part in item["content"])


def test_every_parser_the_issue_names_is_registered() -> None:
    named = {
        "hermes", "qwen3_coder", "qwen3_xml", "llama3_json", "llama4_pythonic", "pythonic", "mistral",
        "deepseek_v3", "deepseek_v31", "openai", "kimi_k2", "glm45", "granite",
    }  # fmt: skip
    assert named <= set(TOOL_CALL_PARSERS) and named <= set(SAMPLES)


@pytest.mark.parametrize("parser", sorted(SAMPLES))
async def test_a_five_turn_tool_rollout_parses_every_call_as_vllm_does_with_exact_tokens(
    parser: str, tmp_path: Path, vllm_upstream: VllmUpstream
) -> None:
    model = fresh_model(f"vllm-{parser}")
    steps, expected = scripted_turns(parser)
    vllm_upstream.script(model, steps)
    settings: dict[str, Any] = {
        "tool_call_parser": parser,
        "uses_reasoning_parser": parser in REASONING_PARSER_FOR,
    }
    if parser in REASONING_PARSER_FOR:
        settings["reasoning_parser"] = REASONING_PARSER_FOR[parser]
    history: list[dict[str, Any]] = [{"role": "user", "content": "Which city is sunniest?"}]
    responses = []
    async with (
        training_server(tmp_path, vllm_upstream, model, **settings) as vllm,
        rollout_session() as session,
    ):
        for _ in range(5):
            status, response = await vllm.post(
                "/v1/responses", {"input": history, "tools": [WEATHER_TOOL]}, session
            )
            assert status == 200, response
            responses.append(response)
            history.extend(response["output"])
            history.extend(
                {"type": "function_call_output", "call_id": item["call_id"], "output": "sunny"}
                for item in response["output"]
                if item["type"] == "function_call"
            )

    for response, message in zip(responses, expected, strict=True):
        wanted = [(call["name"], call["arguments"]) for call in message["tool_calls"]]
        assert calls_of(response["output"]) == wanted
        assert "token_continuity" not in response
    assert text_of(responses[-1]["output"]) == expected[-1]["content"]
    fields = [token_fields(response) for response in responses]
    assert generation_prompts(vllm_upstream, model) == [prompt for prompt, _, _ in fields]
    for (prompt, generated, log_probs), (next_prompt, _, _) in zip(fields, fields[1:], strict=False):
        assert next_prompt[: len(prompt) + len(generated)] == prompt + generated
        assert len(log_probs) == len(generated) > 0
    completions = [
        call["body"] for call in vllm_upstream.requests(model) if call["path"] == "/v1/completions"
    ]
    assert len(completions) == 4
    keeps = TOOL_CALL_PARSERS[parser]().keeps_special_tokens
    assert all(body.get("skip_special_tokens", True) is (not keeps) for body in completions)


@pytest.mark.parametrize(("key", "name"), [("tool_call_parser", "hermes2"), ("reasoning_parser", "qwen4")])
def test_an_unknown_parser_name_refuses_to_start_in_one_line(key: str, name: str, tmp_path: Path) -> None:
    assert start_refusal(tmp_path, uses_reasoning_parser=True, **{key: name}) == [
        f"Error: invalid config for server instance 'policy_model': {key}: unknown {key} {name!r}; known: "
        + ", ".join(sorted(TOOL_CALL_PARSERS if key == "tool_call_parser" else REASONING_PARSERS))
    ]


@pytest.mark.parametrize(
    ("tool_choice", "raw", "schema"),
    [
        ({"type": "function", "name": "get_weather"}, '{"city": "Berlin"}', WEATHER_TOOL["parameters"]),
        (
            "required",
            '[{"name": "get_weather", "parameters": {"city": "Berlin"}}]',
            {
                "type": "array",
                "minItems": 1,
                "items": {
                    "type": "object",
                    "anyOf": [
                        {
                            "properties": {
                                "name": {"type": "string", "enum": ["get_weather"]},
                                "parameters": WEATHER_TOOL["parameters"],
                            },
                            "required": ["name", "parameters"],
                        }
                    ],
                },
            },
        ),
    ],
)
async def test_a_forced_tool_choice_holds_on_a_continued_turn(
    tool_choice: Any, raw: str, schema: dict[str, Any], tmp_path: Path, vllm_upstream: VllmUpstream
) -> None:
    """The second turn is decoded under the same JSON constraint vLLM's chat endpoint would use, and
    its JSON is read as vLLM reads a forced choice."""
    model = fresh_model("vllm")
    vllm_upstream.script(model, [*scripted_turns("hermes")[0][:1], {"raw": raw}])
    history: list[dict[str, Any]] = [{"role": "user", "content": "Weather?"}]
    async with training_server(tmp_path, vllm_upstream, model) as vllm, rollout_session() as session:
        for _ in range(2):
            body = {"input": history, "tools": [WEATHER_TOOL], "tool_choice": tool_choice}
            status, response = await vllm.post("/v1/responses", body, session)
            assert status == 200, response
            history.extend(response["output"])
            history.extend(
                {"type": "function_call_output", "call_id": item["call_id"], "output": "sunny"}
                for item in response["output"]
                if item["type"] == "function_call"
            )

    assert calls_of(response["output"]) == [("get_weather", '{"city": "Berlin"}')]
    assert "token_continuity" not in response, response["token_continuity"]
    (continued,) = [
        call["body"] for call in vllm_upstream.requests(model) if call["path"] == "/v1/completions"
    ]
    assert continued["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "tool_calls", "schema": schema},
    }


async def test_response_format_holds_on_a_continued_turn(tmp_path: Path, vllm_upstream: VllmUpstream) -> None:
    model = fresh_model("vllm")
    vllm_upstream.script(model, [{"raw": '{"a": 1}'}, {"raw": '{"a": 2}'}])
    history: list[dict[str, Any]] = [{"role": "user", "content": "JSON please."}]
    async with training_server(tmp_path, vllm_upstream, model) as vllm, rollout_session() as session:
        for question in ("Again.", None):
            body = {"input": history, "text": {"format": {"type": "json_object"}}}
            status, response = await vllm.post("/v1/responses", body, session)
            assert status == 200, response
            history.extend(response["output"])
            if question:
                history.append({"role": "user", "content": question})

    generations = [call["body"] for call in vllm_upstream.requests(model) if "completions" in call["path"]]
    assert [body["response_format"] for body in generations] == [{"type": "json_object"}] * 2
    assert text_of(response["output"]) == '{"a": 2}'


async def test_a_named_tool_choice_naming_no_offered_tool_is_a_400_on_a_continued_turn(
    tmp_path: Path, vllm_upstream: VllmUpstream
) -> None:
    model = fresh_model("vllm")
    vllm_upstream.script(model, scripted_turns("hermes")[0][:1])
    history: list[dict[str, Any]] = [{"role": "user", "content": "Weather?"}]
    async with training_server(tmp_path, vllm_upstream, model) as vllm, rollout_session() as session:
        status, first = await vllm.post("/v1/responses", {"input": history, "tools": [WEATHER_TOOL]}, session)
        assert status == 200, first
        history.extend(first["output"])
        history.append({"role": "user", "content": "And now?"})
        body = {
            "input": history,
            "tools": [WEATHER_TOOL],
            "tool_choice": {"type": "function", "name": "nope"},
        }
        status, refused = await vllm.post("/v1/responses", body, session)

    assert status == 400
    assert "tool_choice: function 'nope' is not among the request's tools" in refused["error"]["message"]
    assert [call["path"] for call in vllm_upstream.requests(model)].count("/tokenize") == 1  # turn 1's only


def test_the_requests_chat_template_kwargs_switch_qwen3_thinking_as_vllm_reads_them() -> None:
    """Without `</think>` a qwen3 turn is all reasoning while thinking is on, all content when it is off."""
    parsers = OutputParsers.named("hermes", "qwen3")
    thinking = parsers.message("Bye!", None)
    plain = parsers.message("Bye!", None, template_kwargs={"enable_thinking": False})
    assert (thinking["reasoning_content"], thinking["content"]) == ("Bye!", None)
    assert (plain["reasoning_content"], plain["content"]) == (None, "Bye!")
