"""One rollout's image inspection: what the model's turn asked for, what the tools made of it, and the
shaping reward of the calls (a small bonus per useful call up to a cap, penalties for broken, repeated or
near-repeated calls), by NeMo Gym's image_tools_agent rules.

`Inspection.take_turn` reads one assistant text and answers a `TurnOutcome`: the rollout is over (an answer,
or a broken call while `terminate_on_invalid_tool_call`), or the next user message holds the tool results:
one JSON line of facts and one picture per executed call.
"""

from __future__ import annotations

import base64
import io
import json
import re
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson
from PIL import Image

from resources_servers.image_tools.tool_calls import TOOL_CALL_BLOCK, ToolCall, after_thinking, calls_in_text
from responses_api_agents.image_tools_agent.image_ops import (
    REGION_TOOLS,
    TOOLS,
    ResizeBounds,
    ToolError,
    as_box,
    box_overlap,
    encoded,
    run_tool,
)

TOOL_MARKERS = ("<tool_call>", "</tool_call>", "<function=", "</function>")
# A row's `dataset` names a folder under crop_dir: anything but these characters becomes "_".
UNSAFE_IN_FOLDER_NAME = re.compile(r"[^A-Za-z0-9_.-]")
DEFAULT_FORCED_FINAL_PROMPT = (
    "This is your last turn. Answer the original question now from the images and tool results you already "
    "have; do not call any more tools."
)


@dataclass(frozen=True)
class InspectionRules:
    """The config keys that shape a rollout's tool use (NeMo Gym's names and meanings)."""

    max_tool_calls: int
    max_tool_calls_per_turn: int
    tool_success_reward: float
    tool_success_reward_cap: float
    invalid_tool_call_penalty: float
    duplicate_tool_call_penalty: float
    force_final_after_duplicate: bool
    terminate_on_invalid_tool_call: bool
    duplicate_iou_threshold: float
    forced_final_prompt: str
    crop_dir: Path
    crop_format: str
    crop_jpeg_quality: int
    bounds: ResizeBounds


@dataclass
class TurnOutcome:
    done: bool
    reward: float = 0.0
    # The next user message's content parts (Responses input items), when the rollout goes on.
    content: list[dict[str, Any]] = field(default_factory=list)
    new_paths: list[str] = field(default_factory=list)


def is_malformed(text: str) -> bool:
    """Tool markup that is not a set of clean calls: a block that does not parse, stray tags, or a call
    written inside the reasoning (before `</think>`) next to markup after it."""
    visible = after_thinking(text)
    if not any(marker in text for marker in TOOL_MARKERS):
        return False
    blocks = TOOL_CALL_BLOCK.findall(visible)
    calls = calls_in_text(visible)
    functions = sum(1 for block in blocks if "<function=" in block)
    return (
        not calls
        or len(blocks) != len(calls)
        or visible.count("<tool_call>") != len(calls)
        or visible.count("<function=") != functions
        or visible.count("</function>") != functions
        or "<think>" in visible
    )


def image_of(data: bytes) -> Image.Image:
    with Image.open(io.BytesIO(data)) as opened:
        return opened.convert("RGB")


@dataclass
class Inspection:
    rules: InspectionRules
    dataset: str
    images: list[Image.Image] = field(default_factory=list)
    tool_call_count: int = 0
    tool_error_count: int = 0
    output_paths: list[str] = field(default_factory=list)
    seen_calls: set[str] = field(default_factory=set)
    seen_regions: dict[str, list[list[float]]] = field(default_factory=dict)
    final_answer_required: bool = False
    aux_reward: float = 0.0
    # The pictures each generation was shown by a tool: none for the first, then one list per user message.
    generation_image_paths: list[list[str]] = field(default_factory=lambda: [[]])

    def take_turn(self, text: str) -> TurnOutcome:
        """The outcome of one assistant text, with the shaping reward and the pictures accounted for: the
        reward so far is capped at `tool_success_reward_cap` on a turn that made pictures (NeMo Gym)."""
        outcome = self._decided(text)
        self.aux_reward += outcome.reward
        if not outcome.done:
            self.generation_image_paths.append(outcome.new_paths)
        if outcome.new_paths:
            self.aux_reward = min(self.aux_reward, self.rules.tool_success_reward_cap)
        return outcome

    def _decided(self, text: str) -> TurnOutcome:
        calls = calls_in_text(text)
        if is_malformed(text):
            return self._refused("Invalid image tool call format.")
        if not calls:
            return TurnOutcome(done=True)
        if self.final_answer_required:
            return self._refused("No more tool calls are allowed. A final answer was required.")
        if self.tool_call_count >= self.rules.max_tool_calls:
            self.final_answer_required = True
            return TurnOutcome(done=False, content=[_text(self.rules.forced_final_prompt)])
        if not self.images:
            return self._refused("Image tools are unavailable because no source images were provided.")
        allowed = min(self.rules.max_tool_calls_per_turn, self.rules.max_tool_calls - self.tool_call_count)
        return self._executed(calls[:allowed], skipped=len(calls) - allowed)

    def _executed(self, calls: list[ToolCall], skipped: int) -> TurnOutcome:
        """Run the calls in order; the first that fails refuses the whole turn, as NeMo Gym does."""
        seen_calls, seen_regions = set(self.seen_calls), {k: list(v) for k, v in self.seen_regions.items()}
        made: list[tuple[dict[str, Any], Image.Image]] = []
        reward, repeated = 0.0, False
        for call in calls:
            if call.name not in TOOLS:
                return self._refused(f"Unknown tool name: {call.name}")
            # The standard library writes any integer a model may send (orjson stops at 64 bits).
            signature = json.dumps(
                {"name": call.name, "arguments": call.arguments}, sort_keys=True, default=str
            )
            exact = signature in seen_calls
            seen_calls.add(signature)
            try:
                overlap = _region_overlap(call, seen_regions, self.rules.duplicate_iou_threshold)
                output = run_tool(call.name, call.arguments, [*self.images, *(image for _, image in made)],
                                  self.rules.bounds)  # fmt: skip
            except (ValueError, TypeError, ArithmeticError) as error:  # ToolError, or what Pillow refuses
                return self._refused(f"{call.name} failed: {error}")
            facts = {"ok": True, **output.facts, "new_img_indices": [len(self.images) + len(made)]}
            if exact:
                facts["warning"] = "You already made this exact tool call. Answer from the evidence you have."
            elif overlap is not None:
                facts["warning"] = (
                    f"This region overlaps an earlier {call.name} result (IoU={overlap:.2f}). "
                    "Answer from the evidence you have."
                )
            if "warning" in facts:
                reward += self.rules.duplicate_tool_call_penalty
                repeated = True
            else:
                reward += self.rules.tool_success_reward
            made.append((facts, output.image))
        return self._committed(made, seen_calls, seen_regions, reward, repeated, skipped)

    def _committed(
        self,
        made: list[tuple[dict[str, Any], Image.Image]],
        seen_calls: set[str],
        seen_regions: dict[str, list[list[float]]],
        reward: float,
        repeated: bool,
        skipped: int,
    ) -> TurnOutcome:
        """Keep a turn whose calls all ran: store and show their pictures, count them, note a repeat."""
        self.seen_calls, self.seen_regions = seen_calls, seen_regions
        content = [_text("<tool_response>\n")]
        paths = []
        for facts, image in made:
            data = encoded(image, self.rules.crop_format, self.rules.crop_jpeg_quality)
            stored = image_of(data)
            facts["size"] = list(stored.size)
            paths.append(self._saved(data))
            self.images.append(stored)
            mime = "png" if self.rules.crop_format == "png" else "jpeg"
            url = f"data:image/{mime};base64,{base64.b64encode(data).decode()}"
            content += [_text(orjson.dumps(facts).decode() + "\n"),
                        {"type": "input_image", "image_url": url, "detail": "auto"}, _text("\n")]  # fmt: skip
        if skipped > 0:
            content.append(_text(f"Only the first {len(made)} tool call(s) were executed this turn. "
                                 "Call tools one turn at a time.\n"))  # fmt: skip
        content.append(_text("</tool_response>"))
        self.tool_call_count += len(made)
        self.output_paths += paths
        self.final_answer_required = repeated and self.rules.force_final_after_duplicate
        return TurnOutcome(done=False, reward=reward, content=content, new_paths=paths)

    def _saved(self, data: bytes) -> str:
        dataset = UNSAFE_IN_FOLDER_NAME.sub("_", self.dataset).strip(".") or "unknown"
        folder = self.rules.crop_dir / dataset / uuid.uuid4().hex
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"{uuid.uuid4().hex}.{'png' if self.rules.crop_format == 'png' else 'jpg'}"
        path.write_bytes(data)
        return str(path.resolve())

    def _refused(self, message: str) -> TurnOutcome:
        self.tool_error_count += 1
        content = [_text(f"<tool_response>\n{message}\n</tool_response>")]
        return TurnOutcome(
            done=self.rules.terminate_on_invalid_tool_call,
            reward=self.rules.invalid_tool_call_penalty,
            content=content,
        )


def _region_overlap(call: ToolCall, seen: dict[str, list[list[float]]], threshold: float) -> float | None:
    """For zoom and crop: the overlap with an earlier region of the same tool and image reaching
    `threshold`, else None; the region is remembered either way."""
    if call.name not in REGION_TOOLS:
        return None
    box = as_box(call.arguments.get("bbox_2d"))
    if box is None:
        raise ToolError("bbox_2d must be a list of four numbers")
    try:
        key = f"{call.name}:{int(call.arguments.get('img_idx', 0))}"
    except (TypeError, ValueError):
        raise ToolError("img_idx must be an integer") from None
    earlier = seen.setdefault(key, [])
    overlap = next((iou for iou in (box_overlap(old, box) for old in earlier) if iou >= threshold), None)
    earlier.append(box)
    return overlap


def _text(text: str) -> dict[str, Any]:
    return {"type": "input_text", "text": text}
