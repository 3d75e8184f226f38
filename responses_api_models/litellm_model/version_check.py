"""The LiteLLM proxy's version, checked before serving: versions 1.82.7 and 1.82.8 carried
credential-harvesting malware (LiteLLM's security notice of March 2026), so NeMo Gym refuses any proxy
older than 1.83.0, or one that does not say which version it runs, and so does this server."""

from __future__ import annotations

import re

from nemo_gym.config.errors import ConfigError
from nemo_gym.http.client import HTTPStatusError, RequestFailedError, RetryPolicy, checked_json, request

READINESS_PATH = "/health/readiness/details"
CHECK_DEADLINE_S = 5.0
COMPROMISED_VERSIONS = frozenset({(1, 82, 7), (1, 82, 8)})
MINIMUM_SAFE_VERSION = (1, 83, 0)
# `1.83.0`, `v1.83.0`, `1.83.0-stable`, `1.83.0-stable.patch.2`, `1.83.0.post1`.
VERSION = re.compile(r"^v?(\d+)\.(\d+)\.(\d+)(?:-stable(?:\.patch\.\d+)?|\.post\d+)?$")


class UnsafeProxyError(ConfigError):
    """The proxy runs a version known or not shown to be safe; the server does not start (one line)."""


def proxy_root(base_url: str) -> str:
    return re.sub(r"/v1/?$", "", base_url.rstrip("/"))


def parse_version(text: str) -> tuple[int, int, int]:
    match = VERSION.match(text.strip())
    if match is None:
        raise UnsafeProxyError(f"the LiteLLM proxy reports a version this server cannot read: {text!r}")
    major, minor, patch = (int(part) for part in match.groups())
    return major, minor, patch


def judge_version(text: str) -> tuple[int, int, int]:
    """The version, if it is safe to send a key to; else why not."""
    version = parse_version(text)
    shown = ".".join(map(str, version))
    if version in COMPROMISED_VERSIONS:
        raise UnsafeProxyError(
            f"the LiteLLM proxy runs {shown}, a release that carried credential-harvesting malware; "
            f"upgrade the proxy to {'.'.join(map(str, MINIMUM_SAFE_VERSION))} or later"
        )
    if version < MINIMUM_SAFE_VERSION:
        raise UnsafeProxyError(
            f"the LiteLLM proxy runs {shown}, older than the minimum safe "
            f"{'.'.join(map(str, MINIMUM_SAFE_VERSION))}; upgrade the proxy"
        )
    return version


async def check_proxy_version(base_url: str, headers: dict[str, str]) -> tuple[int, int, int]:
    """Ask the proxy's readiness details for `litellm_version` (one attempt, `CHECK_DEADLINE_S`)."""
    url = f"{proxy_root(base_url)}{READINESS_PATH}"
    policy = RetryPolicy(max_attempts=1, deadline_s=CHECK_DEADLINE_S)
    try:
        details = await checked_json(await request("GET", url, headers=headers, retry_policy=policy))
    except HTTPStatusError as error:
        # The body is left out: a proxy may echo the key it refused.
        raise UnsafeProxyError(
            f"could not verify the LiteLLM proxy's version: {url} answered HTTP {error.status}"
        ) from None
    except RequestFailedError as error:
        raise UnsafeProxyError(f"could not verify the LiteLLM proxy's version: {error}") from None
    version = details.get("litellm_version") if isinstance(details, dict) else None
    if not version:
        raise UnsafeProxyError(f"the LiteLLM proxy at {url} does not report litellm_version")
    return judge_version(str(version))
