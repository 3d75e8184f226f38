"""Writes data/example.jsonl: five number-guessing episodes made for this folder, as OpenEnv adapter rows.

Each row is NeMo Gym's openenv row (`responses_create_params` with the one `step` tool) plus
`reset_kwargs`, the secret and range this episode's reset() gets.
"""

import json
from pathlib import Path

# (target, low, high, max_guesses)
EPISODES = [(37, 1, 100, 7), (13, 1, 20, 5), (8, 1, 50, 6), (3, 1, 10, 2), (71, 1, 100, 7)]

STEP_TOOL = {
    "type": "function",
    "name": "step",
    "description": "Make one guess. The answer says whether the secret number is higher, lower, or the guess is correct.",
    "parameters": {
        "type": "object",
        "properties": {"guess": {"type": "integer", "description": "Your guess, an integer in the range."}},
        "required": ["guess"],
        "additionalProperties": False,
    },
    "strict": True,
}


def row(index: int, target: int, low: int, high: int, max_guesses: int) -> dict:
    system = (
        "You are playing a number-guessing game through the step tool. Call it with one integer guess at a "
        "time and use the hints to narrow the range. Stop once a guess is correct or no guesses are left."
    )
    user = (
        f"Round {index + 1}: find my secret integer between {low} and {high}; you have {max_guesses} guesses."
    )
    return {
        "responses_create_params": {
            "input": [{"role": "developer", "content": system}, {"role": "user", "content": user}],
            "tools": [STEP_TOOL],
        },
        "task_idx": index,
        "reset_kwargs": {"target": target, "low": low, "high": high, "max_guesses": max_guesses},
    }


if __name__ == "__main__":
    out = Path(__file__).with_name("example.jsonl")
    out.write_text("".join(json.dumps(row(i, *e)) + "\n" for i, e in enumerate(EPISODES)))
