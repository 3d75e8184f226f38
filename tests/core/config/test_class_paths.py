"""class_at_path: a config's dotted class path, imported and checked, or one line naming the key."""

from __future__ import annotations

import collections

import pytest

from nemo_gym.config.class_paths import class_at_path


def test_a_dotted_path_to_a_subclass_is_that_class():
    assert class_at_path("env_class", "collections.OrderedDict", dict) is collections.OrderedDict


@pytest.mark.parametrize(
    "dotted, expected",
    [
        ("no_such_pkg.Env", "env_class 'no_such_pkg.Env' cannot be imported: No module named 'no_such_pkg'"),
        ("collections.NoSuchClass", "env_class 'collections.NoSuchClass' cannot be imported"),
        ("OrderedDict", "env_class 'OrderedDict' is not a builtins.dict subclass"),
        ("collections.deque", "env_class 'collections.deque' is not a builtins.dict subclass"),
        ("collections.namedtuple", "env_class 'collections.namedtuple' is not a builtins.dict subclass"),
    ],
)
def test_anything_else_is_one_line_naming_the_key(dotted, expected):
    with pytest.raises(ValueError) as refused:
        class_at_path("env_class", dotted, dict)
    message = str(refused.value)
    assert message.startswith(expected) and "\n" not in message
