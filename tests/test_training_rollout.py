"""The training path end to end, configured as NeMo Gym configures it: `gym run` of example_single_tool_call
and NeMo Gym's own vllm_model training block (no eos_token_id), the policy keys in env.yaml. simple_agent →
vllm_model (training mode) → the vLLM-compatible test upstream, whose tokenisation is real."""

from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest
import yaml
from pydantic import TypeAdapter

from nemo_gym.http.client import get_response_json, request
from nemo_gym.openai_utils import RESPONSES_TO_TRAIN, NeMoGymResponseInputItem
from tests.helpers import REPO_ROOT, RunningDeployment, running_deployment
from tests.vllm_script import VllmUpstream, fresh_model, scripted_call

CITIES = ("Paris", "London", "Berlin", "Tokyo")
ROW = orjson.loads(
    (REPO_ROOT / "resources_servers/example_single_tool_call/data/example.jsonl").read_bytes().splitlines()[0]
)
ITEMS = TypeAdapter(list[NeMoGymResponseInputItem])
TRAINING_TYPES = tuple(RESPONSES_TO_TRAIN.values())
ENVIRONMENT_CONFIG = "resources_servers/example_single_tool_call/configs/example_single_tool_call.yaml"
AGENT = "example_single_tool_call_simple_agent"
# NeMo Gym's training config for vllm_model, as its users have it.
NEMO_GYM_TRAINING_CONFIG = """\
policy_model:
  responses_api_models:
    vllm_model:
      entrypoint: app.py
      base_url: ${policy_base_url}
      api_key: ${policy_api_key}
      model: ${policy_model_name}
      return_token_id_information: true
      uses_reasoning_parser: false
      chat_template_kwargs:
        enable_thinking: true
        truncate_history_thinking: true
"""


@pytest.fixture
def deployment(vllm_upstream: VllmUpstream, tmp_path: Path) -> Iterator[tuple[RunningDeployment, str]]:
    model = fresh_model("training-rollout")
    vllm_upstream.configure(model, reasoning_parser=False)  # vLLM as served for uses_reasoning_parser: false
    (tmp_path / "policy_for_training.yaml").write_text(NEMO_GYM_TRAINING_CONFIG)
    env_yaml = {
        "policy_base_url": vllm_upstream.base_url,
        "policy_api_key": "sk-training",
        "policy_model_name": model,
    }
    (tmp_path / "env.yaml").write_text(yaml.safe_dump(env_yaml))
    args = [f"+config_paths=[{ENVIRONMENT_CONFIG},policy_for_training.yaml]"]
    with running_deployment(args, tmp_path) as running:
        yield running, model


async def test_nemo_gyms_training_config_runs_a_five_turn_rollout_each_prompt_extending_the_last(
    deployment: tuple[RunningDeployment, str], vllm_upstream: VllmUpstream
):
    running, model = deployment
    url = running.url(AGENT)
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
    eos = vllm_upstream.tokenizer_info()["eos_token_id"]
    assert all(item.generation_token_ids[-1] == eos for item in trained)
    assert f"end-of-turn token id {eos}," in running.wait_for_output("end-of-turn token id")
