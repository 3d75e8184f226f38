"""NeMo Gym 0.7's explicit resources sessions on a server that keeps the base `/seed_session`: a typed seed
names the session, `/close_session` releases it for good, and the 0.4 row seed keeps working."""

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from nemo_gym.http.client import get_response_json, request
from nemo_gym.testing import StartedServer, session_id_in_cookie
from tests.helpers import run_resources_fixture

FIXTURE = Path(__file__).parents[2] / "fixtures" / "notes_resources_server.py"
INSTANCE = "notes"
COOKIE = f"NotesResourcesServer___{INSTANCE}"
EPISODE = {"rollout_id": "rollout-1", "attempt": 0}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StartedServer]:
    with run_resources_fixture(FIXTURE, INSTANCE, "notes", tmp_path_factory.mktemp(INSTANCE)) as started:
        yield started


def typed_seed(session_id: str) -> dict[str, Any]:
    return {
        "resources_session_id": session_id,
        "episode_id": EPISODE,
        "task_id": {"taskset": "notes", "task_id": "t1"},
        "task_data": {"topic": "weather"},
    }


async def call(
    server: StartedServer, path: str, body: Any, cookie: str | None
) -> tuple[int, Any, str | None]:
    response = await request(
        "POST", server.url + path, json=body, cookies={COOKIE: cookie} if cookie else None
    )
    given = response.cookies.get(COOKIE)
    return response.status, await get_response_json(response), given.value if given else cookie


async def test_a_typed_seed_names_the_session_and_close_releases_it_for_good(server: StartedServer) -> None:
    session_id = "resources-session-0123456789abcdef0123456789abcdef"
    status, body, cookie = await call(server, "/seed_session", typed_seed(session_id), None)
    assert (status, body) == (
        200,
        {"resources_session_id": session_id, "resources_tools": None, "sandbox_access": None},
    )
    assert cookie is not None and session_id_in_cookie(cookie) == session_id
    assert (await call(server, "/seed_session", typed_seed(session_id), cookie))[:2] == (200, body)
    assert (await call(server, "/write_note", {"text": "sunny"}, cookie))[0] == 200
    assert (await call(server, "/read_note", None, cookie))[1] == {"text": "sunny"}

    close = {"resources_session_id": session_id, "episode_id": EPISODE}
    for _ in range(2):
        assert (await call(server, "/close_session", close, cookie))[:2] == (
            200,
            {"resources_session_id": session_id},
        )
    assert (await call(server, "/read_note", None, cookie))[1] == {"text": ""}
    status, body, _ = await call(server, "/seed_session", typed_seed(session_id), None)
    assert status == 409 and session_id in body["error"]["message"]


async def test_an_id_closed_before_it_was_seeded_cannot_be_seeded(server: StartedServer) -> None:
    session_id = "resources-session-never-seeded"
    close = {"resources_session_id": session_id, "episode_id": EPISODE}
    assert (await call(server, "/close_session", close, None))[:2] == (
        200,
        {"resources_session_id": session_id},
    )
    assert (await call(server, "/seed_session", typed_seed(session_id), None))[0] == 409


async def test_a_row_seed_keeps_working_and_a_typed_seed_with_an_unknown_key_is_read_as_a_row(
    server: StartedServer,
) -> None:
    status, body, cookie = await call(
        server, "/seed_session", {"responses_create_params": {"input": "hi"}}, None
    )
    assert (status, body) == (200, {}) and cookie is not None
    status, body, _ = await call(
        server, "/seed_session", {**typed_seed("resources-session-x"), "typo": 1}, None
    )
    assert (status, body) == (200, {})


@pytest.mark.parametrize("capture", [False, True])
async def test_a_call_under_a_rollout_prefix_is_the_call_of_its_path_and_keeps_the_key(
    server: StartedServer, capture: bool
) -> None:
    prefix = "/ng-rollout/rollout-7-a1" + ("/training-token-capture" if capture else "")
    status, body, cookie = await call(server, prefix + "/write_note", {"text": "rainy"}, None)
    assert (status, body) == (200, {"text": "rainy"})
    assert (await call(server, "/read_note", None, cookie))[1] == {"text": "rainy"}
    assert (await call(server, prefix + "/rollout_key", None, None))[1] == {"rollout_key": "rollout-7-a1"}
    assert (await call(server, "/rollout_key", None, None))[1] == {"rollout_key": None}


async def test_a_rollout_prefix_with_an_invalid_key_is_not_taken_off(server: StartedServer) -> None:
    status, _, _ = await call(server, "/ng-rollout/-bad/write_note", {"text": "x"}, None)
    assert status == 404
