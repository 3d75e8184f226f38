"""ImageToolsAgent over HTTP against the shipped image_tools environment: the environment, the policy model
(openai_model) and the agents are real server processes on 127.0.0.1; the scripted upstream (the one test
double) plays the policy, answering with image-tool calls written in its text and then with an answer."""

from __future__ import annotations

import base64
import io
from collections.abc import Iterator
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path

import orjson
import pytest
import yaml
from PIL import Image

from nemo_gym.http.client import get_response_json, request
from nemo_gym.testing import instance_config, read_jsonl, run_instance
from responses_api_agents.image_tools_agent.image_ops import PATCH, ResizeBounds, fitted_size
from tests.upstream_script import ScriptedUpstream, assistant_message, fresh_model

REPO = Path(__file__).resolve().parents[3]
ENV_DATA = REPO / "resources_servers" / "image_tools" / "data"
ROWS = read_jsonl(ENV_DATA / "example_inspection.jsonl")
PAIRING = yaml.safe_load((ENV_DATA.parent / "configs" / "image_tools_agent.yaml").read_text())
SHIPPED_AGENT = PAIRING["image_tools_simple_agent"]["responses_api_agents"]["image_tools_agent"]
TAG_ROW = ROWS[0]
MIN_PIXELS, MAX_PIXELS = 65536, 262144
SUCCESS, CAP, INVALID = 0.02, 0.05, -0.05


def tool_call(name: str, **parameters: object) -> str:
    blocks = "".join(f"<parameter={key}>\n{orjson.dumps(value).decode() if not isinstance(value, str) else value}\n"
                     "</parameter>\n" for key, value in parameters.items())  # fmt: skip
    return f"I need a closer look.\n<tool_call>\n<function={name}>\n{blocks}</function>\n</tool_call>"


def zoom(box: list[int], **extra: object) -> str:
    return tool_call("image_zoom_in_tool", bbox_2d=box, img_idx=0, label="the tag", **extra)


@dataclass
class Stack:
    agent_url: str
    lenient_url: str
    shipped_url: str
    policy: str
    upstream: ScriptedUpstream
    crop_dir: Path
    seen: int = 0

    def script(self, *texts: str) -> None:
        self.upstream.clear(self.policy)
        self.seen = len(self.upstream.requests(self.policy))
        self.upstream.script(self.policy, [{"output": [assistant_message(text)]} for text in texts])

    def policy_requests(self) -> list[dict]:
        return [entry["body"] for entry in self.upstream.requests(self.policy)[self.seen :]]


@pytest.fixture(scope="module")
def stack(scripted_upstream: ScriptedUpstream, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    workdir = tmp_path_factory.mktemp("image_tools_agent")
    policy = fresh_model("inspector")
    crop_dir = workdir / "crops"
    with ExitStack() as servers:
        config = {
            "image_tools_pivot": instance_config("resources_servers", "image_tools", domain="agent"),
            "policy_model": instance_config(
                "responses_api_models",
                "openai_model",
                openai_base_url=scripted_upstream.base_url,
                openai_api_key="sk-inspector-test",
                openai_model=policy,
            ),
        }
        for name, server_type, folder in (
            ("image_tools_pivot", "resources_servers", "image_tools"),
            ("policy_model", "responses_api_models", "openai_model"),
        ):
            started = servers.enter_context(run_instance(config, name, workdir))
            config[name][server_type][folder]["port"] = started.port
        agent = {
            "model_server": {"type": "responses_api_models", "name": "policy_model"},
            "resource_servers_by_agent": {
                "image_tools_pivot_agent": {"type": "resources_servers", "name": "image_tools_pivot"}
            },
            "crop_dir": str(crop_dir),
            "crop_format": "png",
            "crop_min_pixels": MIN_PIXELS,
            "crop_max_pixels": MAX_PIXELS,
            "max_steps": 6,
            "max_tool_calls": 3,
            "tool_success_reward": SUCCESS,
            "tool_success_reward_cap": CAP,
            "rollout_deadline_s": 20,
        }
        config["agent"] = instance_config("responses_api_agents", "image_tools_agent", **agent)
        config["lenient"] = instance_config(
            "responses_api_agents", "image_tools_agent", **agent, terminate_on_invalid_tool_call=False
        )
        # The shipped pairing as it is, but for where its pictures go.
        shipped = {
            key: value for key, value in SHIPPED_AGENT.items() if key not in ("entrypoint", "datasets")
        }
        config["shipped"] = instance_config(
            "responses_api_agents", "image_tools_agent", **shipped, crop_dir=str(workdir / "shipped_crops")
        )
        strict = servers.enter_context(run_instance(config, "agent", workdir))
        lenient = servers.enter_context(run_instance(config, "lenient", workdir))
        shipped_agent = servers.enter_context(run_instance(config, "shipped", workdir))
        yield Stack(strict.url, lenient.url, shipped_agent.url, policy, scripted_upstream, crop_dir)


async def run(url: str, row: dict = TAG_ROW) -> tuple[int, dict]:
    response = await request("POST", url + "/run", json=row)
    return response.status, await get_response_json(response)


def source_image(row: dict = TAG_ROW) -> Image.Image:
    part = next(
        p for p in row["responses_create_params"]["input"][1]["content"] if p["type"] == "input_image"
    )
    return decoded(part["image_url"])


def decoded(url: str) -> Image.Image:
    with Image.open(io.BytesIO(base64.b64decode(url.split(",", 1)[1]))) as image:
        return image.convert("RGB")


def shown_images(model_request: dict) -> list[Image.Image]:
    """The pictures of the tool results in the last user message of a policy request."""
    last = model_request["input"][-1]
    return [decoded(part["image_url"]) for part in last["content"] if part["type"] == "input_image"]


def tool_text(model_request: dict) -> str:
    return "".join(part.get("text", "") for part in model_request["input"][-1]["content"])


async def test_a_zoom_then_an_answer_shows_the_region_and_adds_the_tool_reward(stack):
    stack.script(zoom([850, 820, 1000, 1000]), "The tag reads \\boxed{K7}.")
    status, result = await run(stack.agent_url)
    assert status == 200, result
    assert result["base_reward"] == 1.0, "the environment graded the final answer"
    assert result["image_tools_aux_reward"] == pytest.approx(SUCCESS)
    assert result["reward"] == pytest.approx(1.0 + SUCCESS)
    assert (result["image_tools_call_count"], result["image_tools_error_count"]) == (1, 0)
    first, second = stack.policy_requests()
    assert first["input"] == TAG_ROW["responses_create_params"]["input"]
    assert orjson.loads(first["metadata"]["extra_body"]) == {
        "stop": ["</tool_call>"],
        "include_stop_str_in_output": True,
    }
    (zoomed,) = shown_images(second)
    # The region is 48x48 pixels of the 320x240 picture (the tag's corner), magnified 3 times then fitted
    # to the pixel bounds in multiples of 32.
    source = source_image()
    region = source.crop((272, 196, 320, 240))
    assert zoomed.size == fitted_size(
        region.width * 3, region.height * 3, ResizeBounds(MIN_PIXELS, MAX_PIXELS)
    )
    assert MIN_PIXELS <= zoomed.width * zoomed.height <= MAX_PIXELS and zoomed.width % PATCH == 0
    assert zoomed.resize(region.size, Image.Resampling.BOX).getpixel((20, 20)) == pytest.approx(
        region.getpixel((20, 20)), abs=12
    ), "the picture is the requested region of the source, not another part"
    assert '"new_img_indices":[1]' in tool_text(second)
    (path,) = result["image_tools_output_paths"]
    assert Path(path).is_file() and Path(path).is_relative_to(stack.crop_dir)
    assert result["image_tools_generation_image_paths"] == [[], [path]]
    roles = [item.get("role") for item in result["response"]["output"]]
    assert roles == ["assistant", "user", "assistant"]
    assert result["image_tools_base_agent_ref"]["name"] == "image_tools_pivot_agent"


async def test_a_large_region_is_scaled_down_within_the_pixel_cap(stack):
    stack.script(zoom([0, 0, 1000, 1000], factor=4), "\\boxed{K7}")
    status, result = await run(stack.agent_url)
    assert status == 200, result
    (zoomed,) = shown_images(stack.policy_requests()[1])
    assert zoomed.width * zoomed.height <= MAX_PIXELS
    assert abs(zoomed.width / zoomed.height - 320 / 240) < 0.15, "the aspect ratio is kept"


async def test_an_out_of_range_crop_is_a_tool_error_the_model_sees(stack):
    stack.script(
        tool_call("image_crop_tool", bbox_2d=[1200, 1200, 1500, 1500], img_idx=0, label="off the picture"),
        tool_call("image_crop_tool", bbox_2d=[0, 0, 500, 500], img_idx=3, label="no such image"),
        "\\boxed{K7}",
    )
    status, result = await run(stack.lenient_url)
    assert status == 200, result
    _, after_crop, after_index = stack.policy_requests()
    assert "image_crop_tool failed" in tool_text(after_crop) and "outside the 320x240 image" in tool_text(
        after_crop
    )
    assert "img_idx 3 is out of range for 1 image(s)" in tool_text(after_index)
    assert shown_images(after_crop) == []
    assert result["image_tools_error_count"] == 2 and result["image_tools_call_count"] == 0
    assert result["image_tools_aux_reward"] == pytest.approx(2 * INVALID)
    assert result["base_reward"] == 1.0 and result["reward"] == pytest.approx(1.0 + 2 * INVALID)


async def test_by_default_a_broken_call_ends_the_rollout_with_its_penalty(stack):
    stack.script("<tool_call>\n<function=image_zoom_in_tool>\n<parameter=bbox_2d>\n[0, 0", "never asked for")
    status, result = await run(stack.agent_url)
    assert status == 200, result
    assert len(stack.policy_requests()) == 1
    assert result["image_tools_error_count"] == 1 and result["image_tools_aux_reward"] == pytest.approx(
        INVALID
    )
    assert result["base_reward"] == 0.0, "the environment found no answer"


async def test_a_repeated_region_is_penalised_and_the_next_turn_must_answer(stack):
    stack.script(
        zoom([850, 820, 1000, 1000]), zoom([860, 830, 1000, 1000]), zoom([0, 0, 200, 200]), "\\boxed{K7}"
    )
    status, result = await run(stack.lenient_url)
    assert status == 200, result
    requests = stack.policy_requests()
    assert len(requests) == 4
    assert "overlaps an earlier image_zoom_in_tool result" in tool_text(requests[2])
    assert "A final answer was required" in tool_text(requests[3])
    assert result["image_tools_call_count"] == 2 and result["image_tools_error_count"] == 1
    assert result["image_tools_aux_reward"] == pytest.approx(SUCCESS - 0.02 + INVALID)


async def test_the_tool_reward_stops_at_its_cap_and_calls_stop_at_the_limit(stack):
    boxes = ([0, 0, 100, 100], [300, 300, 400, 400], [600, 600, 700, 700], [800, 0, 900, 100])
    stack.script(*(zoom(box) for box in boxes), "\\boxed{K7}")
    status, result = await run(stack.agent_url)
    assert status == 200, result
    requests = stack.policy_requests()
    assert "This is your last turn" in tool_text(requests[4]), (
        "after max_tool_calls the model is asked to answer"
    )
    assert result["image_tools_call_count"] == 3
    assert result["image_tools_aux_reward"] == pytest.approx(CAP)
    assert len(result["image_tools_generation_image_paths"]) == 5


async def test_an_unknown_base_agent_is_a_422_naming_the_field(stack):
    row = {**TAG_ROW, "image_tools_base_agent_ref": {"type": "responses_api_agents", "name": "nobody"}}
    status, result = await run(stack.agent_url, row)
    assert status == 422
    assert "image_tools_base_agent_ref.name 'nobody'" in result["error"]["message"]


async def test_every_shipped_inspection_row_runs_end_to_end_with_the_shipped_pairing(stack):
    answers = ("K7", "3", "green", "Q", "triangle")
    for row, answer in zip(ROWS, answers, strict=True):
        stack.script(zoom([750, 0, 1000, 250]), f"\\boxed{{{answer}}}")
        status, result = await run(stack.shipped_url, row)
        assert status == 200 and result["base_reward"] == 1.0, result
        assert result["reward"] == pytest.approx(1.0 + SHIPPED_AGENT["tool_success_reward"])


async def test_a_pivot_row_without_a_base_agent_goes_to_the_default_environment(stack):
    pivot_row = read_jsonl(ENV_DATA / "example.jsonl")[4]  # an answer turn: how many dots
    stack.script("\\boxed{4}")
    status, result = await run(stack.shipped_url, pivot_row)
    assert status == 200 and result["reward"] == 1.0, result
    assert result["image_tools_base_agent_ref"] is None


async def test_metrics_over_rows_of_several_environments_are_computed_by_the_agent(stack):
    stack.script("\\boxed{K7}")
    _, result = await run(stack.agent_url)
    response = await request(
        "POST", stack.agent_url + "/aggregate_metrics", json={"verify_responses": [result]}
    )
    metrics = await get_response_json(response)
    assert response.status == 200, metrics
    assert metrics["agent_metrics"]["mean/reward"] == pytest.approx(result["reward"])
