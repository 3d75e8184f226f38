"""The errors a config mistake raises.

Each names the key or file and, where possible, the fix; each also derives from the builtin error callers
historically caught, so `except FileNotFoundError` and the like keep working."""

from __future__ import annotations


class ConfigError(Exception):
    """A mistake in the user's config: the CLI prints the message (no traceback) and exits non-zero."""


class ConfigPathNotFoundError(ConfigError, FileNotFoundError):
    """A file listed in `config_paths` exists in none of the places it is looked up."""


class MalformedConfigPathsError(ConfigError, ValueError):
    """`config_paths` is not a list of file paths."""


class NoServerInstancesError(ConfigError, ValueError):
    """A deployment was asked to start but its config defines no server instance."""


class ConfigMissingValuesError(ConfigError, ValueError):
    """Mandatory values (`???`) were left unset."""


class ServerRefNotFoundError(ConfigError, ValueError):
    """A server reference or lookup names an instance that is not in the merged config."""


class InheritPathNotFoundError(ConfigError, ValueError):
    """A structural directive (`_inherit_from`, `_copy`, `_delete_key`) names a path that does not exist."""


class AlmostServerError(ConfigError, ValueError):
    """A top-level block is shaped like a server instance but does not validate as one."""


def first_line(error: Exception) -> str:
    """The first line of a library error's message, so that a config error stays one line."""
    return str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
