"""ruler's prepare script against a local Hugging Face Hub (the tokenizer) and a local file host (RULER's
essay list, two essays, a SQuAD and a HotpotQA file made here), then its rows through `gym eval run`
offline."""

import json
import re
from pathlib import Path

import pytest

from nemo_gym.benchmarks import load_folder_module
from nemo_gym.config.errors import ConfigError
from tests.benchmark_checks import check_benchmark, word_tokenizer_json
from tests.helpers import REPO_ROOT, run_gym

FOLDER = REPO_ROOT / "benchmarks" / "ruler"
SOURCES = load_folder_module(FOLDER / "sources.py")
PREPARE = load_folder_module(FOLDER / "prepare.py")
TOKENIZER_REPO = "test-org/word-tokenizer"
LENGTH = 1024
ESSAYS = "https://github.com/gkamradt/LLMTest_NeedleInAHaystack/raw/main/needlehaystack/PaulGrahamEssays"
ESSAY_TEXTS = {
    f"{ESSAYS}/bees.txt": "Bees build combs in the hollow oak.  Every spring the swarm moves on.\n",
    f"{ESSAYS}/apples.txt": "Apples ripen late in the northern orchards. Pickers arrive in October!\n",
}
SQUAD = {"data": [{"title": "Lighthouses", "paragraphs": [
    {"context": "The lighthouse on Gull Point was restored by the engineer Marisol Vega.",
     "qas": [{"question": "Who restored the lighthouse on Gull Point?", "is_impossible": False,
              "answers": [{"text": "Marisol Vega"}, {"text": "the engineer Marisol Vega"}]},
             {"question": "Who painted the lighthouse?", "is_impossible": True, "answers": []}]},
    {"context": "The ferry between the islands runs twice a day in summer.", "qas": []},
]}]}  # fmt: skip
HOTPOTQA = [{"question": "In which year was the choir that Tomas Reed founded first heard on the radio?",
             "answer": "1931",
             "context": [["Harbor Choir", ["The Harbor Choir was founded by Tomas Reed.", " It sang on the radio in 1931."]],
                         ["Tomas Reed", ["Tomas Reed was an organist."]]]}]  # fmt: skip


def prepare_and_replay(benchmark: str, tmp_path: Path, *prepare_args: str, **options) -> list[dict]:
    """`benchmark` prepared from the sources made here (RULER's essay list naming one essay that is not
    served) and its rows replayed offline."""
    essay_list = "\n".join([*ESSAY_TEXTS, "http://www.paulgraham.com/notfetched.html"])
    url_files = {
        SOURCES.ESSAY_LIST_URL: essay_list.encode(),
        **{url: text.encode() for url, text in ESSAY_TEXTS.items()},
        SOURCES.SQUAD_URL: json.dumps(SQUAD).encode(),
        SOURCES.HOTPOTQA_URL: json.dumps(HOTPOTQA).encode(),
    }
    return check_benchmark(
        benchmark,
        {},
        lambda row: " ".join(row["outputs"]),
        "I cannot tell from these documents.",
        tmp_path,
        other_repos=[(TOKENIZER_REPO, "main", {"tokenizer.json": word_tokenizer_json()})],
        url_files=url_files,
        prepare_args=[
            f"+prepare_script_args.model={TOKENIZER_REPO}",
            f"+prepare_script_args.length={LENGTH}",
            "+prepare_script_args.samples_per_task=1",
            *prepare_args,
        ],
        **options,
    )


def test_prepares_the_thirteen_tasks_and_scores_them_offline(tmp_path: Path) -> None:
    rows = prepare_and_replay("ruler", tmp_path)
    assert [row["subset"] for row in rows] == list(PREPARE.TASK_NAMES)
    budget = LENGTH - PREPARE.TEMPLATE_TOKENS
    prompts = {row["subset"]: row["responses_create_params"]["input"][0]["content"] for row in rows}
    for row in rows:  # the largest haystack that fits the budget, measured with the served tokenizer
        assert 0.85 * budget < row["length"] <= budget, (row["subset"], row["length"])
        assert all(output in prompts[row["subset"]] for output in row["outputs"]) or row["subset"].startswith(
            "qa"
        )
    by_task = {row["subset"]: row["outputs"] for row in rows}
    assert "One of the special magic numbers for" in prompts["niah_single_1"]
    assert "What is the special magic number for" in prompts["niah_single_1"]
    assert "Bees build combs" in prompts["niah_single_2"] and "Apples ripen late" in prompts["niah_single_2"]
    assert len(by_task["niah_multivalue"]) == len(by_task["niah_multiquery"]) == 4
    assert "What are all the special magic numbers for" in prompts["niah_multiquery"]
    assert len(by_task["vt"]) == 5 and f"VAR {by_task['vt'][1]} = VAR {by_task['vt'][0]}" in prompts["vt"]
    assert len(by_task["cwe"]) == 10 and len(by_task["fwe"]) == 3
    assert by_task["qa_1"] == ["Marisol Vega", "the engineer Marisol Vega"]
    assert prompts["qa_1"].endswith("Question: Who restored the lighthouse on Gull Point?")
    assert "Document 1:\n" in prompts["qa_1"] and "ferry between the islands" in prompts["qa_1"]
    assert by_task["qa_2"] == ["1931"]
    assert (
        "Harbor Choir\nThe Harbor Choir was founded by Tomas Reed. It sang on the radio in 1931."
        in prompts["qa_2"]
    )


def test_without_a_tokenizer_and_length_it_says_what_to_add(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"\+prepare_script_args\.model=.* \+prepare_script_args\.length="):
        PREPARE.prepare(tmp_path / "ruler.jsonl")


def test_a_prepare_argument_the_script_does_not_take_is_one_line(tmp_path: Path) -> None:
    result = run_gym(
        "eval", "prepare", "--benchmark", "ruler", "+prepare_script_args.depth=3", cwd=tmp_path, env={}
    )
    assert result.returncode == 1
    assert "unexpected keyword argument 'depth'" in result.stderr + result.stdout
    assert "model, length, tasks, samples_per_task" in result.stderr + result.stdout
    assert "Traceback" not in result.stderr


def test_the_pretrain_flavor_ends_each_prompt_with_the_answer_prefix_and_scores_offline(
    tmp_path: Path,
) -> None:
    rows = prepare_and_replay(
        "ruler/config_pretrain",
        tmp_path,
        "+prepare_script_args.tasks=[niah_single_1,vt,qa_1]",
        # replay_model plays the turns in place of the vLLM the flavor would start
        run_overrides=["++policy_model.responses_api_models._delete_key=[local_vllm_model]"],
    )
    assert (tmp_path / "benchmarks" / "ruler" / "data" / "ruler_pretrain.jsonl").is_file()
    by_task = {row["subset"]: row["responses_create_params"] for row in rows}
    assert [params["max_output_tokens"] for params in by_task.values()] == [128, 30, 32]
    niah = by_task["niah_single_1"]["input"][0]["content"]
    # RULER's answer prefix follows the question directly (data_format `default`): the model continues it.
    assert re.search(
        r"in the provided text\?The special magic number for \S+ mentioned in the provided text is$", niah
    )
    qa = by_task["qa_1"]["input"][0]["content"]
    assert qa.endswith("Question: Who restored the lighthouse on Gull Point?Answer:")
