"""Following an endpoint file: a one-line file that names the backend's current URL.

A trainer that restarts or moves its vLLM (NeMo RL's colocated engines, a job scheduler) writes the new
URL there; the model server reads it at most every `check_interval_s` and moves every later call to it.
While the file is missing or empty the last URL is kept, for `stale_grace_s` at most: after that, calls
fail with a clear error instead of waiting on a backend that may be gone.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path


class StaleEndpoint(RuntimeError):
    """The endpoint file has named no backend for longer than the grace period."""


@dataclass
class EndpointFile:
    path: Path
    check_interval_s: float
    stale_grace_s: float
    _checked_at: float = field(default=-math.inf, init=False)
    _url: str | None = field(default=None, init=False)
    _missing_since: float | None = field(default=None, init=False)

    def poll(self, now: float) -> str | None:
        """The URL the file names when it changed since the last read, else None. Raises StaleEndpoint
        when the file has been missing or empty for `stale_grace_s` or more."""
        if now - self._checked_at >= self.check_interval_s:
            self._checked_at = now
            url = self._read()
            if url is None:
                self._missing_since = now if self._missing_since is None else self._missing_since
            else:
                self._missing_since = None
                if url != self._url:
                    self._url = url
                    return url
        if self._missing_since is not None and now - self._missing_since >= self.stale_grace_s:
            raise StaleEndpoint(
                f"endpoint_file {self.path} has named no backend URL for {now - self._missing_since:.0f} s "
                f"(endpoint_stale_grace_s: {self.stale_grace_s:g}); write the backend's URL into it"
            )
        return None

    def _read(self) -> str | None:
        try:
            text = self.path.read_text(encoding="utf-8").strip()
        except (OSError, UnicodeDecodeError):
            return None
        return text.splitlines()[0].strip() if text else None
