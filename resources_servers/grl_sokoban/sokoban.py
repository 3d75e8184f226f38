"""Sokoban rules, free of any server: levels in the usual text notation, moves, pushes and the goal test.

Notation: `#` wall, ` ` floor, `.` goal, `$` box, `*` box on a goal, `@` player, `+` player on a goal.
Squares outside the drawn rows count as walls.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

MAX_SIDE = 20
MOVES = {"up": (-1, 0), "down": (1, 0), "left": (0, -1), "right": (0, 1)}
SYMBOLS = frozenset("# .$*@+")
# `[^<]*` cannot run past the next tag, so the search stays linear however the text is built.
ACTION_TAG = re.compile(r"<action>([^<]*)</action>", re.IGNORECASE)
SEPARATORS = re.compile(r"[\s,;|]+")

Square = tuple[int, int]


@dataclass
class Board:
    rows: int
    columns: int
    walls: frozenset[Square]
    goals: frozenset[Square]
    boxes: set[Square]
    player: Square

    @classmethod
    def parse(cls, level: list[str]) -> Board:
        """The level's board; ValueError saying what is wrong with a level that cannot be played."""
        if not level or len(level) > MAX_SIDE or max(map(len, level)) > MAX_SIDE:
            raise ValueError(f"a level has 1 to {MAX_SIDE} rows of at most {MAX_SIDE} squares")
        squares = {(r, c): symbol for r, line in enumerate(level) for c, symbol in enumerate(line)}
        unknown = set(squares.values()) - SYMBOLS
        if unknown:
            raise ValueError(f"unknown symbols {sorted(unknown)}; use {''.join(sorted(SYMBOLS))!r}")
        players = [square for square, symbol in squares.items() if symbol in "@+"]
        goals = frozenset(square for square, symbol in squares.items() if symbol in ".*+")
        boxes = {square for square, symbol in squares.items() if symbol in "$*"}
        if len(players) != 1:
            raise ValueError(f"a level has exactly one player (@ or +), this one has {len(players)}")
        if not boxes or len(boxes) != len(goals):
            raise ValueError(
                f"a level has as many goals as boxes, at least one: {len(goals)} and {len(boxes)}"
            )
        walls = frozenset(square for square, symbol in squares.items() if symbol == "#")
        return cls(len(level), max(map(len, level)), walls, goals, boxes, players[0])

    def free(self, square: Square) -> bool:
        row, column = square
        inside = 0 <= row < self.rows and 0 <= column < self.columns
        return inside and square not in self.walls and square not in self.boxes

    def move(self, direction: str) -> str:
        """Walk or push one box one square; answer "moved", "pushed" or "blocked" (nothing changes)."""
        d_row, d_column = MOVES[direction]
        ahead = (self.player[0] + d_row, self.player[1] + d_column)
        if ahead in self.boxes:
            beyond = (ahead[0] + d_row, ahead[1] + d_column)
            if not self.free(beyond):
                return "blocked"
            self.boxes.remove(ahead)
            self.boxes.add(beyond)
            self.player = ahead
            return "pushed"
        if not self.free(ahead):
            return "blocked"
        self.player = ahead
        return "moved"

    def solved(self) -> bool:
        return self.boxes == self.goals

    def render(self) -> list[str]:
        return [
            "".join(self._symbol((row, column)) for column in range(self.columns)).rstrip()
            for row in range(self.rows)
        ]

    def _symbol(self, square: Square) -> str:
        if square in self.walls:
            return "#"
        goal = square in self.goals
        if square == self.player:
            return "+" if goal else "@"
        if square in self.boxes:
            return "*" if goal else "$"
        return "." if goal else " "


def parse_moves(text: str, limit: int) -> tuple[list[str], str | None]:
    """The moves of the reply's last `<action>` tag (separated by spaces, commas, semicolons or bars, any
    case), and what was wrong with it: no tag, an unknown word (it and everything after it are dropped), or
    more than `limit` moves (the rest are dropped)."""
    tags = ACTION_TAG.findall(text)
    if not tags:
        return [], "no <action>...</action> tag found"
    moves: list[str] = []
    for word in filter(None, SEPARATORS.split(tags[-1].lower())):
        if word not in MOVES:
            return moves, f"unknown move {word[:20]!r}: use up, down, left or right"
        if len(moves) == limit:
            return moves, f"only the first {limit} moves of a turn are played"
        moves.append(word)
    return moves, None if moves else "the <action> tag holds no move"
