"""The default numbers of a Gym deployment, in one place that imports nothing but `typing`.

Config models, the HTTP client and the launcher all start from these values; keeping them free of
imports lets a type module use them without pulling in the HTTP layer.
"""

from __future__ import annotations

from typing import Literal

# Outbound HTTP: every call has a deadline and a capped number of attempts.
DEFAULT_HTTP_MAX_ATTEMPTS = 3  # NeMo Gym's MAX_NUM_TRIES (server_utils still exports that name)
DEFAULT_CONNECT_TIMEOUT_S = 10.0
DEFAULT_DEADLINE_S = 1800.0
DEFAULT_CONNECTOR_LIMIT = 102400
DEFAULT_CONNECTOR_LIMIT_PER_HOST = 1024

# Inbound HTTP: what one server accepts per request.
DEFAULT_MAX_REQUEST_BODY_MB = 64.0
DEFAULT_REQUEST_READ_TIMEOUT_S = 120.0

# Addresses: safe by default (loopback), ports drawn from a range that avoids the head server's.
DEFAULT_HOST = "127.0.0.1"
DEFAULT_HEAD_SERVER_PORT = 11000
DEFAULT_PORT_RANGE_LOW = 10001
DEFAULT_PORT_RANGE_HIGH = 20000
MAX_PORT_PROBES = 50

# Where `run_cpu_bound` work runs: each server's own worker processes, or Ray tasks over the cluster.
CPUPoolBackend = Literal["process", "ray"]
DEFAULT_CPU_POOL_BACKEND: CPUPoolBackend = "process"
