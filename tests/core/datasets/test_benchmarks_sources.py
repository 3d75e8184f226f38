"""`fetch_public_file` and `save_public_file`, what benchmark prepare scripts read data from the web with: a
file comes from the mirror when NEMO_GYM_BENCHMARK_MIRROR names one, and a missing file is one line naming
the URL it tried."""

from __future__ import annotations

import http.server
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
import requests

from nemo_gym.benchmarks import FETCH_ATTEMPTS, MIRROR_ENV, fetch_public_file, save_public_file
from nemo_gym.config.errors import ConfigError
from nemo_gym.testing import run_server
from tests.helpers import script_the_attempt_schedule

URL = "https://raw.githubusercontent.com/example/data/main/table.csv"


def test_a_mirror_serves_the_file_and_a_missing_one_is_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with run_server(["-m", "tests.public_files"], tmp_path) as mirror:
        stored = requests.put(f"{mirror.url}/_files", params={"path": "raw.githubusercontent.com/example/data/main/table.csv"},
                              data=b"a,b\n1,2\n", timeout=30)  # fmt: skip
        stored.raise_for_status()
        monkeypatch.setenv(MIRROR_ENV, mirror.url + "/")
        assert fetch_public_file(URL) == b"a,b\n1,2\n"
        with pytest.raises(
            ConfigError,
            match=rf"could not fetch {mirror.url}/raw.githubusercontent.com/example/other.csv: HTTP Error 404",
        ):
            fetch_public_file("https://raw.githubusercontent.com/example/other.csv")
        fetched = requests.get(f"{mirror.url}/_requests", timeout=30).json()
    # a 404 is not retried: the file is not there, asking again will not change that
    assert [request["path"] for request in fetched] == [
        "raw.githubusercontent.com/example/data/main/table.csv",
        "raw.githubusercontent.com/example/other.csv",
    ]


def test_a_large_file_is_saved_to_disk_and_a_failed_download_leaves_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    archive = bytes(range(256)) * 3_000  # binary, under the file host's 1 MB upload limit
    with run_server(["-m", "tests.public_files"], tmp_path) as mirror:
        requests.put(f"{mirror.url}/_files", params={"path": "example.org/dev.zip"}, data=archive,
                     timeout=30).raise_for_status()  # fmt: skip
        monkeypatch.setenv(MIRROR_ENV, mirror.url)
        target = tmp_path / "data" / "dev.zip"
        assert save_public_file("https://example.org/dev.zip", target) == target
        assert target.read_bytes() == archive
        with pytest.raises(ConfigError, match="could not fetch .*/example.org/gone.zip: HTTP Error 404"):
            save_public_file("https://example.org/gone.zip", tmp_path / "data" / "gone.zip")
    assert sorted(path.name for path in (tmp_path / "data").iterdir()) == ["dev.zip"]


@contextmanager
def busy_file_host() -> Iterator[tuple[str, list[str]]]:
    """A host on 127.0.0.1 that answers every GET with 503 and `Retry-After: 7`; yields its URL and the
    paths it was asked for."""
    asked: list[str] = []

    class Busy(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            asked.append(self.path)
            self.send_response(503)
            self.send_header("Retry-After", "7")
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *_: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Busy)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", asked
    finally:
        server.shutdown()
        server.server_close()


def test_a_busy_host_is_asked_again_as_the_http_clients_attempt_schedule_says(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Downloads retry on the HTTP client's schedule (attempts, backoff, Retry-After), not arithmetic of
    their own: scripted to wait 0 s once and then stop, the fetch makes exactly two requests."""
    asked = script_the_attempt_schedule(monkeypatch, [0.0, None])
    with busy_file_host() as (mirror, paths):
        monkeypatch.setenv(MIRROR_ENV, mirror)
        with pytest.raises(
            ConfigError, match=rf"could not fetch {mirror}/example.org/busy.csv: HTTP Error 503"
        ):
            fetch_public_file("https://example.org/busy.csv")
    assert paths == ["/example.org/busy.csv"] * 2
    assert [(entry.max_attempts, entry.attempts, entry.retry_after_s) for entry in asked] == [
        (FETCH_ATTEMPTS, 1, 7.0),
        (FETCH_ATTEMPTS, 2, 7.0),
    ]
