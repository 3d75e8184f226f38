"""The training path end to end: simple_agent → vllm_model (training mode) → the vLLM-compatible test
upstream, whose tokenisation is real, with example_single_tool_call answering the tool calls."""

from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path

import orjson
import pytest
from pydantic import TypeAdapter

from nemo_gym.http_client import get_response_json, request
from nemo_gym.openai_utils import RESPONSES_TO_TRAIN, NeMoGymResponseInputItem
from tests.helpers import REPO_ROOT, instance_config, run_instance
from tests.vllm_script import VllmUpstream, fresh_model, scripted_call

CITIES = ("Paris", "London", "Berlin", "Tokyo")
ROW = orjson.loads(
    (REPO_ROOT / "resources_servers/example_single_tool_call/data/example.jsonl").read_bytes().splitlines()[0]
)
ITEMS = TypeAdapter(list[NeMoGymResponseInputItem])
TRAINING_TYPES = tuple(RESPONSES_TO_TRAIN.values())


@pytest.fixture
def agent_url(vllm_upstream: VllmUpstream, tmp_path: Path) -> Iterator[tuple[str, str]]:
    model = fresh_model("training-rollout")
    config = {
        "weather": instance_config("resources_servers", "example_single_tool_call", domain="agent"),
        "policy": instance_config(
            "responses_api_models",
            "vllm_model",
            base_url=vllm_upstream.base_url,
            api_key="sk-training",
            model=model,
            return_token_id_information=True,
            uses_reasoning_parser=True,
            eos_token_id=vllm_upstream.tokenizer_info()["eos_token_id"],
        ),
    }
    with ExitStack() as servers:
        for name, server_type, implementation in (
            ("weather", "resources_servers", "example_single_tool_call"),
            ("policy", "responses_api_models", "vllm_model"),
        ):
            started = servers.enter_context(run_instance(config, name, tmp_path))
            config[name][server_type][implementation]["port"] = started.port
        config["agent"] = instance_config(
            "responses_api_agents",
            "simple_agent",
            resources_server={"type": "resources_servers", "name": "weather"},
            model_server={"type": "responses_api_models", "name": "policy"},
        )
        agent = servers.enter_context(run_instance(config, "agent", tmp_path))
        yield agent.url, model


async def test_a_five_turn_rollout_keeps_every_prompt_an_exact_extension_of_the_last(
    agent_url, vllm_upstream: VllmUpstream
):
    url, model = agent_url
    turns = [
        {"reasoning": f"Check {city}.", "tool_calls": [scripted_call("get_weather", {"city": city})]}
        for city in CITIES
    ]
    vllm_upstream.script(model, [*turns, {"reasoning": "Done.", "text": "Paris looks best."}])
    response = await request("POST", url + "/run", json=ROW)
    result = await get_response_json(response)
    assert response.status == 200, result

    output = ITEMS.validate_python(result["response"]["output"])
    trained = [item for item in output if isinstance(item, TRAINING_TYPES)]
    assert len(trained) == 5  # the last item of each model turn
    assert [item.type for item in trained] == ["function_call"] * 4 + ["message"]
    for earlier, later in zip(trained, trained[1:], strict=False):
        assert later.prompt_token_ids[
            : len(earlier.prompt_token_ids) + len(earlier.generation_token_ids)
        ] == (earlier.prompt_token_ids + earlier.generation_token_ids)
    assert all(len(item.generation_log_probs) == len(item.generation_token_ids) > 0 for item in trained)
    engine_prompts = [
        call["prompt_token_ids"]
        for call in vllm_upstream.requests(model)
        if call["path"] in ("/v1/chat/completions", "/v1/completions")
    ]
    assert engine_prompts == [item.prompt_token_ids for item in trained]
    outputs = [item for item in output if item.type == "function_call_output"]
    assert [orjson.loads(item.output)["city"] for item in outputs] == list(CITIES)
    assert "token_continuity" not in result["response"]
