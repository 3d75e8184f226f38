"""The check each benchmark folder's test runs (`benchmarks/<name>/tests/test_prepare.py`).

Its prepare script fetches a handful of rows, made by the test in the upstream data set's own layout, from
the local Hugging Face Hub of tests/fake_hf_hub.py through the real `datasets` / `huggingface_hub` client
(`gym eval prepare`, run twice: the second run must fetch nothing). Then, with that hub stopped, the
prepared rows go through `gym eval run --benchmark NAME --model-type replay_model`: recorded replies answer
every task right but the last, and the environment's scores and headline metrics must say so.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Callable, Iterable, Sequence
from contextlib import ExitStack
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import orjson
import pytest
import requests

from nemo_gym.benchmarks import BENCHMARKS_SUBDIR, MIRROR_ENV, BenchmarkConfig
from nemo_gym.testing import message_item, read_jsonl, response_with, run_server
from tests.helpers import REPO_ROOT, run_gym

TOKEN = "hf_benchmark_tests_secret"
COMMAND_DEADLINE_S = 600


def jsonl_bytes(rows: Iterable[dict]) -> bytes:
    """`rows` as a JSON-lines file."""
    return b"".join(orjson.dumps(row) + b"\n" for row in rows)


def hub_files_from_rows(path: str, rows: list[dict]) -> dict[str, bytes]:
    """One JSON-lines data file of `rows` at `path` in the data set's repository."""
    return {path: jsonl_bytes(rows)}


def csv_file(columns: Sequence[str], rows: Iterable[Sequence[Any]]) -> bytes:
    """A CSV file of `rows` under the header `columns`, for a source that publishes one."""
    table = io.StringIO()
    csv.writer(table).writerows([columns, *rows])
    return table.getvalue().encode()


JudgeTurns = Callable[[dict, str], list[tuple[list[dict], str]]]


def check_benchmark(
    name: str,
    hub_files: dict[str, bytes],
    reply: Callable[[dict], str],
    wrong_reply: str,
    workdir: Path,
    headline: Callable[[dict[str, Any]], str] | None = None,
    hub_revision: str = "main",
    other_repos: Sequence[tuple[str, str, dict[str, bytes]]] = (),
    judge_turns: JudgeTurns | None = None,
    url_files: dict[str, bytes] | None = None,
    run_overrides: Sequence[str] = (),
    prepare_args: Sequence[str] = (),
) -> list[dict]:
    """Prepare benchmark `name` (or a flavor of one, `<name>/config_<flavor>`) from `hub_files`, run it
    offline and return the prepared rows.

    `reply` is a right answer to a prepared row, `wrong_reply` one the environment must score 0.
    `headline`, for an environment whose headline is neither pass@1 nor the mean reward (a corpus BLEU,
    say), asserts the run's key metrics and returns the headline's name, which the run must print.
    `hub_revision` is the branch or `refs/pr/N` the files are stored on, for a script that pins one;
    `other_repos` are (repository, revision, files) of the further data sets a script joins in. An
    environment that asks a judge model (the policy model, replayed too) needs `judge_turns`: for a task
    row (its prompt applied) and a reply, the judge requests' `input` items its verify sends, each with
    the judge's answer to record. A benchmark whose data are files on the web (`fetch_public_file`) gets
    them from `url_files` (URL -> content), served by tests/public_files.py as its mirror. `run_overrides`
    are added to `gym eval run` (a server key that names a path the prepare script wrote below `workdir`),
    `prepare_args` to `gym eval prepare` (`+prepare_script_args.length=512`, a small context for a test).
    """
    config_path = REPO_ROOT / BENCHMARKS_SUBDIR / name / "config.yaml"
    if not config_path.is_file():  # a flavor: `mrcr/config_n3_128k` is benchmarks/mrcr/config_n3_128k.yaml
        config_path = config_path.parent.with_suffix(".yaml")
    benchmark = BenchmarkConfig.from_config_path(config_path, name)
    assert benchmark.manifest is not None, f"{name}: manifest.yaml is missing"
    assert benchmark.dataset.license, f"{name}: the dataset entry records no license"
    with ExitStack() as servers:
        hub = servers.enter_context(run_server(["-m", "tests.fake_hf_hub", "--token", TOKEN], workdir))
        mirror = (
            servers.enter_context(run_server(["-m", "tests.public_files"], workdir)) if url_files else None
        )
        for url, content in (url_files or {}).items():
            parts = urlsplit(url)
            requests.put(f"{mirror.url}/_files", params={"path": parts.netloc + parts.path}, data=content,
                         timeout=30).raise_for_status()  # fmt: skip
        for repo, revision, files in [(benchmark.manifest.source, hub_revision, hub_files), *other_repos]:
            for path, content in files.items():
                stored = requests.put(
                    f"{hub.url}/_files/{repo}",
                    params={"path": path, "ref": revision},
                    data=content,
                    timeout=30,
                )
                stored.raise_for_status()
        env = {
            "HF_ENDPOINT": hub.url,
            "HF_HOME": str(workdir / "hf-home"),
            "HF_TOKEN": TOKEN,
            "HF_HUB_DISABLE_TELEMETRY": "1",
            **({MIRROR_ENV: mirror.url} if mirror else {}),
        }
        sources = [server for server in (hub, mirror) if server is not None]
        first = run_gym(
            "eval",
            "prepare",
            "--benchmark",
            name,
            *prepare_args,
            cwd=workdir,
            env=env,
            timeout=COMMAND_DEADLINE_S,
        )
        assert first.returncode == 0, first.stdout + first.stderr
        fetched = [requests.get(f"{server.url}/_requests", timeout=30).json() for server in sources]
        assert any(fetched), "the prepare script fetched nothing from the hub (or the file host)"
        cached = ("eval", "prepare", "--benchmark", name, "+use_cached_prepared_benchmarks=true")
        again = run_gym(*cached, cwd=workdir, env=env, timeout=COMMAND_DEADLINE_S)
        assert again.returncode == 0, again.stderr
        assert "already prepared" in again.stdout
        assert [
            requests.get(f"{server.url}/_requests", timeout=30).json() for server in sources
        ] == fetched, "the second run downloaded"
    prepared = workdir / benchmark.dataset.jsonl_fpath
    rows = read_jsonl(prepared)
    replies = [reply(row) for row in rows[:-1]] + [wrong_reply]
    _record_replies(benchmark, prepared, replies, workdir, judge_turns)
    offline = {"HF_ENDPOINT": "http://127.0.0.1:9", "HF_HUB_OFFLINE": "1"}
    run = run_gym(
        "eval",
        "run",
        "--benchmark",
        name,
        "--model-type",
        "replay_model",
        "--replay",
        str(workdir / "recorded.jsonl"),
        "-o",
        "results/rollouts.jsonl",
        *run_overrides,
        cwd=workdir,
        env=offline,
        timeout=COMMAND_DEADLINE_S,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    rewards: dict[int, list[float]] = {}
    for result in read_jsonl(workdir / "results" / "rollouts.jsonl"):
        rewards.setdefault(result["_ng_task_index"], []).append(result["reward"])
    expected = [1.0] * (len(rows) - 1) + [0.0]
    # approx: a BLEU of 100 is 100.00000000000004
    assert [rewards[index] for index in sorted(rewards)] == [
        pytest.approx([score] * benchmark.num_repeats) for score in expected
    ]
    # The headline is the environment's key metrics, printed and stored: pass@1 (averaged over the repeats,
    # in percent), or the mean reward (a fraction) of an environment that reports no pass@k, or the
    # accuracy (a fraction) of one that reports neither (a judged environment such as longmemeval).
    (aggregate,) = orjson.loads((workdir / "results" / "rollouts_aggregate_metrics.json").read_bytes())
    key_metrics = aggregate["key_metrics"]
    if headline is not None:
        headline_name = headline(key_metrics)
    else:
        fraction_key = "mean/reward" if "mean/reward" in key_metrics else "accuracy"
        pass_at_1 = {key: value for key, value in key_metrics.items() if key.startswith("pass@1")} or {
            fraction_key: 100.0 * key_metrics[fraction_key]
        }
        right = 100.0 * (len(rows) - 1) / len(rows)
        assert any(abs(value - right) < 0.01 for value in pass_at_1.values()), key_metrics
        headline_name = next(iter(pass_at_1))
    assert f"{benchmark.agent_name}: " in run.stdout and headline_name in run.stdout
    return rows


def _record_replies(
    benchmark: BenchmarkConfig,
    prepared: Path,
    replies: list[str],
    workdir: Path,
    judge_turns: JudgeTurns | None,
) -> None:
    """`recorded.jsonl`: each prepared task, with the benchmark's prompt applied, answered by its reply
    (and the judge's requests about that reply by the judge's answers)."""
    tasks = prepared
    if benchmark.dataset.prompt_config is not None:
        tasks = workdir / "rendered.jsonl"
        rendered = run_gym(
            "dataset",
            "render",
            "-i",
            str(prepared),
            "--prompt-config",
            str(benchmark.dataset.prompt_config),
            "-o",
            str(tasks),
            cwd=workdir,
            env={},
            timeout=COMMAND_DEADLINE_S,
        )
        assert rendered.returncode == 0, rendered.stderr
    recorded = []
    for row, text in zip(read_jsonl(tasks), replies, strict=True):
        turns = [(row["responses_create_params"], text)]
        turns += [
            ({"input": items}, answer) for items, answer in (judge_turns(row, text) if judge_turns else [])
        ]
        recorded += [
            {"responses_create_params": params, "response": response_with(message_item(answer))}
            for params, answer in turns
        ]
    (workdir / "recorded.jsonl").write_bytes(b"".join(orjson.dumps(record) + b"\n" for record in recorded))


def word_tokenizer_json(punctuation_apart: bool = True, start_token: str | None = None) -> bytes:
    """A tokenizer.json (of the `tokenizers` library) whose tokens are the words and punctuation runs of a
    text (or, with `punctuation_apart` false, its whitespace-separated pieces), for a prepare script that
    measures rows with a model's tokenizer (ruler, ruler2, the proof judge benchmarks, the long-context
    flavors). With `start_token`, encoding with special tokens puts it first, as many models' do."""
    from tokenizers import Tokenizer, models, pre_tokenizers, processors

    vocab = {"[UNK]": 0, **({start_token: 1} if start_token else {})}
    tokenizer = Tokenizer(models.WordLevel(vocab=vocab, unk_token="[UNK]"))
    tokenizer.pre_tokenizer = (
        pre_tokenizers.Whitespace() if punctuation_apart else pre_tokenizers.WhitespaceSplit()
    )
    if start_token:
        tokenizer.post_processor = processors.TemplateProcessing(
            single=f"{start_token} $A", special_tokens=[(start_token, 1)]
        )
    return tokenizer.to_str().encode()


def dataset_card(*subsets: tuple[str, str, str]) -> dict[str, bytes]:
    """A README.md whose YAML header declares named subsets (name, split, data file pattern), as the Hub
    data sets that `load_dataset(repo, name)` reads do; the splits of one name make one subset."""
    splits: dict[str, str] = {}
    for name, split, pattern in subsets:
        splits[name] = splits.get(name, "") + f"  - split: {split}\n    path: {pattern}\n"
    configs = "".join(f"- config_name: {name}\n  data_files:\n{entries}" for name, entries in splits.items())
    return {"README.md": f"---\nconfigs:\n{configs}---\n".encode()}


def subset_hub_files(rows_by_subset: dict[str, list[dict]], split: str = "test") -> dict[str, bytes]:
    """A data set that keeps each subset (a language, a subject) in its own config: subset NAME's `split`
    holds `rows_by_subset[NAME]`, and the card declares the subsets in the dict's order."""
    files = dataset_card(*((name, split, f"{name}/{split}.jsonl") for name in rows_by_subset))
    for name, rows in rows_by_subset.items():
        files |= hub_files_from_rows(f"{name}/{split}.jsonl", rows)
    return files


PROBLEM_ANSWER_ROWS = [
    {"problem_idx": 1, "problem": "Find the sum of 17 and 25.", "answer": 42},
    {"problem_idx": 2, "problem": "What is $\\frac{1}{2} + \\frac{1}{3}$?", "answer": "\\frac{5}{6}"},
    {"problem_idx": 3, "problem": "Compute $3^5 - 3$.", "answer": 240},
]


def check_problem_answer_benchmark(name: str, workdir: Path) -> None:
    """`check_benchmark` for a math_with_judge benchmark whose source rows are `problem` / `answer` (AIME,
    HMMT): the prepared rows must be exactly those rows as tasks."""
    files = hub_files_from_rows("data/train-00000-of-00001.jsonl", PROBLEM_ANSWER_ROWS)
    rows = check_benchmark(
        name,
        files,
        lambda row: f"So the answer is \\boxed{{{row['expected_answer']}}}.",
        "\\boxed{-7}",
        workdir,
    )
    assert rows == [
        {"question": source["problem"], "expected_answer": str(source["answer"])}
        for source in PROBLEM_ANSWER_ROWS
    ]
