"""A small Tetris in the GRL style, free of any server: pieces of one to four cells on a narrow board.

Coordinates are (x, y) with x the column (0 at the left) and y the row (0 at the top). A piece is an
anchor plus cell offsets; cells above the board (y < 0) are allowed while it falls. Three moves exist:
left, right and down; a move that would collide does nothing. After every move, a piece that cannot go
down any further locks: full rows are cleared, and a locked cell in the top row (or above it) ends the
game. Every move costs 0.1; every cleared row earns 10, and clearing one ends the game as a success.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass, field

Cell = tuple[int, int]

MOVES = {"left": (-1, 0), "right": (1, 0), "down": (0, 1)}
# NeMo Gym's numbering of the moves, also accepted in tags.
MOVE_NUMBERS = {"0": "left", "1": "right", "2": "down"}
STEP_COST = 0.1
LINE_REWARD = 10.0
EMPTY, LOCKED, FALLING = "_", "#", "X"

SINGLE = ((0, 0),)
TALL = ((0, 0), (0, -1))
WIDE = ((0, 0), (-1, 0))
SQUARE = ((0, 0), (-1, 0), (0, -1), (-1, -1))
# Piece sets by `box_type`, as in GRL: 2 is the two dominoes, 3 adds the square, anything else is single cells.
PIECE_SETS = {2: (TALL, WIDE), 3: (TALL, WIDE, SQUARE)}

# `[^<]*` cannot run past the next tag, so finding every tag stays linear in the reply's length.
ACTION_TAG = re.compile(r"<action>([^<]*)</action>", re.IGNORECASE)


def pieces_of(box_type: int) -> tuple[tuple[Cell, ...], ...]:
    return PIECE_SETS.get(box_type, (SINGLE,))


@dataclass
class Tetris:
    width: int
    height: int
    queue: list[tuple[tuple[Cell, ...], Cell]]
    locked: set[Cell] = field(default_factory=set)
    shape: tuple[Cell, ...] = SINGLE
    anchor: Cell = (0, 0)
    lines: int = 0
    moves: int = 0
    over: bool = False

    @classmethod
    def new(cls, width: int, height: int, box_type: int, seed: int) -> Tetris:
        """A game whose pieces (shape and column) follow from `seed` alone, so every rollout of a row
        sees the same sequence. Shapes are drawn with weights that favour the ones seen least."""
        rng = random.Random(seed)
        shapes = pieces_of(box_type)
        seen = [0] * len(shapes)
        queue = []
        for _ in range(width * height + 1):
            weights = [5 + max(seen) - count for count in seen]
            index = rng.choices(range(len(shapes)), weights)[0]
            seen[index] += 1
            shape = shapes[index]
            leftmost = -min(dx for dx, _ in shape)
            queue.append((shape, (rng.randint(leftmost, width - 1), 0)))
        game = cls(width, height, queue)
        game._spawn()
        return game

    @property
    def success(self) -> bool:
        return self.lines > 0

    def cells(self, anchor: Cell | None = None) -> list[Cell]:
        x, y = anchor or self.anchor
        return [(x + dx, y + dy) for dx, dy in self.shape]

    def fits(self, anchor: Cell) -> bool:
        return all(
            0 <= x < self.width and y < self.height and (x, y) not in self.locked
            for x, y in self.cells(anchor)
        )

    def move(self, name: str) -> tuple[float, str]:
        """Play one move; answer its reward and what happened (moved, blocked, locked, cleared, topped out)."""
        dx, dy = MOVES[name]
        target = (self.anchor[0] + dx, self.anchor[1] + dy)
        outcome = "blocked"
        if self.fits(target):
            self.anchor, outcome = target, "moved"
        self.moves += 1
        reward = -STEP_COST
        if not self.fits((self.anchor[0], self.anchor[1] + 1)):
            cleared = self._lock()
            reward += LINE_REWARD * cleared
            outcome = f"{outcome}, cleared {cleared} row(s)" if cleared else f"{outcome}, locked"
            if self.over and not cleared:
                outcome += ", topped out"
        return round(reward, 6), outcome

    def render(self) -> list[str]:
        falling = set() if self.over else set(self.cells())
        return [
            "".join(
                FALLING if (x, y) in falling else LOCKED if (x, y) in self.locked else EMPTY
                for x in range(self.width)
            )
            for y in range(self.height)
        ]

    def _lock(self) -> int:
        piece = self.cells()
        self.locked.update(piece)
        full = [y for y in range(self.height) if all((x, y) in self.locked for x in range(self.width))]
        for row in full:
            self.locked = {(x, y + 1) if y < row else (x, y) for x, y in self.locked if y != row}
        self.lines += len(full)
        if full or any(y <= 0 for _, y in self.locked):
            self.over = True
        else:
            self._spawn()
        return len(full)

    def _spawn(self) -> None:
        if not self.queue:
            self.over = True
            return
        self.shape, self.anchor = self.queue.pop(0)
        if not self.fits(self.anchor):
            self.over = True


def parse_actions(text: str, limit: int) -> tuple[list[str], str | None]:
    """The moves of every `<action>` tag, in order (`left`/`right`/`down` in any case, or 0/1/2), and a
    note when some were dropped: an unknown move is skipped, moves past `limit` are not played."""
    moves, problems = [], []
    for match in ACTION_TAG.finditer(text):
        word = match.group(1).strip().lower()
        word = MOVE_NUMBERS.get(word, word)
        if word in MOVES:
            moves.append(word)
        else:
            problems.append(f"unknown move {match.group(1).strip()[:20]!r} skipped")
    if not moves and not problems:
        problems.append("no <action>...</action> tag found")
    if len(moves) > limit:
        problems.append(f"only the first {limit} moves are played")
        moves = moves[:limit]
    return moves, "; ".join(problems) or None
