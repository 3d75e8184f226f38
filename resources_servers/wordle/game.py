"""Wordle rules, free of any server: the word list, colour feedback, what a guess reveals, and the reward.

The dictionary is the `english-words` package's web2 + GCIDE lists (shipped inside the package, nothing is
fetched), with the regular inflections those lists leave out: a listed word plus `s`, `es` or `ed`, or a listed word
ending in `e` plus `d`, also counts (cards, boxes, owned, robed).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cache

from english_words import get_english_words_set

GREEN, YELLOW, GRAY = "G", "Y", "_"
WIN_BASE = 2.0
WIN_STEP = 0.2
# A first-guess win is luck, not play: it scores like a third-guess win.
LUCKY_TURNS = 3
WIN_FLOOR = 0.1
PENALTY_REPEAT = -0.2
PENALTY_GREEN_DROPPED = -0.05
PENALTY_YELLOWS_IGNORED = -0.03
PENALTY_ELIMINATED_LETTER = -0.02
PENALTY_INVALID = -0.02


@cache
def dictionary() -> frozenset[str]:
    """Every lowercase alphabetic word of the package's lists (read once; about 0.3 s)."""
    return frozenset(get_english_words_set(["web2", "gcide"], lower=True, alpha=True))


def is_word(word: str) -> bool:
    words = dictionary()
    return (
        word in words
        or (word.endswith("s") and word[:-1] in words)
        or (word.endswith(("es", "ed")) and word[:-2] in words)
        or (word.endswith("ed") and word[:-1] in words)
    )


def check_word(word: str, length: int) -> str | None:
    """Why `word` is not a playable guess of `length` letters, or None when it is."""
    if len(word) != length:
        return f"a guess has {length} letters, {word!r} has {len(word)}"
    if not word.isascii() or not word.isalpha():
        return f"{word!r} is not made of letters a-z only"
    if not is_word(word):
        return f"{word!r} is not in the word list"
    return None


def feedback(guess: str, target: str) -> str:
    """G for a letter in place, Y for a letter elsewhere in the target, _ otherwise; a target letter is
    matched at most once, greens first (so a doubled letter is yellow only as often as the target has it)."""
    marks = [GRAY] * len(guess)
    unmatched: dict[str, int] = {}
    for index, (letter, wanted) in enumerate(zip(guess, target, strict=True)):
        if letter == wanted:
            marks[index] = GREEN
        else:
            unmatched[wanted] = unmatched.get(wanted, 0) + 1
    for index, letter in enumerate(guess):
        if marks[index] == GRAY and unmatched.get(letter, 0) > 0:
            marks[index] = YELLOW
            unmatched[letter] -= 1
    return "".join(marks)


def win_reward(turns: int) -> float:
    return WIN_BASE - WIN_STEP * ((LUCKY_TURNS if turns == 1 else turns) - 1)


@dataclass
class Game:
    target: str
    max_turns: int
    turns: int = 0
    guesses: list[str] = field(default_factory=list)
    marks: list[str] = field(default_factory=list)
    greens: dict[int, str] = field(default_factory=dict)
    yellows: set[str] = field(default_factory=set)
    eliminated: set[str] = field(default_factory=set)
    penalties: dict[str, float] = field(default_factory=dict)
    won: bool = False

    @property
    def over(self) -> bool:
        return self.won or self.turns >= self.max_turns

    @property
    def outcome(self) -> str:
        return "win" if self.won else "loss" if self.over else "incomplete"

    def reward(self) -> float:
        """A win's turn-scaled reward less the penalties, at least WIN_FLOOR; anything else 0."""
        if not self.won:
            return 0.0
        return round(max(win_reward(self.turns) + sum(self.penalties.values()), WIN_FLOOR), 6)

    def guess(self, word: str) -> dict[str, object]:
        """Play one guess (valid or not, it uses a turn) and answer what the submit_guess tool reports."""
        word = word.strip().lower()
        self.turns += 1
        problem = check_word(word, len(self.target))
        if problem is not None:
            self._penalise("invalid_guess", PENALTY_INVALID)
            return {"valid": False, "error": problem, **self._progress()}
        if word != self.target:
            self._judge_play(word)
        marks = feedback(word, self.target)
        self._learn(word, marks)
        self.won = word == self.target
        return {"valid": True, "feedback": marks, **self._progress()}

    def state(self) -> dict[str, object]:
        """What get_game_state reports: the history and the knowledge gathered, never the target."""
        return {
            "guesses": [word.upper() for word in self.guesses],
            "feedback": list(self.marks),
            "known_greens": {str(index + 1): letter.upper() for index, letter in sorted(self.greens.items())},
            "known_yellows": sorted(letter.upper() for letter in self.yellows),
            "eliminated_letters": sorted(letter.upper() for letter in self.eliminated),
            **self._progress(),
        }

    def _progress(self) -> dict[str, object]:
        progress: dict[str, object] = {
            "turn": self.turns,
            "turns_remaining": self.max_turns - self.turns,
            "won": self.won,
            "game_over": self.over,
        }
        if self.over:
            progress["target_word"] = self.target.upper()
        return progress

    def _judge_play(self, word: str) -> None:
        """Penalise a wrong guess that throws away what earlier feedback showed."""
        if word in self.guesses:
            self._penalise("repeated_guess", PENALTY_REPEAT)
        for index, letter in self.greens.items():
            if word[index] != letter:
                self._penalise("green_dropped", PENALTY_GREEN_DROPPED)
        if self.yellows and not self.yellows & set(word):
            self._penalise("yellows_ignored", PENALTY_YELLOWS_IGNORED)
        for letter in word:
            if letter in self.eliminated:
                self._penalise("eliminated_letter", PENALTY_ELIMINATED_LETTER)

    def _learn(self, word: str, marks: str) -> None:
        self.guesses.append(word)
        self.marks.append(marks)
        for index, (letter, mark) in enumerate(zip(word, marks, strict=True)):
            if mark == GREEN:
                self.greens[index] = letter
            elif mark == YELLOW:
                self.yellows.add(letter)
        present = set(self.greens.values()) | self.yellows
        self.eliminated |= {
            letter for letter, mark in zip(word, marks, strict=True) if mark == GRAY
        } - present

    def _penalise(self, kind: str, amount: float) -> None:
        self.penalties[kind] = round(self.penalties.get(kind, 0.0) + amount, 6)
