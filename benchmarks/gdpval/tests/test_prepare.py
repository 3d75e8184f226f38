"""gdpval's prepare script against a local Hugging Face Hub holding a few `openai/gdpval`-shaped rows made
here, then the rows through `gym eval run` offline with the judge's verdicts replayed: once with the reply's
text as the deliverable, once judging the files of a deliverables folder laid out as NeMo Gym 0.7's Stirrup
agent leaves it (`task_<id>/repeat_0/`)."""

from __future__ import annotations

import json
from pathlib import Path

import docx
import yaml

from nemo_gym.testing import read_jsonl
from resources_servers.gdpval.deliverables import Limits, read_deliverable
from resources_servers.gdpval.rubric import load_prompt, rubric_text
from tests.benchmark_checks import check_benchmark, hub_files_from_rows
from tests.helpers import REPO_ROOT, one_line_error, run_gym

SERVER_FOLDER = REPO_ROOT / "resources_servers" / "gdpval"
JUDGE_PROMPT = load_prompt(SERVER_FOLDER, "prompts/judge_prompt.txt")
# The judge is replayed like the policy: the environment asks the policy model, and the judge instance (an
# endpoint off this machine) is left out of the deployment.
JUDGE_IS_POLICY = [
    "++gdpval_resources_server.resources_servers.gdpval.judge_model_server.name=policy_model",
    "++_delete_key=gdpval_judge_model",
]
# The environment's bounds, for reading a folder as it does.
SERVER_CONFIG = yaml.safe_load((SERVER_FOLDER / "configs" / "gdpval.yaml").read_text())
BOUNDS = SERVER_CONFIG["gdpval"]["resources_servers"]["gdpval"]
LIMITS = Limits(
    max_files=BOUNDS["max_deliverable_files"],
    max_file_bytes=BOUNDS["max_deliverable_file_bytes"],
    max_unpacked_bytes=BOUNDS["max_unpacked_bytes"],
    max_chars=BOUNDS["max_deliverable_chars"],
)


def rubric(*criteria: str) -> str:
    """`rubric_json` as the Hub stores it: a JSON-encoded list of scored criteria."""
    return json.dumps(
        [{"rubric_item_id": f"r{i}", "score": 2, "criterion": c} for i, c in enumerate(criteria)]
    )


SOURCE_ROWS = [
    {
        "task_id": "a1b2",
        "sector": "Health Care and Social Assistance",
        "occupation": "Medical and Health Services Managers",
        "prompt": "Write a memo to clinic staff: Saturday hours become 9:00-13:00 from 1 March.",
        "reference_files": ["reference_files/f00d/rota.xlsx"],
        "reference_file_urls": ["https://huggingface.co/datasets/openai/gdpval/resolve/main/reference_files/f00d/rota.xlsx"],
        "reference_file_hf_uris": ["hf://datasets/openai/gdpval@main/reference_files/f00d/rota.xlsx"],
        "rubric_pretty": "[+2] States the new hours.\n[+2] States the start date.",
        "rubric_json": rubric("States the new hours 9:00-13:00.", "States the start date 1 March."),
    },
    {
        "task_id": "c3d4",
        "sector": "Finance and Insurance",
        "occupation": "Financial Managers",
        "prompt": "List the quarterly travel budget of a four-person team, Q1 to Q4, with a total.",
        "reference_files": [],
        "reference_file_urls": [],
        "reference_file_hf_uris": [],
        "rubric_pretty": "[+2] Has Q1 to Q4.",
        "rubric_json": rubric("Has one figure per quarter, Q1 to Q4.", "Has a total."),
    },
    {
        "task_id": "e5f6",
        "sector": "Retail Trade",
        "occupation": "First-Line Supervisors of Retail Sales Workers",
        "prompt": "Name two actions for next month's store huddle.",
        "reference_files": [],
        "reference_file_urls": [],
        "reference_file_hf_uris": [],
        "rubric_pretty": "[+2] Names two concrete actions.",
        "rubric_json": rubric("Names two concrete actions."),
    },
]  # fmt: skip
HUB_FILES = hub_files_from_rows("data/train-00000-of-00001.jsonl", SOURCE_ROWS)
WRONG = "I cannot help with that."


def verdict(row: dict, met: bool) -> str:
    """The judge's answer: every criterion of the row met, or none."""
    count = len(json.loads(row["rubric_json"]))
    scores = [{"criterion": number, "score": int(met)} for number in range(1, count + 1)]
    return json.dumps({"criteria_scores": scores, "overall_score": 1.0 if met else 0.0})


def judge_request(row: dict, deliverable: str) -> list[dict]:
    prompt = JUDGE_PROMPT.format(
        task_prompt=row["prompt"],
        rubric=rubric_text(row["rubric_json"], row["rubric_pretty"]),
        deliverable=deliverable,
    )
    return [{"role": "user", "content": prompt}]


def reply_judge(row: dict, reply: str) -> list[tuple[list[dict], str]]:
    return [(judge_request(row, reply), verdict(row, reply != WRONG))]


def test_the_reply_is_the_deliverable(tmp_path: Path) -> None:
    rows = check_benchmark("gdpval", HUB_FILES, lambda row: f"Deliverable for {row['task_id']}.", WRONG,
                           tmp_path, judge_turns=reply_judge, run_overrides=JUDGE_IS_POLICY)  # fmt: skip
    assert [row["task_id"] for row in rows] == ["a1b2", "c3d4", "e5f6"]
    assert all("deliverables_dir" not in row for row in rows)
    first = rows[0]
    assert (
        first["rubric_json"] == SOURCE_ROWS[0]["rubric_json"] and first["sector"] == SOURCE_ROWS[0]["sector"]
    )
    assert first["reference_file_urls"] == SOURCE_ROWS[0]["reference_file_urls"]
    (message,) = first["responses_create_params"]["input"]
    assert message["role"] == "user" and SOURCE_ROWS[0]["prompt"] in message["content"]
    assert "rota.xlsx" in message["content"] and "Medical and Health Services Managers" in message["content"]
    results = {r["task_id"]: r for r in read_jsonl(tmp_path / "results" / "rollouts.jsonl")}
    assert {task: r["deliverable_status"] for task, r in results.items()} == dict.fromkeys(
        results, "from_reply"
    )
    assert results["a1b2"]["judge_response"]["criteria_met"] == 2


def stirrup_folder(root: Path, task_id: str) -> Path:
    """A task's folder as a 0.7 Stirrup run leaves it, with its bookkeeping beside the deliverable."""
    folder = root / f"task_{task_id}" / "repeat_0"
    (folder / "reference_files").mkdir(parents=True)
    (folder / "reference_files" / "rota.csv").write_text("day,hours\nSat,9-17\n")
    (folder / "finish_params.json").write_text('{"reason": "done"}')
    (root / f"task_{task_id}" / "repeat_0_verify_response.json").write_text("{}")
    return folder


def test_the_files_of_a_deliverables_folder_are_judged(tmp_path: Path) -> None:
    deliverables = tmp_path / "stirrup_run"
    memo = docx.Document()
    memo.add_paragraph("To all clinic staff: from 1 March, Saturday hours are 9:00-13:00.")
    memo.save(stirrup_folder(deliverables, "a1b2") / "memo.docx")
    (stirrup_folder(deliverables, "c3d4") / "budget.txt").write_text(
        "Q1 1200\nQ2 900\nQ3 1500\nQ4 800\nTotal 4400\n"
    )
    (stirrup_folder(deliverables, "e5f6") / "actions.txt").write_text("Work harder.\n")
    seen: dict[str, str] = {}

    def folder_judge(row: dict, reply: str) -> list[tuple[list[dict], str]]:
        text = read_deliverable(Path(row["deliverables_dir"]), LIMITS).text
        seen[row["task_id"]] = text
        return [(judge_request(row, text), verdict(row, row["task_id"] != "e5f6"))]

    args = [f"+prepare_script_args.deliverables_dir={deliverables}"]
    rows = check_benchmark("gdpval", HUB_FILES, lambda row: "(not graded)", WRONG, tmp_path,
                           judge_turns=folder_judge, run_overrides=JUDGE_IS_POLICY, prepare_args=args)  # fmt: skip
    assert [row["deliverables_dir"] for row in rows] == [
        str(deliverables / f"task_{row['task_id']}" / "repeat_0") for row in rows
    ]
    # The docx's paragraph reached the judge; Stirrup's bookkeeping and reference files did not.
    assert "Saturday hours are 9:00-13:00" in seen["a1b2"] and "rota" not in seen["a1b2"]
    results = {r["task_id"]: r for r in read_jsonl(tmp_path / "results" / "rollouts.jsonl")}
    assert {task: (r["deliverable_status"], r["deliverable_files"]) for task, r in results.items()} == {
        "a1b2": ("read", ["memo.docx"]),
        "c3d4": ("read", ["budget.txt"]),
        "e5f6": ("read", ["actions.txt"]),
    }


def test_a_deliverables_folder_that_is_missing_is_one_line(tmp_path: Path) -> None:
    missing = tmp_path / "nowhere"
    failed = run_gym("eval", "prepare", "--benchmark", "gdpval", f"+prepare_script_args.deliverables_dir={missing}",
                     cwd=tmp_path, env={"HF_ENDPOINT": "http://127.0.0.1:9", "HF_HUB_OFFLINE": "1"})  # fmt: skip
    assert f"deliverables_dir: {missing} is not a folder" in one_line_error(failed)
