"""Secrets never shown in clear: which config keys and header names hold credentials, a masked copy of a
config, and the YAML text of a config for display (as written, or resolved as the servers see it)."""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from typing import Any

from omegaconf import DictConfig, ListConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException

from nemo_gym.config.server_kinds import SERVER_TYPES, is_instance_block
from nemo_gym.text.redaction import MASKED_VALUE, without_url_passwords

_SECRET_NAME_WORDS = frozenset(
    {"key", "keys", "tokens", "secrets", "passwords", "pwd", "passphrase", "auth", "authorization"}
    | {"cookie", "cookies", "credential", "credentials"}
)
_SECRET_WORD_ENDINGS = ("token", "secret", "password", "passwd", "apikey", "accesskey", "privatekey")
_SECRET_HEADER_PARTS = ("auth", "key", "token", "secret", "cookie", "session", "passw", "credential")
_NAME_WORD = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|[0-9]+")  # `X-Api-Key`, `apiKey`, `HF_TOKEN`
_COUNT_KEY_SUFFIXES = ("tokens", "_count", "_size")
_INTERPOLATED_KEY = re.compile(r"\$\{(?:[\w.]+:)?([^${}:,]+)[^${}]*\}")  # `${a.b}`, `${oc.env:NAME,x}`
_PURE_INTERPOLATION = re.compile(r"^\$\{[^${}]*\}$")

# A secret shorter than this ("EMPTY" placeholders aside) is not cut out of other strings: it would garble them.
MIN_SCRUBBED_SECRET_CHARS = 6


def mask_secrets(value: Any) -> Any:
    """A plain deep copy in which secret values read "****", for any display of a config.

    A key is secret when `is_secret_key` says so; every string below it is masked, in nested mappings
    and lists too, and so is the value of a credential header in a header map (`default_headers`,
    `openai_default_headers`, ...). A password in a URL (`https://user:pass@host`) is masked in any
    string. Left visible: None, booleans, numbers under a count-like key (`max_tokens`), a value that is
    only an interpolation such as `${policy_api_key}` (the key it refers to is masked where it is
    defined), and the structure of server instances: an instance, server-type or implementation name like
    `token_counter` never hides its host and port, which clients need to find it.
    """
    return _masked(value, under_secret_key=False, names_level=3)


def _masked(value: Any, under_secret_key: bool, names_level: int = 0, key: Any = "") -> Any:
    """`names_level`: 3 at the root (keys are instance names), 2 for a top-level block, 1 under a
    server-type key (keys are implementation names), 0 for ordinary config below."""
    if OmegaConf.is_config(value):
        value = OmegaConf.to_container(value, resolve=False)
    if isinstance(value, Mapping):
        headers = is_header_map(key)
        return {
            child_key: _masked(
                child,
                under_secret_key
                or (_names_a_setting(names_level, child) and is_secret_key(child_key, header=headers)),
                _child_names_level(names_level, child_key),
                child_key,
            )
            for child_key, child in value.items()
        }
    if isinstance(value, list | tuple):
        return [_masked(child, under_secret_key, 0, key) for child in value]
    if not under_secret_key:
        return without_url_passwords(value) if isinstance(value, str) else value
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, int | float) and str(key).lower().endswith(_COUNT_KEY_SUFFIXES):
        return value
    if isinstance(value, str) and _PURE_INTERPOLATION.match(value):
        return value
    return MASKED_VALUE


def _names_a_setting(names_level: int, child: Any) -> bool:
    """False for a key that names a server instance or implementation rather than a setting."""
    if names_level == 3:
        return not is_instance_block(child)
    return names_level != 1


def _child_names_level(names_level: int, child_key: Any) -> int:
    if names_level == 3:
        return 2
    if names_level == 2 and child_key in SERVER_TYPES:
        return 1
    return 0


def is_secret_key(key: Any, header: bool = False) -> bool:
    """Whether the value of a setting named `key` (an HTTP header name, with `header`) is a credential.

    A setting name is cut into words (`X-Api-Key`, `apiKey`, `HF_TOKEN`, `db_passwd`), so that `tokenizer`,
    `keyword` or `author` stay visible: it is secret when a word is a credential word (key, token, secret,
    password, passwd, pwd, auth, cookie, credentials, ...) or runs one on at its end (`hftoken`,
    `apikey`). A header name is secret when it merely contains auth, key, token, secret, cookie, session,
    passw or credential, since headers of those names carry little else (`X-Upstream-Auth`, `Set-Cookie`).
    """
    if header:
        return any(part in str(key).lower() for part in _SECRET_HEADER_PARTS)
    return any(word in _SECRET_NAME_WORDS or word.endswith(_SECRET_WORD_ENDINGS) for word in _name_words(key))


def is_header_map(key: Any) -> bool:
    """A mapping under `headers`, `extra_headers`, `openai_default_headers`... maps header names to values."""
    return _name_words(key)[-1:] == ["headers"]


def _name_words(key: Any) -> list[str]:
    return [word.lower() for word in _NAME_WORD.findall(str(key))]


def to_yaml(cfg: Any, mask: bool) -> str:
    """YAML text of a config (interpolations kept as written), with secrets masked when `mask`."""
    return OmegaConf.to_yaml(mask_secrets(cfg) if mask else cfg)


def to_resolved_yaml(cfg: Any) -> str:
    """YAML text of a config as the servers will see it: interpolations resolved, then secrets masked.

    Masking by key runs on the resolved values, so `openai_api_key: ${policy_api_key}` shows "****"; a
    value interpolating a secret key (`Bearer ${policy_api_key}` under a header named `X-Auth`) is masked
    whole; and every secret value is also cut out of any other string it reached through a chain of
    interpolations (`X-Auth: ${bearer}` with `bearer: Bearer ${policy_api_key}`). An
    interpolation that cannot be resolved is shown as written, so a half-finished config can still be
    inspected.
    """
    config = cfg if OmegaConf.is_config(cfg) else OmegaConf.create(cfg)
    resolved = _resolved_leniently(config)
    masked = mask_secrets(resolved)
    secrets = sorted(set(_masked_strings(resolved, masked)), key=len, reverse=True)
    return OmegaConf.to_yaml(_without_secrets(masked, secrets))


def _resolved_leniently(node: DictConfig | ListConfig) -> dict | list:
    """`node` as plain data, each value resolved on its own; one that fails to resolve stays as written."""
    raw = OmegaConf.to_container(node, resolve=False)
    keys = list(node.keys()) if isinstance(node, DictConfig) else list(range(len(node)))
    values = [_resolved_value(node, key, raw[key]) for key in keys]
    return dict(zip(keys, values, strict=True)) if isinstance(node, DictConfig) else values


def _resolved_value(node: DictConfig | ListConfig, key: Any, raw: Any) -> Any:
    """`node[key]` resolved; a value that interpolates a secret-named key is masked whole here already,
    since the key it ends up under (`X-Auth`, say) need not look secret to `mask_secrets`."""
    try:
        value = node[key]
    except OmegaConfBaseException:
        return raw
    if OmegaConf.is_config(value):
        return _resolved_leniently(value)
    secret = next(
        (name for name in _INTERPOLATED_KEY.findall(str(raw)) if is_secret_key(name.rsplit(".", 1)[-1])),
        None,
    )
    return value if secret is None else _masked(value, under_secret_key=True, key=secret)


def _masked_strings(plain: Any, masked: Any) -> Iterator[str]:
    """The strings of `plain` that masking replaced: the secret values themselves."""
    if isinstance(plain, dict) and isinstance(masked, dict):
        for key, value in plain.items():
            yield from _masked_strings(value, masked.get(key))
    elif isinstance(plain, list) and isinstance(masked, list):
        for value, masked_value in zip(plain, masked, strict=False):
            yield from _masked_strings(value, masked_value)
    elif isinstance(plain, str) and masked == MASKED_VALUE and len(plain) >= MIN_SCRUBBED_SECRET_CHARS:
        yield plain


def _without_secrets(value: Any, secrets: list[str]) -> Any:
    if isinstance(value, dict):
        return {key: _without_secrets(child, secrets) for key, child in value.items()}
    if isinstance(value, list):
        return [_without_secrets(child, secrets) for child in value]
    if isinstance(value, str):
        for secret in secrets:
            value = value.replace(secret, MASKED_VALUE)
    return value
