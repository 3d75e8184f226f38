"""Property-based fuzzing of every shipped server from its own /openapi.json: no input may get a 5xx.

Schemathesis builds, for each operation, requests that fit the schema (positive) and requests that break
it (negative); each must be answered below 500, within ANSWER_TIMEOUT_S. Its Python API is used rather
than its pytest plugin, so the runs share the one deployment of conftest.py and count what they sent.

Generation is derandomized (the same cases, in the same order, each run) and never shrinks: a failure is
recorded with its request and the run goes on. Drawing a body for the large Responses-API schemas takes
a tenth of a second, so the file has a time budget: each server gets an even share of what is left, each
of its operations an even share of the server's, and an operation stops drawing once its share is spent
(after MIN_EXAMPLES at least). Time that quick operations leave goes to the slow ones.
"""

from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass

import hypothesis
import pytest
import requests
import schemathesis
from hypothesis import HealthCheck, Phase, given
from schemathesis import APIOperation, Case, GenerationMode
from schemathesis.checks import not_a_server_error
from schemathesis.core.failures import FailureGroup

from tests.reliability.deployment import ANSWER_TIMEOUT_S, PATH_PARAMETER_VALUES, SERVER_NAMES, Server, Tally

MAX_EXAMPLES = 25
MIN_EXAMPLES = 3
# Seconds of fuzzing for the whole file (the deployment's start comes on top), within make test's budget.
FUZZ_BUDGET_S = 35.0
MAX_SHOWN_CHARS = 600
FUZZ_SETTINGS = hypothesis.settings(
    max_examples=MAX_EXAMPLES,
    deadline=None,
    database=None,
    derandomize=True,
    phases=[Phase.explicit, Phase.generate],
    suppress_health_check=list(HealthCheck),
)


class OutOfTime(Exception):
    """Raised in a Hypothesis test body to end its run once its share of the budget is spent."""


class Budget:
    """Seconds to spend on `parts` pieces of work done one after another; each piece is offered an even
    share of what is left when it starts."""

    def __init__(self, seconds: float, parts: int) -> None:
        self.end = time.monotonic() + seconds
        self.parts = parts

    def share(self, parts: int = 1) -> Budget:
        """The budget of the next piece, itself to be split in `parts`."""
        seconds = max(0.0, self.end - time.monotonic()) / max(self.parts, 1)
        self.parts -= 1
        return Budget(seconds, parts)

    def spent(self) -> bool:
        return time.monotonic() >= self.end


@dataclass(frozen=True)
class FailingCase:
    operation: str
    mode: str
    outcome: str
    request: str

    def describe(self) -> str:
        return f"{self.operation} ({self.mode}): {self.outcome}\n    {self.request[:MAX_SHOWN_CHARS]}"


def modes(operation: APIOperation) -> list[GenerationMode]:
    """Negative data needs something to break: an operation without body or parameters has none."""
    has_input = operation.body or operation.path_parameters or operation.query
    return [GenerationMode.POSITIVE, GenerationMode.NEGATIVE] if has_input else [GenerationMode.POSITIVE]


def strategy(server: Server, operation: APIOperation, mode: GenerationMode):
    """Positive cases name a tool that exists, so they reach it; negative ones may break the path too."""
    fixed = PATH_PARAMETER_VALUES.get(server.name)
    if fixed is not None and operation.path_parameters and mode is GenerationMode.POSITIVE:
        return operation.as_strategy(generation_mode=mode, path_parameters={"path": fixed})
    return operation.as_strategy(generation_mode=mode)


def call_and_check(case: Case, server: Server, session: requests.Session) -> tuple[int | None, str | None]:
    """(status, why the answer fails the checks, or None)."""
    try:
        response = case.call(base_url=server.url, session=session, timeout=ANSWER_TIMEOUT_S)
    except requests.RequestException as error:
        return None, f"no answer within {ANSWER_TIMEOUT_S}s: {type(error).__name__}: {error}"
    try:
        case.validate_response(response, checks=[not_a_server_error])
    except FailureGroup:
        return response.status_code, f"HTTP {response.status_code} {response.text[:MAX_SHOWN_CHARS]}"
    return response.status_code, None


def fuzz_operation(
    server: Server, operation: APIOperation, mode: GenerationMode, tally: Tally, budget: Budget
) -> list[FailingCase]:
    failures: list[FailingCase] = []
    tried = 0
    with requests.Session() as session:
        server.seed(session)

        @FUZZ_SETTINGS
        @given(strategy(server, operation, mode))
        def run(case: Case) -> None:
            nonlocal tried
            if tried >= MIN_EXAMPLES and budget.spent():
                raise OutOfTime
            tried += 1
            status, outcome = call_and_check(case, server, session)
            tally.add(server.name, f"{operation.label} {mode.value}", status)
            if outcome is not None:
                failures.append(FailingCase(operation.label, mode.value, outcome, case.as_curl_command()))

        try:
            with contextlib.suppress(OutOfTime):
                run()
        except hypothesis.errors.Unsatisfiable:
            if mode is not GenerationMode.NEGATIVE:
                raise
            # Nothing in the operation can be made invalid (say, a plain-string path parameter alone).
    return failures


@pytest.fixture(scope="module")
def budget(every_server: dict[str, Server]) -> Budget:
    """Starts once the deployment is up: its start is not fuzzing time."""
    return Budget(FUZZ_BUDGET_S, len(SERVER_NAMES))


@pytest.mark.parametrize("name", SERVER_NAMES)
def test_no_generated_request_gets_a_5xx(
    name: str, every_server: dict[str, Server], tally: Tally, budget: Budget
) -> None:
    server = every_server[name]
    operations = [
        result.ok() for result in schemathesis.openapi.from_dict(server.openapi).get_all_operations()
    ]
    runs = [(operation, mode) for operation in operations for mode in modes(operation)]
    server_budget = budget.share(len(runs))
    failures: list[FailingCase] = []
    for operation, mode in runs:
        failures += fuzz_operation(server, operation, mode, tally, server_budget.share())
    assert requests.get(f"{server.url}/", timeout=ANSWER_TIMEOUT_S).status_code == 200, f"{name} died"
    assert not failures, f"{len(failures)} failing case(s) on {name}:\n" + "\n".join(
        failure.describe() for failure in failures
    )
