"""nemo_gym.config.server_instances.unknown_setting: a server's config keys, aliases included, so that a
key a server reads under NeMo Gym's name (an `AliasChoices`) is not reported as unknown."""

from __future__ import annotations

from pydantic import AliasChoices, BaseModel, Field

from nemo_gym.config.server_instances import unknown_setting


class AliasedConfig(BaseModel):
    cap: int = Field(default=1, validation_alias=AliasChoices("num_concurrent_requests", "cap"))
    url: str = Field(default="", alias="base_url")


def test_every_name_an_alias_reads_is_a_known_key() -> None:
    assert unknown_setting(AliasedConfig, {"num_concurrent_requests": 2, "cap": 3, "base_url": "x"}) is None


def test_a_misspelt_aliased_key_is_named_with_the_nearest_known_one() -> None:
    problem = unknown_setting(AliasedConfig, {"num_concurent_requests": 2})
    assert problem == (
        "unknown key 'num_concurent_requests' (AliasedConfig does not read it); "
        "did you mean 'num_concurrent_requests'?"
    )
