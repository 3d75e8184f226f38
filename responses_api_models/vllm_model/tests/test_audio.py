"""A speech row's audio reaches the upstream: vllm_model in front of tests/vllm_upstream.py, over HTTP.

The row carries its clip in `metadata` (`audio_data`, `audio_path` or `audio_paths`, NeMo Gym 0.7's keys);
the upstream must get it as `audio_url` parts before the text of the last user message, and a clip the
server must not read (outside `audio_root`, missing, too big) must be a 4xx naming the key, with nothing
sent upstream.
"""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

import orjson
import pytest

from nemo_gym.testing import read_jsonl
from responses_api_models.vllm_model.tests.test_app import served, start_refusal
from tests.benchmark_checks import COMMAND_DEADLINE_S
from tests.helpers import run_gym
from tests.vllm_script import VllmUpstream, fresh_model

CHAT_PATH = "/v1/chat/completions"
INSTRUCTION = "Transcribe the audio with proper punctuation and capitalization."
# A few bytes that stand for a clip: the server inlines files without decoding them.
FLAC_CLIP = b"fLaC\x00\x00\x00\x22" + bytes(range(40))
WAV_CLIP = b"RIFF\x24\x00\x00\x00WAVEfmt " + bytes(range(30, 60))


def data_uri(subtype: str, content: bytes) -> str:
    return f"data:audio/{subtype};base64,{base64.b64encode(content).decode()}"


def speech_request(metadata: dict[str, str]) -> dict[str, Any]:
    return {
        "input": [
            {"role": "system", "content": "You are a careful transcriber."},
            {"role": "user", "content": INSTRUCTION},
        ],
        "metadata": metadata,
    }


def chat_bodies(upstream: VllmUpstream, model: str) -> list[dict[str, Any]]:
    return [call["body"] for call in upstream.requests(model) if call["path"] == CHAT_PATH]


def audio_tree(tmp_path: Path) -> Path:
    """`audio_root` with two clips (one in a subfolder), and a clip and a link to it outside the root."""
    root = tmp_path / "audio"
    (root / "test-clean").mkdir(parents=True)
    (root / "test-clean" / "1089-0000.flac").write_bytes(FLAC_CLIP)
    (root / "noise.wav").write_bytes(WAV_CLIP)
    (tmp_path / "private.wav").write_bytes(b"RIFF not for the model")
    (root / "link.wav").symlink_to(tmp_path / "private.wav")
    return root


async def test_audio_data_goes_first_in_the_last_user_message_and_leaves_the_forwarded_metadata(
    tmp_path: Path, vllm_upstream: VllmUpstream
) -> None:
    model = fresh_model("vllm")
    vllm_upstream.script(model, [{"text": "He hoped there would be stew."}])
    clip = data_uri("flac", FLAC_CLIP)
    metadata = {"audio_data": clip, "extra_body": '{"seed": 7}', "row": "1089"}
    async with served(tmp_path, vllm_upstream.base_url, model, uses_reasoning_parser=False) as vllm:
        status, answer = await vllm.post("/v1/responses", speech_request(metadata))

    assert status == 200, answer
    assert answer["output"][-1]["content"][0]["text"] == "He hoped there would be stew."
    (body,) = chat_bodies(vllm_upstream, model)
    system, user = body["messages"]
    assert system["role"] == "system" and "audio" not in orjson.dumps(system).decode()
    assert user == {
        "role": "user",
        "content": [
            {"type": "audio_url", "audio_url": {"url": clip}},
            {"type": "text", "text": INSTRUCTION},
        ],
    }
    # The clip travels once; the rest of the metadata still works and is still forwarded.
    assert body["metadata"] == {"extra_body": '{"seed": 7}', "row": "1089"} and body["seed"] == 7
    assert answer["metadata"] == metadata  # the response echoes the request's metadata, as always


async def test_audio_paths_under_audio_root_are_inlined_on_both_routes(
    tmp_path: Path, vllm_upstream: VllmUpstream
) -> None:
    model = fresh_model("vllm")
    vllm_upstream.script(model, [{"text": "one"}, {"text": "two"}, {"text": "three"}])
    root = audio_tree(tmp_path)
    flac, wav = data_uri("flac", FLAC_CLIP), data_uri("wav", WAV_CLIP)
    async with served(tmp_path, vllm_upstream.base_url, model, audio_root=str(root)) as vllm:
        relative = await vllm.post(
            "/v1/responses", speech_request({"audio_path": "test-clean/1089-0000.flac"})
        )
        absolute = await vllm.post("/v1/responses", speech_request({"audio_path": str(root / "noise.wav")}))
        chat = {
            "messages": [{"role": "user", "content": [{"type": "text", "text": INSTRUCTION}]}],
            "metadata": {"audio_paths": orjson.dumps(["noise.wav", "test-clean/1089-0000.flac"]).decode()},
        }
        on_chat_route = await vllm.post(CHAT_PATH, chat)

    assert [status for status, _ in (relative, absolute, on_chat_route)] == [200, 200, 200]
    parts = [body["messages"][-1]["content"] for body in chat_bodies(vllm_upstream, model)]
    text = {"type": "text", "text": INSTRUCTION}
    assert parts == [
        [{"type": "audio_url", "audio_url": {"url": flac}}, text],
        [{"type": "audio_url", "audio_url": {"url": wav}}, text],
        [
            {"type": "audio_url", "audio_url": {"url": wav}},
            {"type": "audio_url", "audio_url": {"url": flac}},
            text,
        ],
    ]
    assert all("metadata" not in body for body in chat_bodies(vllm_upstream, model))


@pytest.mark.parametrize(
    ("metadata", "status", "message"),
    [
        (
            {"audio_path": "../private.wav"},
            400,
            "metadata.audio_path: '../private.wav' is outside audio_root",
        ),
        ({"audio_path": "{tmp}/private.wav"}, 400, "private.wav' is outside audio_root"),
        ({"audio_path": "link.wav"}, 400, "metadata.audio_path: 'link.wav' is outside audio_root"),
        ({"audio_paths": '["noise.wav", "../private.wav"]'}, 400, "metadata.audio_paths: '../private.wav'"),
        (
            {"audio_path": "test-clean/missing.flac"},
            400,
            "no file 'test-clean/missing.flac' under audio_root",
        ),
        ({"audio_path": "notes.txt"}, 400, "metadata.audio_path: 'notes.txt' has no known audio extension"),
        (
            {"audio_path": "noise\u0000.wav"},
            400,
            "metadata.audio_path: 'noise\\x00.wav' is not a usable path",
        ),
        ({"audio_paths": "noise.wav"}, 400, "metadata.audio_paths must be a JSON array of file paths"),
        ({"audio_path": "noise.wav", "audio_data": "data:audio/wav;base64,"}, 400, "are alternatives"),
        ({"audio_paths": '["noise.wav", "test-clean/1089-0000.flac"]'}, 413, "over max_audio_mb"),
    ],
)
async def test_audio_the_server_must_not_send_is_a_4xx_naming_the_key_and_nothing_goes_upstream(
    tmp_path: Path, vllm_upstream: VllmUpstream, metadata: dict[str, str], status: int, message: str
) -> None:
    model = fresh_model("vllm")
    root = audio_tree(tmp_path)
    metadata = {key: value.replace("{tmp}", str(tmp_path)) for key, value in metadata.items()}
    # Room for either clip alone (50 bytes), not for both.
    limit_mb = (len(WAV_CLIP) + 10) / (1024 * 1024)
    async with served(
        tmp_path, vllm_upstream.base_url, model, audio_root=str(root), max_audio_mb=limit_mb
    ) as vllm:
        answered, body = await vllm.post("/v1/responses", speech_request(metadata))

    assert answered == status, body
    assert message in body["error"]["message"]
    assert "not for the model" not in orjson.dumps(body).decode()
    assert vllm_upstream.requests(model) == []


async def test_an_audio_path_without_audio_root_is_a_400_that_says_to_set_it(
    tmp_path: Path, vllm_upstream: VllmUpstream
) -> None:
    model = fresh_model("vllm")
    clip = audio_tree(tmp_path) / "noise.wav"
    async with served(tmp_path, vllm_upstream.base_url, model) as vllm:
        status, body = await vllm.post("/v1/responses", speech_request({"audio_path": str(clip)}))

    assert status == 400
    assert "has no audio_root; set audio_root in its config" in body["error"]["message"]
    assert vllm_upstream.requests(model) == []


@pytest.mark.parametrize(
    ("audio_root", "reason"),
    [("relative/audio", "must be an absolute path"), ("/nonexistent/gym-audio", "no folder at")],
)
def test_an_audio_root_that_is_not_an_absolute_folder_stops_the_server_at_start(
    tmp_path: Path, audio_root: str, reason: str
) -> None:
    lines = start_refusal(tmp_path, audio_root=audio_root)
    assert any("audio_root" in line and reason in line for line in lines), lines


def test_a_speech_rows_metadata_reaches_the_model_through_the_agent_in_a_whole_evaluation(
    tmp_path: Path, vllm_upstream: VllmUpstream
) -> None:
    """`gym eval run` with asr_with_pc and vllm_model: the agent hands the row's metadata to the model
    server, which splices the clip named by an absolute path (as the speech benchmarks write them)."""
    model = fresh_model("vllm")
    vllm_upstream.script(model, [{"text": "He hoped there would be stew."}])
    root = audio_tree(tmp_path)
    row = {
        "responses_create_params": speech_request(
            {"audio_path": str(root / "test-clean" / "1089-0000.flac")}
        ),
        "expected_answer": "He hoped there would be stew.",
    }
    (tmp_path / "rows.jsonl").write_bytes(orjson.dumps(row) + b"\n")
    run = run_gym("eval", "run", "--resources-server", "asr_with_pc", "--model-type", "vllm_model",
                  "--model-url", vllm_upstream.base_url, "-m", model, "--model-api-key", "sk-test-audio",
                  "-a", "asr_with_pc_simple_agent", "--no-health-check", "-i", "rows.jsonl", "-o", "results/rollouts.jsonl",
                  f"++policy_model.responses_api_models.vllm_model.audio_root={root}",
                  cwd=tmp_path, timeout=COMMAND_DEADLINE_S)  # fmt: skip
    assert run.returncode == 0, run.stdout + run.stderr

    (body,) = chat_bodies(vllm_upstream, model)
    assert body["messages"][-1]["content"][0] == {
        "type": "audio_url",
        "audio_url": {"url": data_uri("flac", FLAC_CLIP)},
    }
    (result,) = read_jsonl(tmp_path / "results" / "rollouts.jsonl")
    assert result["reward"] == 1.0
