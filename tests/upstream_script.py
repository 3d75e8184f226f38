"""Test-side client of tests/scripted_upstream.py: script its answers and read what it received.

Typical use, with the session fixture `scripted_upstream` of tests/shared_fixtures.py:

    model = fresh_model()
    scripted_upstream.script(model, [
        {"output": [function_call("get_weather", {"city": "Paris"})]},
        {"output": [assistant_message("It is sunny.")]},
    ])
    ... point a model server at scripted_upstream.base_url with model name `model` ...
    assert scripted_upstream.requests(model)[0]["headers"]["Authorization"] == "Bearer sk-..."

The step format is documented in tests/scripted_upstream.py. The methods are synchronous (urllib), which
is fine inside async tests because the upstream is another process.
"""

from __future__ import annotations

import urllib.error
import urllib.parse
import urllib.request
import uuid
from dataclasses import dataclass, field
from typing import Any, Literal, TypedDict

import orjson

CONTROL_TIMEOUT_S = 10.0
# No proxies: the upstream is on 127.0.0.1, and an HTTP_PROXY in the environment must not reroute it.
_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))


class Step(TypedDict, total=False):
    """One scripted answer. At most one of the action keys (response ... malformed) per step."""

    response: dict[str, Any]
    output: list[dict[str, Any]]
    message: dict[str, Any]
    status: int
    hang: Literal[True]
    disconnect: Literal[True]
    malformed: Literal[True]
    body: Any
    retry_after: float
    usage: dict[str, Any]
    incomplete_details: dict[str, Any]
    finish_reason: str
    repeat: int
    delay_s: float
    gate: str


class RecordedRequest(TypedDict):
    path: str
    headers: dict[str, str]
    body: Any
    received_at: float


class ScriptedUpstreamError(RuntimeError):
    """The control API refused a call (for example a step with an unknown key)."""


def fresh_model(prefix: str = "scripted") -> str:
    """A model name no other test uses, so scripts and request logs stay private to one test."""
    return f"{prefix}-{uuid.uuid4().hex}"


def function_call(name: str, arguments: dict[str, Any], call_id: str | None = None) -> dict[str, Any]:
    """A Responses `function_call` output item; `arguments` is sent as JSON text, as models produce it."""
    suffix = uuid.uuid4().hex[:12]
    return {
        "type": "function_call",
        "id": f"fc_{suffix}",
        "call_id": call_id or f"call_{suffix}",
        "name": name,
        "arguments": orjson.dumps(arguments).decode(),
        "status": "completed",
    }


def assistant_message(text: str) -> dict[str, Any]:
    """A Responses assistant output message with one `output_text` part."""
    return {
        "type": "message",
        "id": f"msg_{uuid.uuid4().hex[:12]}",
        "role": "assistant",
        "status": "completed",
        "content": [{"type": "output_text", "text": text, "annotations": []}],
    }


def reasoning(text: str) -> dict[str, Any]:
    """A Responses `reasoning` output item with one summary part."""
    return {
        "type": "reasoning",
        "id": f"rs_{uuid.uuid4().hex[:12]}",
        "summary": [{"type": "summary_text", "text": text}],
    }


def chat_tool_call(name: str, arguments: dict[str, Any], call_id: str | None = None) -> dict[str, Any]:
    """A Chat Completions tool call, for the `tool_calls` of a `message` step."""
    return {
        "id": call_id or f"call_{uuid.uuid4().hex[:12]}",
        "type": "function",
        "function": {"name": name, "arguments": orjson.dumps(arguments).decode()},
    }


@dataclass(frozen=True)
class ScriptedUpstream:
    """Where the scripted upstream listens, and its control API."""

    host: str
    port: int

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    @property
    def base_url(self) -> str:
        """The OpenAI-style base URL (what a model server's `openai_base_url` would be)."""
        return f"{self.url}/v1"

    def script(self, model: str, steps: list[Step] | list[dict[str, Any]]) -> None:
        """Append steps to the model's queue; they are served in order, one per model request."""
        self._call("POST", f"/_script/{_quote(model)}", {"steps": steps})

    def requests(self, model: str) -> list[RecordedRequest]:
        """Every request received for the model (model routes and /tokenize), oldest first."""
        return self._call("GET", f"/_requests/{_quote(model)}")

    def clear(self, model: str) -> None:
        """Drop the model's steps that were not served yet (its request log is kept)."""
        self._call("DELETE", f"/_script/{_quote(model)}")

    def reset(self) -> None:
        """Forget all scripts and request logs of every model."""
        self._call("POST", "/_reset", {})

    def gate_waiting(self, gate: str) -> int:
        """How many requests the named gate (a step's `gate`) is holding right now."""
        return self._call("GET", f"/_gates/{_quote(gate)}")["waiting"]

    def open_gate(self, gate: str) -> None:
        """Let the requests held at the gate go on; later ones pass straight through."""
        self._call("POST", f"/_gates/{_quote(gate)}", {})

    def _call(self, method: str, path: str, payload: Any = None) -> Any:
        data = None if payload is None else orjson.dumps(payload)
        headers = {} if payload is None else {"Content-Type": "application/json"}
        call = urllib.request.Request(self.url + path, data=data, headers=headers, method=method)
        try:
            with _OPENER.open(call, timeout=CONTROL_TIMEOUT_S) as answer:
                return orjson.loads(answer.read())
        except urllib.error.HTTPError as error:
            detail = error.read().decode("utf-8", errors="replace")
            raise ScriptedUpstreamError(f"{method} {path} -> HTTP {error.code}: {detail}") from None


def _quote(model: str) -> str:
    return urllib.parse.quote(model, safe="")


def as_step(answer: str | dict[str, Any]) -> dict[str, Any]:
    """A text becomes an answer with that assistant message, an output item a one-item answer; any other
    dict is a step as it is (`{"hang": True}`, ...)."""
    if isinstance(answer, str):
        return {"output": [assistant_message(answer)]}
    return {"output": [answer]} if "type" in answer else answer


@dataclass
class ModelRoles:
    """The models of one test stack by role (policy, user, judge, ...): a role's script is replaced at once,
    and its requests are read from that moment on, so each test sees only its own."""

    upstream: ScriptedUpstream
    models: dict[str, str]
    _seen: dict[str, int] = field(default_factory=dict)

    def script(self, role: str, *answers: str | dict[str, Any]) -> None:
        model = self.models[role]
        self.upstream.clear(model)
        self._seen[model] = len(self.upstream.requests(model))
        self.upstream.script(model, [as_step(answer) for answer in answers])

    def requests(self, role: str) -> list[dict[str, Any]]:
        """The bodies of the role's requests since its last script."""
        model = self.models[role]
        return [entry["body"] for entry in self.upstream.requests(model)[self._seen.get(model, 0) :]]
