"""Reading config sources: YAML files, env.yaml and the `config_paths` work list, merged in precedence order.

Relative paths are tried in the folders of NEMO_GYM_EXTRA_ROOTS first, then in the current directory, then
in the install root (the directory holding the `nemo_gym` package), where the shipped configs live. A config
path NeMo Gym 0.7 renamed still loads its new file, with a warning.
"""

from __future__ import annotations

import difflib
import logging
from collections.abc import Sequence
from pathlib import Path

import yaml
from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException

from nemo_gym import extra_roots
from nemo_gym.config.errors import ConfigError, ConfigPathNotFoundError, MalformedConfigPathsError, first_line
from nemo_gym.config.legacy_names import LEGACY_CONFIG_PATHS

logger = logging.getLogger("nemo_gym.global_config")  # the name config warnings have always been logged under

CONFIG_PATHS_KEY = "config_paths"
ENV_YAML_FILENAME = "env.yaml"

INSTALL_ROOT = Path(__file__).resolve().parents[2]


def install_root() -> Path:
    """The directory holding the `nemo_gym` package: the second place relative config paths are tried."""
    return INSTALL_ROOT


def load_yaml_file(path: Path) -> DictConfig:
    """A YAML file as a DictConfig; syntax errors are reported as `file:line:column: problem`."""
    try:
        text = path.read_text()
    except FileNotFoundError as error:
        raise ConfigPathNotFoundError(f"Config file {path} does not exist") from error
    except UnicodeDecodeError as error:
        raise ConfigError(f"{path}: not UTF-8 text (byte {error.start}); save the file as UTF-8") from error
    except OSError as error:
        raise ConfigError(f"Cannot read config file {path}: {error.strerror}") from error
    return mapping_from_yaml_text(text, str(path))


def mapping_from_yaml_text(text: str, source: str) -> DictConfig:
    try:
        config = OmegaConf.create(text) if text.strip() else OmegaConf.create({})
    except yaml.MarkedYAMLError as error:
        raise ConfigError(_yaml_error_message(error, source)) from error
    except yaml.YAMLError as error:
        raise ConfigError(f"{source}: {error}") from error
    except RecursionError as error:
        raise ConfigError(f"{source}: a YAML alias refers to a node that contains it") from error
    except OmegaConfBaseException as error:
        key = getattr(error, "full_key", None)
        where = f" at '{key}'" if key else ""
        raise ConfigError(f"{source}{where}: {first_line(error)}") from error
    if not isinstance(config, DictConfig):
        raise ConfigError(f"{source}: the top level must be a mapping of keys to values, not a list")
    return config


def _yaml_error_message(error: yaml.MarkedYAMLError, source: str) -> str:
    mark = error.problem_mark or error.context_mark
    location = f"{source}:{mark.line + 1}:{mark.column + 1}" if mark else source
    context = f" ({error.context})" if error.context else ""
    return f"{location}: {error.problem or 'invalid YAML'}{context}"


def load_env_yaml(cwd: Path, root: Path) -> DictConfig:
    """The first env.yaml of the NEMO_GYM_EXTRA_ROOTS folders, the current directory and the install root;
    else nothing."""
    for candidate in (folder / ENV_YAML_FILENAME for folder in (*extra_roots(), cwd, root)):
        if candidate.is_file():
            return load_yaml_file(candidate)
    return OmegaConf.create({})


def config_paths_in(config: DictConfig, where: str = "the command line or env.yaml") -> list[str]:
    """The `config_paths` of `config`, which must be a list of strings."""
    value = OmegaConf.to_container(config, resolve=False).get(CONFIG_PATHS_KEY)
    if value is None:
        return []
    if isinstance(value, str):
        raise MalformedConfigPathsError(
            f"config_paths in {where} must be a list, got the string '{value}'; write +config_paths=[{value}]"
        )
    if not isinstance(value, list) or not all(isinstance(entry, str) and entry for entry in value):
        raise MalformedConfigPathsError(
            f"config_paths in {where} must be a list of file paths, e.g. +config_paths=[a.yaml,b.yaml]; "
            f"got {value!r}"
        )
    return value


def load_config_files(
    config_paths: list[str], cwd: Path, root: Path
) -> tuple[list[tuple[str, DictConfig]], list[str]]:
    """Every config file reachable from `config_paths` in merge order (lowest precedence first), and their
    paths as given, in discovery order.

    Discovery is NeMo Gym's: a work list seeded with `config_paths`, to whose end each loaded file's own
    `config_paths` are appended; a file reached a second time is skipped with a warning. The merge order is
    NeMo Gym 0.7's post-order: a file comes after everything it pulled in, so an includer overrides what
    it includes at any depth, and sibling subtrees keep their listed order (a later sibling and its
    includes override an earlier one).
    """
    loaded: list[tuple[str, DictConfig]] = []
    loaded_entries: list[str] = []
    included: dict[int | None, list[int]] = {}  # file (None: the top list) -> the files it pulled in first
    index_of: dict[Path, int] = {}
    work_list: list[tuple[str, Path | None]] = [(entry, None) for entry in config_paths]
    for entry, listed_in in work_list:  # grows while it is walked
        path = _locate_config_file(entry, cwd, root, listed_in)
        if path in index_of:
            logger.warning("Config file %s is listed more than once in config_paths; loaded once", entry)
            continue
        index_of[path] = len(loaded)
        included.setdefault(index_of[listed_in] if listed_in else None, []).append(index_of[path])
        config = load_yaml_file(path)
        work_list.extend((child, path) for child in config_paths_in(config, str(path)))
        loaded.append((str(path), config))
        loaded_entries.append(entry)
    merge_order: list[int] = []

    def after_its_includes(index: int) -> None:
        for child in included.get(index, []):
            after_its_includes(child)
        merge_order.append(index)

    for top in included.get(None, []):
        after_its_includes(top)
    return [loaded[index] for index in merge_order], loaded_entries


def _locate_config_file(entry: str, cwd: Path, root: Path, listed_in: Path | None) -> Path:
    listed = f" (listed in config_paths of {listed_in})" if listed_in else ""
    try:
        return located_file(entry, cwd, root, f"Config file '{entry}'{listed}", extra_roots()).resolve()
    except ConfigPathNotFoundError:
        renamed = LEGACY_CONFIG_PATHS.get(Path(entry).as_posix())
        if renamed is None:
            raise
        try:
            path = located_file(renamed, cwd, root, renamed, extra_roots()).resolve()
        except ConfigPathNotFoundError:
            raise ConfigPathNotFoundError(
                f"Config file '{entry}'{listed} was renamed to '{renamed}' in NeMo Gym 0.7; neither is here"
            ) from None
    logger.warning(
        "Config file %s was renamed to %s in NeMo Gym 0.7; loading that (update the config)", entry, renamed
    )
    return path


def located_file(entry: str, cwd: Path, root: Path, what: str, first_roots: Sequence[Path] = ()) -> Path:
    """`entry` itself if absolute, else the first of `<first_roots>/entry`, `cwd/entry` and `root/entry` that
    is a file; else a ConfigPathNotFoundError saying `what` was not found, where it looked, and the nearest
    file there."""
    path = Path(entry).expanduser()
    folders = (*first_roots, cwd, root)
    candidates = (
        [path]
        if path.is_absolute()
        else list({str(p.resolve()): p for p in (folder / path for folder in folders)}.values())
    )
    for candidate in candidates:
        if candidate.is_file():
            return candidate
    tried = " and ".join(str(candidate) for candidate in candidates)
    raise ConfigPathNotFoundError(f"{what} not found; tried {tried}{_nearest_file_hint(entry, candidates)}")


def _nearest_file_hint(entry: str, candidates: list[Path]) -> str:
    for candidate in candidates:
        if candidate.parent.is_dir():
            names = [child.name for child in candidate.parent.iterdir() if child.is_file()]
            close = difflib.get_close_matches(candidate.name, names, n=1, cutoff=0.6)
            if close:
                return f"; did you mean '{str(Path(entry).with_name(close[0]))}'?"
    return ""


def merged(labelled_configs: list[tuple[str, DictConfig]]) -> DictConfig:
    """Merge left to right (later wins); a type clash names the source that caused it."""
    result = OmegaConf.create({})
    for label, config in labelled_configs:
        try:
            result = OmegaConf.merge(result, config)
        except OmegaConfBaseException as error:
            raise ConfigError(f"Cannot merge {label} into the config: {first_line(error)}") from error
    return result
