"""Writes data/example.jsonl: one Gym row per task of the local letter_count environment, its prompt as the
environment formats it (system prompt included), so a row replays exactly what Verifiers would send.

    python -m responses_api_agents.verifiers_agent.data.make_example
"""

from pathlib import Path

import orjson
import verifiers as vf

from nemo_gym.config.jsonl import write_atomically

ENV_ID = "responses_api_agents.verifiers_agent.letter_count_env"
OUT = Path(__file__).resolve().parent / "example.jsonl"


def rows() -> list[dict]:
    dataset = vf.load_environment(ENV_ID).get_dataset()
    return [
        {
            "responses_create_params": {"input": task["prompt"]},
            "vf_env_id": ENV_ID,
            "task_idx": index,
            "answer": task["answer"],
            "task": "letter_count",
            "example_id": task["example_id"],
            "info": {},
        }
        for index, task in enumerate(dataset)
    ]


if __name__ == "__main__":
    write_atomically(OUT, (orjson.dumps(row) + b"\n" for row in rows()))
