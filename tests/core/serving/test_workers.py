"""Process serving: what a co-hosting process collects instead of served apps, and the liveness shortcut."""

from fastapi import FastAPI

from nemo_gym.http.protocol import RequestLimits
from nemo_gym.server_utils import finalize_app, new_app
from nemo_gym.serving.workers import (
    BoundApp,
    answers_liveness,
    bind_listening_socket,
    collecting_apps,
    serve_instance,
)

LIMITS = RequestLimits(max_body_bytes=1024, read_timeout_s=5.0)


def bound_app(name: str) -> BoundApp:
    return BoundApp(name, finalize_app(new_app(), name), bind_listening_socket("127.0.0.1", 0))


def test_inside_collecting_apps_each_instance_is_handed_over_instead_of_served():
    first, second = bound_app("first"), bound_app("second")
    try:
        with collecting_apps() as collected:
            serve_instance(first, "first", LIMITS, 1)
            serve_instance(second, "second", LIMITS, 1)
        assert collected == [first, second]
        with collecting_apps() as again:  # the previous collection ended with its block
            assert again == []
        assert collected == [first, second]
    finally:
        first.sock.close()
        second.sock.close()


def test_the_protocol_may_answer_liveness_only_for_the_standard_route():
    standard = finalize_app(new_app(), "standard")
    custom = FastAPI()

    @custom.get("/")
    async def own_root() -> dict[str, str]:
        return {"status": "mine"}

    assert answers_liveness(standard)
    assert not answers_liveness(finalize_app(custom, "custom"))
