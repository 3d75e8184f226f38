"""A Verifiers environment defined here, so verifiers_agent runs offline: count a letter in a word.

The model gets a `count_letter` tool (run by Verifiers itself, inside the agent) and answers with the number
alone; the rubric pays 1.0 when that number is the true count. `load_environment` is what
`vf.load_environment("responses_api_agents.verifiers_agent.letter_count_env")` calls.
"""

from __future__ import annotations

import verifiers as vf
from datasets import Dataset

SYSTEM_PROMPT = (
    "Count how many times a letter occurs in a word. You may call the count_letter tool. "
    "Reply with the number alone."
)
# (word, letter) pairs; the answer is always computed, never typed in.
TASKS = (
    ("strawberry", "r"),
    ("mississippi", "s"),
    ("banana", "a"),
    ("bookkeeper", "e"),
    ("onomatopoeia", "o"),
)


def count_letter(word: str, letter: str) -> int:
    """Count the occurrences of a letter in a word, ignoring case.

    Args:
        word: The word to look in.
        letter: The single letter to count.
    """
    return word.lower().count(letter.lower())


def question(word: str, letter: str) -> str:
    return f"How many times does the letter '{letter}' occur in the word '{word}'?"


def correct_count(parser: vf.Parser, completion: vf.Messages, answer: str) -> float:
    """1.0 when the last reply is exactly the right number (surrounding spaces and a final period aside)."""
    reply = (parser.parse_answer(completion) or "").strip().rstrip(".")
    return 1.0 if reply == answer else 0.0


def dataset() -> Dataset:
    return Dataset.from_list(
        [
            {"question": question(word, letter), "answer": str(count_letter(word, letter))}
            for word, letter in TASKS
        ]
    )


def load_environment(max_turns: int = 4) -> vf.Environment:
    return vf.ToolEnv(
        dataset=dataset(),
        tools=[count_letter],
        max_turns=max_turns,
        system_prompt=SYSTEM_PROMPT,
        rubric=vf.Rubric(funcs=[correct_count]),
    )
