"""Servers, environments and benchmarks chosen by folder name (`--resources-server mcqa/flavor`), and the
listings of `gym list`.

A name is looked for in the current directory, the install root and every `--search-dir`; the same file
reached through two of them counts once, two different files are an error naming both.
"""

from __future__ import annotations

import difflib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from nemo_gym import PARENT_DIR, extra_roots
from nemo_gym.config.errors import ConfigError
from nemo_gym.config.server_kinds import AGENT, ENVIRONMENT, MODEL, RESOURCES, SERVER_KINDS

# Where a kind's configs live inside its folder, and which file a name without flavor means.
CONFIGS_BELOW = {
    **{kind.key: "configs" for kind in SERVER_KINDS},
    "environments": ".",
    "benchmarks": ".",
}
LISTED_KINDS = {
    "environments": (RESOURCES.key, "environments"),
    AGENT.listing: (AGENT.key,),
    MODEL.listing: (MODEL.key,),
    "benchmarks": ("benchmarks",),
    **{kind.listing: (kind.key,) for kind in (RESOURCES, ENVIRONMENT)},
}


def default_roots() -> list[Path]:
    """The roots every command searches without --search-dir or NEMO_GYM_EXTRA_ROOTS."""
    return [Path.cwd(), PARENT_DIR]


def search_roots(search_dirs: Sequence[str | Path] = ()) -> list[Path]:
    """The folders names are looked up in, first match first, each once."""
    roots = [*default_roots(), *(Path(folder).expanduser() for folder in search_dirs), *extra_roots()]
    return list({root.resolve(): root for root in roots}.values())


def _default_config_name(kind: str, name: str) -> str:
    return name if CONFIGS_BELOW[kind] == "configs" else "config"


def selected_config(kind: str, spec: str, search_dirs: Sequence[str | Path] = ()) -> Path:
    """The config file that `NAME[/FLAVOR]` of `kind` stands for."""
    name, _, flavor = spec.partition("/")
    below = Path(kind) / name / CONFIGS_BELOW[kind]
    relatives = [below / f"{flavor or _default_config_name(kind, name)}.yaml"]
    if flavor and CONFIGS_BELOW[kind] == ".":  # a version folder: benchmarks/livecodebench/v6_2408_2505/
        relatives.append(below / flavor / "config.yaml")
    found = {
        (root / relative).resolve(): root / relative
        for root in search_roots(search_dirs)
        for relative in relatives
        if (root / relative).is_file()
    }
    if len(found) > 1:
        raise ConfigError(
            f"'{spec}' is ambiguous: {' and '.join(map(str, found.values()))}; remove a --search-dir"
        )
    if found:
        return next(iter(found))
    raise ConfigError(_not_found_message(kind, name, flavor, search_dirs))


def _not_found_message(kind: str, name: str, flavor: str, search_dirs: Sequence[str | Path]) -> str:
    versions = sorted(
        {
            f"{name}/{path.parent.name}"
            for root in search_roots(search_dirs)
            for path in (root / kind / name).glob("*/config.yaml")
        }
    )
    # A folder of versions (benchmarks/livecodebench/) is named with one of them.
    if not flavor and versions and CONFIGS_BELOW[kind] == ".":
        return f"{kind}/{name} has versions, name one: {', '.join(versions)}"
    assets = {asset.name: asset for asset in discover(kind, search_dirs)}
    if name in assets:
        flavors = ", ".join(assets[name].configs) or "none"
        return f"{kind}/{name} has no config '{flavor}'; its configs: {flavors}"
    close = difflib.get_close_matches(name, list(assets), n=3, cutoff=0.6)
    hint = f"did you mean {', '.join(close)}?" if close else f"known: {', '.join(sorted(assets)) or 'none'}"
    return f"no {kind}/{name} in {', '.join(map(str, search_roots(search_dirs)))}; {hint}"


@dataclass(frozen=True)
class Asset:
    """A server folder, environment or benchmark that `gym list` shows."""

    name: str
    kind: str
    path: str
    configs: list[str]
    description: str

    def as_json(self) -> dict[str, object]:
        return {
            "name": self.name,
            "kind": self.kind,
            "path": self.path,
            "configs": self.configs,
            "description": self.description,
        }


def discover(kind: str, search_dirs: Sequence[str | Path] = ()) -> list[Asset]:
    """Every folder of `kind` that holds at least one config, by name (the first root wins)."""
    assets: dict[str, Asset] = {}
    for root in search_roots(search_dirs):
        for folder in sorted(path for path in (root / kind).glob("*") if path.is_dir()):
            configs = sorted(path.stem for path in (folder / CONFIGS_BELOW[kind]).glob("*.yaml"))
            if configs and folder.name not in assets:
                assets[folder.name] = Asset(folder.name, kind, str(folder), configs, _description(folder))
    return sorted(assets.values(), key=lambda asset: asset.name)


def listed(what: str, search_dirs: Sequence[str | Path] = ()) -> list[Asset]:
    """What `gym list <what>` shows: environments are resources servers (and any environments/ folder)."""
    return [asset for kind in LISTED_KINDS[what] for asset in discover(kind, search_dirs)]


def matching(assets: list[Asset], query: str) -> list[Asset]:
    """The assets whose name or description holds `query` (any case), else those whose name is close to it."""
    needle = query.lower()
    found = [asset for asset in assets if needle in asset.name.lower() or needle in asset.description.lower()]
    if found:
        return found
    close = set(difflib.get_close_matches(query, [asset.name for asset in assets], n=5, cutoff=0.6))
    return [asset for asset in assets if asset.name in close]


def _description(folder: Path) -> str:
    readme = folder / "README.md"
    return readme_description(readme.read_text(errors="replace")) if readme.is_file() else ""


def readme_description(text: str) -> str:
    """The first sentence-like line of a README (no heading, no badge, no code fence): what the catalog
    shows for the folder."""
    in_code = False
    for line in text.splitlines():
        text = line.strip()
        if text.startswith("```"):
            in_code = not in_code
        elif text and not in_code and not text.startswith(("#", "!", "[", "|", "<")):
            return text
    return ""
