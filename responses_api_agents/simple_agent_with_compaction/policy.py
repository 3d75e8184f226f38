"""Which parts of the conversation a model call is shown: the history policies and their views.

The conversation itself only grows; a policy picks, before a call, what of it the request holds. `identity`
shows everything. `recency` leaves out the reasoning of older model calls and the images of older items,
an omitted run of images replaced by one marker text. A view is a list of pieces (an item, whole or with
some content parts left out); its descriptor names the pieces, so a view that only appends to the last
one is recognised by a prefix test rather than by comparing the items.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from responses_api_agents.simple_agent_with_compaction.config import (
    HistoryPolicyConfig,
    RecencyHistoryPolicyConfig,
)

IMAGE_PART_TYPES = frozenset({"input_image", "image_url", "image"})
KEEP, MARK = "keep", "mark"


@dataclass(frozen=True)
class Origin:
    """Where an item of the conversation came from: the model call that made it or followed it (0: the
    task's input), and whether the model wrote it or it is an observation (input, tool output)."""

    turn: int
    by_model: bool

    @property
    def initial(self) -> bool:
        return self.turn == 0


@dataclass(frozen=True)
class Piece:
    """One item of a view: whole (`parts` None), or its content parts as (KEEP | MARK, part index)."""

    index: int
    parts: tuple[tuple[str, int], ...] | None = None

    @property
    def name(self) -> str:
        if self.parts is None:
            return str(self.index)
        return f"{self.index}:" + ",".join(f"{kind[0]}{part}" for kind, part in self.parts)


@dataclass(frozen=True)
class PolicyOutcome:
    """A view and what it left out of the items it covers."""

    pieces: tuple[Piece, ...]
    omitted_reasoning_items: int = 0
    omitted_images: int = 0

    @property
    def descriptor(self) -> tuple[str, ...]:
        return tuple(piece.name for piece in self.pieces)


def image_parts(item: dict[str, Any]) -> list[int]:
    content = item.get("content")
    if not isinstance(content, list):
        return []
    return [
        index
        for index, part in enumerate(content)
        if isinstance(part, dict) and part.get("type") in IMAGE_PART_TYPES
    ]


def whole(indices: Iterable[int]) -> tuple[Piece, ...]:
    return tuple(Piece(index) for index in indices)


def plan(
    config: HistoryPolicyConfig,
    items: list[dict[str, Any]],
    origins: list[Origin],
    decision_turn: int,
) -> PolicyOutcome:
    """The view of `items` (with their `origins`) for model call `decision_turn` (1-based)."""
    if config.type == "identity":
        return PolicyOutcome(whole(range(len(items))))
    assert isinstance(config.config, RecencyHistoryPolicyConfig)
    return _recency(config.config, items, origins, decision_turn)


def _recency(
    config: RecencyHistoryPolicyConfig,
    items: list[dict[str, Any]],
    origins: list[Origin],
    decision_turn: int,
) -> PolicyOutcome:
    dropped_reasoning = _old_reasoning(config, items, origins)
    omitted_groups = _old_image_groups(config, items, origins, decision_turn)
    marked = _first_of_each_run(sorted(omitted_groups), items) if config.images.omission_marker else set()
    pieces: list[Piece] = []
    for index in range(len(items)):
        if index in dropped_reasoning:
            continue
        if index not in omitted_groups:
            pieces.append(Piece(index))
            continue
        images = image_parts(items[index])
        content = items[index]["content"]
        parts: list[tuple[str, int]] = []
        for part in range(len(content)):
            if part not in images:
                parts.append((KEEP, part))
            elif index in marked and part == images[0]:
                parts.append((MARK, part))
        if parts:
            pieces.append(Piece(index, tuple(parts)))
    return PolicyOutcome(
        tuple(pieces),
        omitted_reasoning_items=len(dropped_reasoning),
        omitted_images=sum(len(image_parts(items[index])) for index in omitted_groups),
    )


def _old_reasoning(
    config: RecencyHistoryPolicyConfig, items: list[dict[str, Any]], origins: list[Origin]
) -> set[int]:
    """The reasoning items of model calls outside the kept blocks (one block per call)."""
    if not config.reasoning.enabled:
        return set()
    blocks: dict[int, list[int]] = {}
    for index, (item, origin) in enumerate(zip(items, origins, strict=True)):
        if origin.by_model and item.get("type") == "reasoning":
            blocks.setdefault(origin.turn, []).append(index)
    turns = list(blocks)
    kept = set(turns[:1]) if config.reasoning.keep_first_block else set()
    candidates = [turn for turn in turns if turn not in kept]
    kept |= set(candidates[-config.reasoning.keep_last_blocks :] if config.reasoning.keep_last_blocks else [])
    return {index for turn in turns if turn not in kept for index in blocks[turn]}


def _old_image_groups(
    config: RecencyHistoryPolicyConfig,
    items: list[dict[str, Any]],
    origins: list[Origin],
    decision_turn: int,
) -> set[int]:
    """The items whose images are left out: neither protected (the task's input), nor among the last
    `keep_last_groups`, nor the observations the coming call answers (those are always shown)."""
    if not config.images.enabled:
        return set()
    groups = [index for index, item in enumerate(items) if image_parts(item)]
    protected = {
        index for index in groups if config.images.protect_initial_context and origins[index].initial
    }
    pending = {
        index for index in groups if not origins[index].by_model and origins[index].turn == decision_turn - 1
    }
    candidates = [index for index in groups if index not in protected]
    keep = config.images.keep_last_groups
    recent = set(candidates[-keep:] if keep else [])
    return set(groups) - protected - recent - pending


def _first_of_each_run(omitted: list[int], items: list[dict[str, Any]]) -> set[int]:
    """The first item of each run of omitted image items that no shown image item interrupts."""
    shown_images = [index for index, item in enumerate(items) if image_parts(item) and index not in omitted]
    firsts: set[int] = set()
    previous: int | None = None
    for index in omitted:
        if previous is None or any(previous < shown < index for shown in shown_images):
            firsts.add(index)
        previous = index
    return firsts


def materialize(
    pieces: Iterable[Piece], items: list[dict[str, Any]], marker: str | None
) -> list[dict[str, Any]]:
    """The request's input items for a view: copies, the left-out parts gone, a marker text in place."""
    shown = []
    for piece in pieces:
        item = items[piece.index]
        if piece.parts is None:
            shown.append(item)
            continue
        content = [
            item["content"][part] if kind == KEEP else {"type": "input_text", "text": marker or ""}
            for kind, part in piece.parts
        ]
        shown.append({**item, "content": content})
    return shown
