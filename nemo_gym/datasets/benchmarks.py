"""The benchmark folders (`benchmarks/<name>/`): which agent runs which prepared dataset, and their manifest.

A benchmark folder holds `config.yaml` (an environment's config plus one agent instance with a
`type: benchmark` dataset, in NeMo Gym 0.7's keys), `prepare.py` (writes that dataset from the public
source), `manifest.yaml` (environment, source, split size, what it measures: the facts `gym list
benchmarks` shows beside the dataset entry's `license`) and tests; a flavor, `config_<flavor>.yaml` beside
config.yaml, is a benchmark of its own sharing the folder's manifest. Reading a folder parses only its own
YAML: no config is merged, nothing runs.
"""

from __future__ import annotations

import http.client
import importlib.util
import os
import shutil
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any, TypeVar

import orjson
import yaml
from pydantic import BaseModel, Field, ValidationError

from nemo_gym import PARENT_DIR, extra_roots
from nemo_gym.config import server_kinds
from nemo_gym.config.datasets import BenchmarkDatasetConfig
from nemo_gym.config.errors import ConfigError
from nemo_gym.config.jsonl import write_atomically
from nemo_gym.envkit.multiple_choice import multiple_choice_row  # noqa: F401  prepare scripts import it from here
from nemo_gym.http.client import RetryPolicy, parse_retry_after
from nemo_gym.wire.validation_errors import first_problem

BENCHMARKS_SUBDIR = "benchmarks"
MANIFEST_FILENAME = "manifest.yaml"
CONFIG_FILENAME = "config.yaml"
FLAVOR_CONFIG_GLOB = "config_*.yaml"


class SourceFacts(BaseModel):
    """What a benchmark folder and its flavors share: environment, public source, what it measures."""

    environment: str = Field(description="the resources server that scores it")
    measures: str = Field(description="what the benchmark measures, in one line")
    source: str = Field(description="where prepare.py fetches it (Hugging Face dataset id or URL)")
    split: str = Field(description="the split of the source that is prepared")


class FlavorFacts(BaseModel):
    """A flavor's own facts in its folder's manifest, where they differ from the folder's."""

    rows: int | None = Field(default=None, ge=1, description="how many tasks it prepares, when known")
    measures: str | None = Field(default=None, description="what it measures, if not the folder's line")


class FlavorManifest(SourceFacts):
    """A flavor's facts as listed: its folder's, with its own size (None when not known in advance, as for
    a flavor that drops rows over a token budget)."""

    rows: int | None = None


class BenchmarkManifest(SourceFacts):
    """The facts about a benchmark's public data that its config does not say."""

    rows: int = Field(ge=1, description="how many tasks the prepared split has")
    flavors: dict[str, FlavorFacts] = Field(
        default_factory=dict,
        description="facts of the flavor configs beside config.yaml, by file stem (`config_vision`)",
    )

    def for_flavor(self, flavor: str) -> FlavorManifest:
        """The facts listed for flavor `flavor` (its config's file stem): the folder's, less what differs."""
        facts = self.flavors.get(flavor, FlavorFacts())
        shared = self.model_dump(include=set(SourceFacts.model_fields))
        return FlavorManifest(**{**shared, "measures": facts.measures or self.measures, "rows": facts.rows})


class BenchmarkConfig(BaseModel):
    """One benchmark: its folder, the agent instance that runs it and its dataset entry."""

    name: str
    path: Path
    agent_name: str
    num_repeats: int
    dataset: BenchmarkDatasetConfig
    environment_server: str | None = None
    manifest: BenchmarkManifest | FlavorManifest | None = None
    flavor_of: str | None = Field(default=None, description="the folder whose config_<flavor>.yaml this is")

    def listing(self) -> dict[str, Any]:
        """The entry `gym list benchmarks --json` prints: a flavor names its folder (`flavor_of`), and a
        folder's manifest leaves its `flavors` out, each flavor having an entry of its own."""
        exclude: dict[str, Any] = {"manifest": {"flavors"}}
        if self.flavor_of is None:
            exclude["flavor_of"] = True
        return self.model_dump(mode="json", exclude=exclude)

    @classmethod
    def from_config_path(cls, config_path: Path, name: str | None = None) -> BenchmarkConfig:
        """The benchmark a `benchmarks/<name>/config.yaml` declares (named after its folder unless `name`
        says otherwise); a ConfigError names the file."""
        try:
            tree = yaml.safe_load(config_path.read_text())
        except (OSError, yaml.YAMLError) as error:
            raise ConfigError(f"{config_path}: cannot read the benchmark config ({error})") from None
        if not isinstance(tree, dict):
            raise ConfigError(f"{config_path}: a benchmark config is a mapping of server instances")
        return cls.from_initial_config_dict(tree, config_path.parent, name)

    @classmethod
    def from_initial_config_dict(
        cls, tree: dict[str, Any], folder: Path, name: str | None = None
    ) -> BenchmarkConfig:
        """The benchmark of an unmerged config: the one agent instance with a `type: benchmark` dataset."""
        found = list(_benchmark_datasets(tree))
        if len(found) != 1:
            raise ConfigError(
                f"{folder / CONFIG_FILENAME}: a benchmark config needs exactly one agent dataset with "
                f"`type: benchmark`, found {len(found)}"
            )
        agent_name, entry, environment_server = found[0]
        try:
            dataset = BenchmarkDatasetConfig.model_validate(entry)
        except ValidationError as error:
            raise ConfigError(
                f"{folder / CONFIG_FILENAME}: dataset of {agent_name}: {first_problem(error)}"
            ) from None
        return cls(
            name=name or folder.name,
            path=folder,
            agent_name=agent_name,
            num_repeats=dataset.num_repeats,
            dataset=dataset,
            environment_server=environment_server,
            manifest=read_manifest(folder),
        )


def read_manifest(folder: Path) -> BenchmarkManifest | None:
    """The folder's manifest, or None when it has none; an invalid one is a ConfigError naming the key."""
    path = folder / MANIFEST_FILENAME
    if not path.is_file():
        return None
    try:
        return BenchmarkManifest.model_validate(yaml.safe_load(path.read_text()))
    except yaml.YAMLError as error:
        raise ConfigError(f"{path}: not valid YAML ({error})") from None
    except ValidationError as error:
        raise ConfigError(f"{path}: {first_problem(error, root='the file')}") from None


def _benchmark_datasets(tree: dict[str, Any]):
    """(agent instance, dataset entry, environment server instance or None) for each benchmark dataset."""
    for instance, body in tree.items():
        agents = body.get(server_kinds.AGENT.key) if isinstance(body, dict) else None
        if not isinstance(agents, dict):
            continue
        for agent in agents.values():
            if not isinstance(agent, dict):
                continue
            environment = agent.get("environment_server")
            environment_name = environment.get("name") if isinstance(environment, dict) else None
            for entry in agent.get("datasets") or []:
                if isinstance(entry, dict) and entry.get("type") == "benchmark":
                    yield instance, entry, environment_name


def discover_benchmarks(roots: Sequence[Path] | None = None) -> list[BenchmarkConfig]:
    """Every `benchmarks/<name>/config.yaml` under `roots` (default: the current directory, the install
    root and NEMO_GYM_EXTRA_ROOTS), by name; the first root that has a name wins. A folder without a
    config of its own may hold versions one level down, each named `<name>/<version>` (as
    `livecodebench/v6_2408_2505`, which `--benchmark` takes as well)."""
    found: dict[str, BenchmarkConfig] = {}
    for root in roots if roots is not None else [Path.cwd(), PARENT_DIR, *extra_roots()]:
        folder = root / BENCHMARKS_SUBDIR
        nested = [
            path
            for path in folder.glob(f"*/*/{CONFIG_FILENAME}")
            if not (path.parents[1] / CONFIG_FILENAME).is_file()
        ]
        for config_path in sorted([*folder.glob(f"*/{CONFIG_FILENAME}"), *nested]):
            name = config_path.parent.relative_to(folder).as_posix()
            if name not in found:
                found[name] = BenchmarkConfig.from_config_path(config_path, name)
    return sorted(found.values(), key=lambda benchmark: benchmark.name)


def benchmark_flavors(benchmark: BenchmarkConfig) -> list[BenchmarkConfig]:
    """The flavors of a benchmark folder: NeMo Gym 0.7's `config_<flavor>.yaml` beside its config.yaml,
    each named as `--benchmark` selects it (`mrcr/config_n3_128k`), with the folder's manifest facts and
    the size its manifest's `flavors` records. A version folder (`livecodebench/v6_2408_2505`) has none."""
    if "/" in benchmark.name:
        return []
    flavors = []
    for config_path in sorted(benchmark.path.glob(FLAVOR_CONFIG_GLOB)):
        flavor = BenchmarkConfig.from_config_path(config_path, f"{benchmark.name}/{config_path.stem}")
        manifest = benchmark.manifest.for_flavor(config_path.stem) if benchmark.manifest else None
        flavors.append(flavor.model_copy(update={"manifest": manifest, "flavor_of": benchmark.name}))
    return flavors


def load_folder_module(path: Path) -> ModuleType:
    """Import a Python file of a benchmark folder by its path: the prepare scripts of a benchmark's
    versions (`benchmarks/<name>/<version>/prepare.py`) share the code of `benchmarks/<name>/`, which is
    not an importable package."""
    spec = importlib.util.spec_from_file_location(f"gym_benchmark_{path.parent.name}_{path.stem}", path)
    if spec is None or spec.loader is None:
        raise ConfigError(f"{path}: not a Python file")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def load_public_split(repo_id: str, split: str, **options: Any) -> list[dict[str, Any]]:
    """The rows of a Hugging Face dataset split (HF_ENDPOINT / HF_TOKEN / HF_HOME apply, as for any client;
    its requests have the client's deadlines and bounded retries). A failure is one line naming the data
    set: a missing or gated repository, a wrong split, no network.
    """
    datasets = _datasets_library()
    try:
        return list(datasets.load_dataset(repo_id, split=split, **options))
    except Exception as error:  # the library's many error types all mean "could not fetch it"
        raise _fetch_failure(f"{repo_id} (split {split})", error) from None


def load_public_audio_split(
    repo_id: str, split: str, audio_column: str = "audio", **options: Any
) -> Iterable[dict[str, Any]]:
    """`load_public_split` for a speech data set, read lazily from the client's cache (an audio split can
    outgrow memory), each clip left as the source's encoded file, `{"bytes", "path"}`: decoding it would
    need torchcodec and FFmpeg, and a task row carries the file, not samples."""
    datasets = _datasets_library()
    try:
        table = datasets.load_dataset(repo_id, split=split, **options)
        return table.cast_column(audio_column, datasets.Audio(decode=False))
    except Exception as error:  # as in load_public_split
        raise _fetch_failure(f"{repo_id} (split {split})", error) from None


def public_subsets(repo_id: str) -> list[str]:
    """The names of a Hugging Face data set's subsets (its configs), for a source that keeps one subject or
    language per subset; failures are one line, as for `load_public_split`."""
    datasets = _datasets_library()
    try:
        return list(datasets.get_dataset_config_names(repo_id))
    except Exception as error:  # as above: any of them means "could not fetch it"
        raise _fetch_failure(f"the subsets of {repo_id}", error) from None


def subset_rows(
    repo_id: str, split: str, subsets: Iterable[str] | None = None
) -> list[tuple[str, dict[str, Any]]]:
    """(subset, row) for every row of `split` in each of `subsets` (default: all of the data set's, in the
    Hub's order), for a source that keeps one language or subject per subset and whose tasks name it."""
    names = public_subsets(repo_id) if subsets is None else subsets
    return [(name, row) for name in names for row in load_public_split(repo_id, split, name=name)]


MIRROR_ENV = "NEMO_GYM_BENCHMARK_MIRROR"
FETCH_DEADLINE_S = 60.0
FETCH_ATTEMPTS = 3
# The HTTP client's attempt schedule (backoff about 2 s, then 4 s); FETCH_DEADLINE_S bounds each attempt.
FETCH_SCHEDULE = RetryPolicy(max_attempts=FETCH_ATTEMPTS, backoff_base_s=2.0, backoff_max_s=4.0)
DOWNLOAD_CHUNK_BYTES = 1 << 20
T = TypeVar("T")


def fetch_public_file(url: str) -> bytes:
    """The bytes of a benchmark's public file outside the Hugging Face Hub (a CSV or JSONL on GitHub), with
    a deadline per attempt and bounded retries; a failure is one line naming the URL. With
    NEMO_GYM_BENCHMARK_MIRROR set (a site without Internet access, a test), `https://host/path` is fetched
    from `<mirror>/host/path` instead."""
    return _fetched(url, lambda answer: answer.read())


def save_public_file(url: str, target: Path) -> Path:
    """`fetch_public_file` for an archive too large to hold in memory: streamed into `target` (written under
    another name first, so an interrupted download never looks complete). Returns `target`."""

    def stream(answer: Any) -> Path:
        target.parent.mkdir(parents=True, exist_ok=True)
        partial = target.with_name(f"{target.name}.partial")
        try:
            with partial.open("wb") as out:
                shutil.copyfileobj(answer, out, DOWNLOAD_CHUNK_BYTES)
        except BaseException:
            partial.unlink(missing_ok=True)
            raise
        partial.replace(target)
        return target

    return _fetched(url, stream)


def _fetched(url: str, read: Callable[[Any], T]) -> T:
    """`read(answer)` of the first attempt at `url` (or its mirror) that answers, within the deadlines."""
    mirror = os.environ.get(MIRROR_ENV)
    parsed = urllib.parse.urlsplit(url)
    fetched_url = f"{mirror.rstrip('/')}/{parsed.netloc}{parsed.path}" if mirror else url
    attempts = 0
    while True:
        attempts += 1
        retry_after = None
        try:
            with urllib.request.urlopen(fetched_url, timeout=FETCH_DEADLINE_S) as answer:
                return read(answer)
        except urllib.error.HTTPError as error:
            failure: Exception = error
            if error.code < 500 and error.code != 429:
                break
            retry_after = parse_retry_after(error.headers.get("Retry-After"))
        except (OSError, ValueError, http.client.HTTPException) as error:  # a cut answer, too
            failure = error
        delay = FETCH_SCHEDULE.next_delay(attempts, retry_after)
        if delay is None:
            break
        time.sleep(delay)
    raise ConfigError(f"could not fetch {fetched_url}: {failure}")


def _datasets_library() -> Any:
    """`datasets`, imported here so that nothing but a prepare script pays for it."""
    try:
        import datasets
    except ImportError:
        raise ConfigError(
            "preparing a benchmark needs `datasets`: pip install 'nemo-gym[benchmarks]'"
        ) from None
    return datasets


def _hub_library() -> Any:
    """`huggingface_hub`, imported here so that nothing but a prepare script pays for it."""
    try:
        import huggingface_hub
    except ImportError:
        raise ConfigError(
            "preparing a benchmark needs `huggingface_hub`: pip install 'nemo-gym[benchmarks]'"
        ) from None
    return huggingface_hub


def _fetch_failure(what: str, error: Exception) -> ConfigError:
    reason = (str(error).strip().splitlines() or [""])[0]
    return ConfigError(
        f"could not fetch {what} from the Hugging Face Hub: {type(error).__name__}: {reason} (a gated data "
        "set needs HF_TOKEN of an account that accepted its terms)"
    )


def load_public_file(
    repo_id: str, filename: str, revision: str | None = None, repo_type: str = "dataset"
) -> Path:
    """One file of a Hugging Face dataset repository (at `revision`, default its main branch), downloaded
    into the client's cache, for a source that is a plain file rather than a table `datasets` reads
    (`repo_type="model"`: a model repository's). Failures are one line, as for `load_public_split`."""
    hub = _hub_library()
    try:
        return Path(hub.hf_hub_download(repo_id, filename, repo_type=repo_type, revision=revision))
    except Exception as error:  # the client's many error types all mean "could not fetch it"
        raise _fetch_failure(f"{filename} of {repo_id}", error) from None


def load_public_tokenizer(repo_id: str, revision: str | None = None) -> Any:
    """The `tokenizers.Tokenizer` of a Hub model (its `tokenizer.json`), for a prepare script that drops
    rows longer than some number of that model's tokens, as the benchmark's authors did."""
    try:
        from tokenizers import Tokenizer
    except ImportError:
        raise ConfigError(
            "preparing this benchmark needs `tokenizers`: pip install 'nemo-gym[benchmarks]'"
        ) from None
    path = load_public_file(repo_id, "tokenizer.json", revision, repo_type="model")
    try:
        return Tokenizer.from_file(str(path))
    except Exception as error:  # the Rust library raises its own exception type for a bad file
        raise ConfigError(f"tokenizer.json of {repo_id}: not a tokenizer file ({error})") from None


def rows_within_token_budget(
    rows: Iterable[dict[str, Any]],
    texts_of: Callable[[dict[str, Any]], list[str]],
    tokenizer_repo: str,
    max_tokens: int,
    count_key: str,
) -> list[dict[str, Any]]:
    """`rows`, each with its token count under `count_key`, less those over `max_tokens`: for a benchmark
    flavor sized to a model's context window. A row's count is the sum over `texts_of(row)` (a conversation
    counts message by message) in `tokenizer_repo`'s tokens, without the special tokens a model's template
    adds. One row is encoded at a time, so that a million-token input never holds its tokens for long."""
    tokenizer = load_public_tokenizer(tokenizer_repo)
    kept = []
    dropped = 0
    for row in rows:
        encodings = tokenizer.encode_batch(texts_of(row), add_special_tokens=False)
        count = sum(len(encoding.ids) for encoding in encodings)
        if count > max_tokens:
            dropped += 1
        else:
            kept.append({**row, count_key: count})
    print(f"Dropped {dropped} rows over {max_tokens} tokens of {tokenizer_repo}")
    return kept


def flavor_rows_within_token_budget(
    folder: Path, tokenizer_repo: str, max_tokens: int, count_key: str = "n_tokens"
) -> list[dict[str, Any]]:
    """A context-window flavor's rows (`config_n3_1m.yaml`, ...): those of the benchmark folder's own
    `prepare.py` (its `tasks()`, counted by its `counted_texts(task)`) within `max_tokens`, as
    `rows_within_token_budget` keeps them."""
    default = load_folder_module(folder / "prepare.py")
    return rows_within_token_budget(
        default.tasks(), default.counted_texts, tokenizer_repo, max_tokens, count_key
    )


def load_public_snapshot(repo_id: str, patterns: Sequence[str]) -> Path:
    """The files of a Hugging Face dataset repository that match `patterns` (globs), downloaded in parallel
    into the client's cache; the folder holding them. For a source whose rows point at files (an audio
    folder of WAVs and a metadata.jsonl, which `datasets` could only load by decoding every clip).
    Failures are one line, as for `load_public_split`."""
    hub = _hub_library()
    try:
        return Path(hub.snapshot_download(repo_id, repo_type="dataset", allow_patterns=list(patterns)))
    except Exception as error:  # the client's many error types all mean "could not fetch it"
        raise _fetch_failure(f"{', '.join(patterns)} of {repo_id}", error) from None


def problem_answer_tasks(repo_id: str, split: str = "train") -> list[dict[str, Any]]:
    """math_with_judge tasks from a source whose rows have `problem` and `answer` (the AIME and HMMT sets
    on the Hub): the problem as `question`, the answer as a string `expected_answer`."""
    return [
        {"question": row["problem"], "expected_answer": str(row["answer"])}
        for row in load_public_split(repo_id, split)
    ]


def write_prepared_rows(output_fpath: Path, rows: Iterable[dict[str, Any]]) -> Path:
    """Write a benchmark's task rows to `output_fpath` at once (a crash leaves the old file) and return the
    path, as a prepare script's `prepare()` must. `rows` may be a generator, written as it yields, for a
    benchmark larger than memory. No rows is an error: an empty benchmark scores nothing."""
    written = 0

    def lines() -> Iterator[bytes]:
        nonlocal written
        for row in rows:
            written += 1
            yield orjson.dumps(row) + b"\n"
        if not written:  # raised inside the write, so the old file stays
            raise ConfigError(f"{output_fpath}: the source has no rows; nothing was written")

    output_fpath.parent.mkdir(parents=True, exist_ok=True)
    write_atomically(output_fpath, lines())
    print(f"Wrote {written} tasks to {output_fpath}")
    return output_fpath
