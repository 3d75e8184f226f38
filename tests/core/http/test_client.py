import asyncio
import logging
import pickle
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from nemo_gym.http.client import (
    BadResponseError,
    ConnectionFailedError,
    DeadlineExceededError,
    HTTPStatusError,
    RetryPolicy,
    close_global_aiohttp_client,
    get_global_aiohttp_client,
    get_response_json,
    parse_retry_after,
    raise_for_status,
    request,
)
from nemo_gym.openai_utils import RETRY_ERROR_CODES, NeMoGymAsyncOpenAI
from tests.helpers import StartedServer, run_server, script_the_attempt_schedule
from tests.reliability import faulty_upstream as faulty_upstream_server
from tests.shared_fixtures import closed_port, unique_key
from tests.upstream_script import fresh_model

FAST = RetryPolicy(
    max_attempts=5, deadline_s=20, backoff_base_s=0.01, retry_statuses=frozenset(RETRY_ERROR_CODES)
)


@pytest.fixture(scope="module")
def faulty_upstream(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StartedServer]:
    with run_server([faulty_upstream_server.__file__], tmp_path_factory.mktemp("faulty_upstream")) as server:
        yield server


async def attempts_seen(server, key: str) -> dict:
    return await get_response_json(await request("GET", f"{server.url}/attempts/{key}"))


async def test_503_n_times_then_200_succeeds_on_attempt_n_plus_1(flaky_server, caplog):
    key = unique_key()
    url = f"{flaky_server.url}/s/{key}/503/3/"
    with caplog.at_level(logging.WARNING, logger="nemo_gym.http"):
        response = await request("POST", url, json={"x": 1}, retry_policy=FAST)
    assert response.status == 200
    assert (await get_response_json(response))["attempts"] == 4
    assert (await attempts_seen(flaky_server, key))["hits"] == 4
    # Only this call's lines: a call another test left running in this worker may log a retry meanwhile.
    # On a loaded machine a connection may also be refused once and retried; those lines say so, not 503.
    messages = [record.getMessage() for record in caplog.records]
    retry_lines = [message for message in messages if "HTTP retry" in message and url in message]
    status_lines = [line for line in retry_lines if "returned status 503" in line]
    assert len(status_lines) == 3
    assert all(line.endswith("s)") and "/5, next in" in line for line in status_lines)


def test_backoff_grows_exponentially_with_jitter_up_to_the_cap():
    policy = RetryPolicy(backoff_base_s=0.5, backoff_max_s=4.0)
    for attempt, step in [(1, 0.5), (2, 1.0), (3, 2.0), (4, 4.0), (9, 4.0)]:
        delays = {policy.backoff_delay(attempt) for _ in range(50)}
        assert all(step / 2 <= delay <= step for delay in delays)
        assert len(delays) > 1, "jitter spreads the delays"


def test_the_attempt_schedule_stops_when_the_attempts_or_the_deadline_run_out():
    policy = RetryPolicy(max_attempts=3, backoff_base_s=0.5, backoff_max_s=4.0)
    assert 0.25 <= policy.next_delay(1) <= 0.5
    assert policy.next_delay(2, retry_after_s=3.0) == 3.0, "a longer Retry-After wins over the backoff"
    assert 0.5 <= policy.next_delay(2, retry_after_s=0.1) <= 1.0, "a shorter one does not cut the backoff"
    assert policy.next_delay(3) is None, "the attempts are spent"
    assert policy.next_delay(1, retry_after_s=3.0, remaining_s=3.0) is None, (
        "the wait would reach the deadline"
    )
    assert policy.next_delay(1, remaining_s=0.6) is not None


async def test_the_client_retries_a_status_as_the_attempt_schedule_says(flaky_server, monkeypatch):
    key = unique_key()
    asked = script_the_attempt_schedule(monkeypatch, [0.0, None])
    url = f"{flaky_server.url}/s/{key}/429/99/?retry_after=7"
    response = await request("GET", url, retry_policy=FAST)
    assert response.status == 429, "the schedule said stop after the second attempt, well within the five"
    assert (await attempts_seen(flaky_server, key))["hits"] == 2
    assert [(entry.max_attempts, entry.attempts, entry.retry_after_s) for entry in asked] == [
        (5, 1, 7.0),
        (5, 2, 7.0),
    ]
    assert all(0 < entry.remaining_s <= FAST.deadline_s for entry in asked)


async def test_the_client_retries_a_refused_connection_as_the_attempt_schedule_says(monkeypatch):
    asked = script_the_attempt_schedule(monkeypatch, [0.0, 0.0, None])
    with pytest.raises(ConnectionFailedError) as raised:
        await request("GET", f"http://127.0.0.1:{closed_port()}/", retry_policy=FAST)
    assert raised.value.attempts == 3
    assert [(entry.attempts, entry.retry_after_s) for entry in asked] == [(1, None), (2, None), (3, None)]


async def test_persistent_retry_status_stops_at_max_attempts_and_keeps_body(flaky_server):
    key = unique_key()
    policy = FAST.with_overrides(max_attempts=3)
    response = await request("GET", f"{flaky_server.url}/s/{key}/503/99/", retry_policy=policy)
    assert response.status == 503
    with pytest.raises(HTTPStatusError) as raised:
        await raise_for_status(response)
    assert b"scripted 503" in raised.value.response_content
    assert (await attempts_seen(flaky_server, key))["hits"] == 3


async def test_other_4xx_is_returned_at_once(flaky_server):
    key = unique_key()
    response = await request("GET", f"{flaky_server.url}/s/{key}/400/99/", retry_policy=FAST)
    assert response.status == 400
    assert (await attempts_seen(flaky_server, key))["hits"] == 1


async def test_retry_after_delays_the_next_attempt(flaky_server):
    key = unique_key()
    response = await request("GET", f"{flaky_server.url}/s/{key}/429/1/?retry_after=1", retry_policy=FAST)
    assert response.status == 200
    times = (await attempts_seen(flaky_server, key))["times"]
    assert len(times) == 2
    assert times[1] - times[0] >= 1.0


async def test_a_server_that_never_answers_fails_after_the_deadline(flaky_server):
    started = time.monotonic()
    with pytest.raises(DeadlineExceededError) as raised:
        await request("GET", f"{flaky_server.url}/hang", retry_policy=FAST.with_overrides(deadline_s=1.0))
    assert time.monotonic() - started >= 1.0  # not cut short; pytest-timeout catches a hang
    assert f"{flaky_server.url}/hang" in str(raised.value)
    assert isinstance(raised.value, TimeoutError)


async def test_refused_connection_fails_within_deadline_naming_the_url(caplog):
    url = f"http://127.0.0.1:{closed_port()}/anything"
    policy = FAST.with_overrides(max_attempts=3, deadline_s=5.0)
    with (
        caplog.at_level(logging.WARNING, logger="nemo_gym.http"),
        pytest.raises(ConnectionFailedError) as raised,
    ):
        await request("POST", url, json={"a": 1}, retry_policy=policy)
    assert url in str(raised.value)
    assert raised.value.attempts == 3
    retry_lines = [record.getMessage() for record in caplog.records if "HTTP retry" in record.getMessage()]
    assert len(retry_lines) == 2, "each retry is logged once, the first failure at once"
    assert all(url in line for line in retry_lines)
    assert "attempt 1/3" in retry_lines[0]


async def test_a_post_dropped_after_sending_is_not_repeated(flaky_server):
    key = unique_key()
    with pytest.raises(ConnectionFailedError) as raised:
        await request("POST", f"{flaky_server.url}/drop/{key}", json={"n": 1}, retry_policy=FAST)
    assert "connection closed before an answer" in str(raised.value)
    # The server saw the body once. (An attempt that could not even connect, as on a machine too busy to
    # accept at once, sent nothing and may be retried: only the count of received bodies matters.)
    assert (await attempts_seen(flaky_server, key))["hits"] == 1


async def test_an_idempotent_call_dropped_after_sending_is_retried(flaky_server):
    for method, options in (("GET", {}), ("POST", {"idempotent": True})):
        key = unique_key()
        with pytest.raises(ConnectionFailedError) as raised:
            await request(method, f"{flaky_server.url}/drop/{key}", retry_policy=FAST, **options)
        assert raised.value.attempts == FAST.max_attempts
        # aiohttp itself may resend an idempotent request once on a reused pooled connection.
        assert (await attempts_seen(flaky_server, key))["hits"] >= FAST.max_attempts


async def test_deadline_bounds_the_total_of_all_attempts():
    url = f"http://127.0.0.1:{closed_port()}/anything"
    policy = RetryPolicy(max_attempts=1000, deadline_s=1.5, backoff_base_s=0.2, backoff_max_s=0.4)
    started = time.monotonic()
    with pytest.raises(ConnectionFailedError) as raised:
        await request("GET", url, retry_policy=policy)
    assert raised.value.attempts < policy.max_attempts  # the deadline ended the retries, not the attempt cap
    assert time.monotonic() - started >= policy.deadline_s - policy.backoff_max_s


def test_parse_retry_after_accepts_seconds_and_dates():
    assert parse_retry_after("2") == 2.0
    assert parse_retry_after(None) is None
    assert parse_retry_after("soon") is None
    assert parse_retry_after("Wed, 21 Oct 2015 07:28:00 GMT") == 0.0


async def test_upstream_client_retries_statuses_then_succeeds(flaky_server):
    key = unique_key()
    client = NeMoGymAsyncOpenAI(
        base_url=f"{flaky_server.url}/s/{key}/502/2/v1", api_key="sk-test", max_attempts=4
    )
    assert (await client.create_response(input="hi"))["attempts"] == 3


async def test_upstream_client_caps_attempts_and_raises_with_the_body(flaky_server):
    key = unique_key()
    client = NeMoGymAsyncOpenAI(
        base_url=f"{flaky_server.url}/s/{key}/500/99/v1", api_key="sk", max_attempts=2
    )
    with pytest.raises(HTTPStatusError) as raised:
        await client.create_chat_completion(messages=[{"role": "user", "content": "hi"}])
    assert raised.value.status == 500
    assert b"scripted 500" in raised.value.response_content
    assert (await attempts_seen(flaky_server, key))["hits"] == 2


async def test_upstream_client_does_not_retry_a_400(flaky_server):
    key = unique_key()
    client = NeMoGymAsyncOpenAI(
        base_url=f"{flaky_server.url}/s/{key}/400/99/v1", api_key="sk", max_attempts=5
    )
    with pytest.raises(HTTPStatusError) as raised:
        await client.create_response(input="hi")
    assert raised.value.status == 400
    assert (await attempts_seen(flaky_server, key))["hits"] == 1


async def test_upstream_client_sends_bearer_key_and_json_body(flaky_server):
    client = NeMoGymAsyncOpenAI(
        base_url=f"{flaky_server.url}/echo/v1", api_key="sk-secret", default_headers={"X-A": "b"}
    )
    echoed = await client.create_chat_completion(model="m", messages=[{"role": "user", "content": "hi"}])
    assert echoed["body"] == {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
    assert echoed["headers"]["Authorization"] == "Bearer sk-secret"
    assert echoed["headers"]["X-A"] == "b"


async def test_concurrent_requests_share_one_pool(flaky_server):
    keys = [unique_key() for _ in range(50)]
    responses = await asyncio.gather(*(request("GET", f"{flaky_server.url}/s/{k}/200/0/") for k in keys))
    assert {response.status for response in responses} == {200}


async def test_upstream_client_tokenize_and_models_reach_the_vllm_routes(scripted_upstream):
    model = fresh_model()
    client = NeMoGymAsyncOpenAI(base_url=scripted_upstream.base_url, api_key="sk-test")
    tokens = await client.create_tokenize(model=model, prompt="one two one")
    assert tokens["count"] == 3 and tokens["tokens"][0] == tokens["tokens"][2]
    assert [entry["path"] for entry in scripted_upstream.requests(model)] == ["/tokenize"]
    listed = await client.create_models()
    assert model in [entry["id"] for entry in listed["data"]]


async def test_status_errors_do_not_keep_the_request_headers(flaky_server):
    key = unique_key()
    response = await request(
        "GET", f"{flaky_server.url}/s/{key}/401/99/", headers={"Authorization": "Bearer sk-secret-value"}
    )
    with pytest.raises(HTTPStatusError) as raised:
        await raise_for_status(response)
    assert "sk-secret-value" not in repr(raised.value) + str(raised.value)
    assert not raised.value.request_info.headers


async def test_a_body_cut_short_is_a_connection_failure_and_a_post_is_not_repeated(faulty_upstream):
    for fault in ("closed_mid_body", "chunked_cut_short"):
        url = f"{faulty_upstream.url}/fault:{fault}"
        with pytest.raises(ConnectionFailedError) as raised:
            await request("POST", url, json={"n": 1}, retry_policy=FAST)
        assert str(raised.value).startswith(f"POST {url}: connection closed mid-body after 1 attempt(s)")


async def test_an_idempotent_call_cut_short_is_retried(faulty_upstream):
    with pytest.raises(ConnectionFailedError) as raised:
        await request("GET", f"{faulty_upstream.url}/fault:closed_mid_body", retry_policy=FAST)
    assert raised.value.attempts == FAST.max_attempts


async def test_an_answer_that_is_not_http_is_a_bad_response(faulty_upstream):
    for fault in ("not_http", "bad_chunked"):
        url = f"{faulty_upstream.url}/fault:{fault}"
        with pytest.raises(BadResponseError) as raised:
            await request("POST", url, json={}, retry_policy=FAST)
        assert raised.value.kind == "bad_upstream_response"
        assert str(raised.value).startswith(f"POST {url}: not a valid HTTP answer (")
        assert "\n" not in str(raised.value)


async def test_a_body_that_stalls_or_drips_fails_at_the_call_deadline(faulty_upstream):
    for fault in ("stall", "drip"):
        url = f"{faulty_upstream.url}/fault:{fault}"
        started = time.monotonic()
        with pytest.raises(DeadlineExceededError) as raised:
            await request("GET", url, retry_policy=FAST.with_overrides(deadline_s=1.0))
        assert time.monotonic() - started >= 1.0
        assert str(raised.value).startswith(f"GET {url}: body not complete within the deadline")


async def test_a_2xx_body_that_is_not_json_is_a_bad_response(faulty_upstream):
    url = f"{faulty_upstream.url}/fault:not_json"
    response = await request("GET", url)
    assert response.status == 200
    with pytest.raises(BadResponseError) as raised:
        await get_response_json(response)
    assert isinstance(raised.value, ValueError), "callers that caught the JSON error still catch this"
    assert str(raised.value).startswith(f"GET {url}: HTTP 200 answer is invalid JSON (")


def test_each_event_loop_has_its_own_session_and_closing_one_leaves_the_others_open() -> None:
    """An embedded deployment's loop runs beside the trainer's: neither may take or close the other's."""
    other: dict[str, Any] = {}
    other_has_its_session, other_may_finish = threading.Event(), threading.Event()

    async def other_loop() -> None:
        other["session"] = get_global_aiohttp_client()
        other_has_its_session.set()
        await asyncio.to_thread(other_may_finish.wait, 60)
        other["still_open"] = not other["session"].closed and get_global_aiohttp_client() is other["session"]
        await close_global_aiohttp_client()

    thread = threading.Thread(target=asyncio.run, args=(other_loop(),))
    thread.start()
    try:
        assert other_has_its_session.wait(60)

        async def this_loop() -> None:
            session = get_global_aiohttp_client()
            assert session is not other["session"]
            await close_global_aiohttp_client()
            assert session.closed

        asyncio.run(this_loop())
    finally:
        other_may_finish.set()
        thread.join(60)
    assert other["still_open"] is True and other["session"].closed


def test_gym_errors_survive_pickling_with_what_a_caller_reads() -> None:
    """Trainers pass errors between Ray processes; aiohttp's header proxies would make that fail."""
    failure = DeadlineExceededError("POST", "http://127.0.0.1:1/run", 2, 1.5, TimeoutError(), "no answer")
    copy = pickle.loads(pickle.dumps(failure))
    assert (type(copy), str(copy), copy.attempts) == (DeadlineExceededError, str(failure), 2)
