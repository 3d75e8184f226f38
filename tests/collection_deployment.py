"""Task rows the rollout-collection tests send, and the deadline of their deployment (its fixture is in
tests/core/collection/conftest.py)."""

from __future__ import annotations

DEADLINE_S = 5.0


def task(text: str, **extra) -> dict:
    return {"responses_create_params": {"input": [{"role": "user", "content": text}]}, **extra}


def ticket_rows(count: int) -> list[dict]:
    return [task(f"weather please, ticket T{number:03d}") for number in range(count)]
