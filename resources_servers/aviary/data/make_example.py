"""Writes data/example.jsonl: five GSM8K-style word problems made for this folder, as Aviary rows."""

import json
from pathlib import Path

PROBLEMS = [
    (
        "gsm-local-1",
        "A baker makes 14 trays of 12 muffins and sells 97 muffins. How many muffins are left?",
        71,
    ),
    (
        "gsm-local-2",
        "Tickets cost $8 for adults and $5 for children. A group of 3 adults and 4 children pays how many dollars?",
        44,
    ),
    (
        "gsm-local-3",
        "A cyclist rides 18 km each weekday and 35 km on Saturday. How many km does she ride in 3 weeks?",
        375,
    ),
    (
        "gsm-local-4",
        "A tank holds 640 liters. It is one quarter full and 90 liters are added. How many liters are in it now?",
        250,
    ),
    (
        "gsm-local-5",
        "Sam has 3 boxes of 48 pencils. He gives 25 pencils to each of 4 classes. How many pencils does he keep?",
        44,
    ),
]
TOOLS = [
    {
        "type": "function",
        "name": "calculator",
        "description": "Evaluate an arithmetic expression and return its value.",
        "parameters": {
            "type": "object",
            "properties": {
                "expr": {
                    "type": "string",
                    "description": "An arithmetic expression, e.g. '(3 + 4) * 12 / 5'.",
                }
            },
            "required": ["expr"],
            "additionalProperties": False,
        },
        "strict": True,
    },
    {
        "type": "function",
        "name": "submit_answer",
        "description": "Submit the final numeric answer to the problem; this ends the episode.",
        "parameters": {
            "type": "object",
            "properties": {"answer": {"type": "string", "description": "The final answer, a number."}},
            "required": ["answer"],
            "additionalProperties": False,
        },
        "strict": True,
    },
]
SYSTEM = (
    "Solve the math word problem. Use the calculator tool for arithmetic, then call submit_answer "
    "once with the final number only."
)


def main() -> None:
    out = Path(__file__).with_name("example.jsonl")
    with out.open("w") as handle:
        for index, (problem_id, problem, answer) in enumerate(PROBLEMS):
            row = {
                "responses_create_params": {
                    "input": [{"role": "developer", "content": SYSTEM}, {"role": "user", "content": problem}],
                    "tools": TOOLS,
                },
                "task_idx": index,
                "env_kwargs": {"problem_id": problem_id, "problem": problem, "answer": answer},
            }
            handle.write(json.dumps(row) + "\n")


if __name__ == "__main__":
    main()
