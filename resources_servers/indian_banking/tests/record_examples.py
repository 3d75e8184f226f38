"""Records data/example_rollouts.jsonl: each example task run for real (`gym eval run`, openai_model) against
the scripted upstream (tests/scripted_upstream.py) playing both the policy and the simulated customer from
`dialogues.py`, one task per run so the queue of scripted turns stays in order.

The agent keeps the customer's model calls in each rollout's `user_model_calls`, which replay_model plays
besides the trajectory: the folder then replays offline, customer turns included.

Run from the repository root: `python resources_servers/indian_banking/tests/record_examples.py`.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import urllib.request
from pathlib import Path

import orjson

from resources_servers.indian_banking.tests.dialogues import DIALOGUES

ROOT = Path(__file__).resolve().parents[3]
FOLDER = ROOT / "resources_servers" / "indian_banking"
POLICY_PROMPT_START = "<instructions>"  # the rows' system prompt; the customer's is the agent's own


def call(base: str, method: str, path: str, body: object = None) -> object:
    data = None if body is None else orjson.dumps(body)
    request = urllib.request.Request(
        base + path, data=data, method=method, headers={"content-type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=30) as answer:
        return orjson.loads(answer.read() or b"null")


def is_user_call(body: dict) -> bool:
    first = body["input"][0]
    return first.get("role") == "system" and not str(first.get("content", "")).startswith(POLICY_PROMPT_START)


def record_task(base: str, row: dict, workdir: Path) -> dict:
    model = f"ib-{row['task_id']}"
    turns = DIALOGUES[row["task_id"]]
    call(base, "POST", f"/_script/{model}", {"steps": [{"output": turn["output"]} for turn in turns]})
    tasks, output = workdir / f"{model}.jsonl", workdir / f"{model}_rollouts.jsonl"
    tasks.write_bytes(orjson.dumps(row) + b"\n")
    subprocess.run(
        [str(Path(sys.executable).with_name("gym")), "eval", "run", "--resources-server", "indian_banking",
         "--model-type", "openai_model", "--model-url", f"{base}/v1", "--model", model, "--model-api-key", "dummy",
         "-i", str(tasks), "-o", str(output), "--concurrency", "1"],
        check=True, cwd=ROOT,
    )  # fmt: skip
    (rollout,) = [orjson.loads(line) for line in output.read_bytes().splitlines() if line.strip()]
    requests = [entry["body"] for entry in call(base, "GET", f"/_requests/{model}")]
    assert len(requests) == len(turns), (
        f"{model}: {len(requests)} model calls for {len(turns)} scripted turns"
    )
    for body, turn in zip(requests, turns, strict=True):
        assert is_user_call(body) == (turn["who"] == "user"), f"{model}: turns out of order"
    customer_turns = sum(turn["who"] == "user" for turn in turns)
    assert len(rollout["user_model_calls"]) == customer_turns, f"{model}: customer calls not all kept"
    return rollout


def main() -> None:
    upstream = subprocess.Popen(
        [sys.executable, "tests/scripted_upstream.py"], cwd=ROOT, stdout=subprocess.PIPE, text=True
    )
    try:
        address = json.loads(upstream.stdout.readline())
        base = f"http://{address['host']}:{address['port']}"
        rows = [orjson.loads(line) for line in (FOLDER / "data" / "example.jsonl").read_bytes().splitlines()]
        with tempfile.TemporaryDirectory() as workdir:
            rollouts = [record_task(base, row, Path(workdir)) for row in rows]
        (FOLDER / "data" / "example_rollouts.jsonl").write_bytes(
            b"".join(orjson.dumps(r) + b"\n" for r in rollouts)
        )
        print("rewards:", [r["reward"] for r in rollouts])
    finally:
        upstream.terminate()
        upstream.wait(timeout=10)


if __name__ == "__main__":
    main()
