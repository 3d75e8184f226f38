"""Writes the example tasks and their deliverables (run from the repo root; rerun when this script changes).

data/example.jsonl holds five invented office tasks with rubrics. data/deliverables/task_<id>/ holds the
files a policy handed in for four of them (a memo .docx, a budget .xlsx, a deck .pptx, a damaged .docx);
the fifth task has no folder, so its reply text is the deliverable. The files' text is fixed (member
timestamps are pinned; openpyxl still stamps the save time, so budget.xlsx differs byte-wise per run).
"""

from __future__ import annotations

import json
import shutil
import zipfile
from datetime import datetime
from pathlib import Path

import docx
import openpyxl
import pptx

DATA = Path(__file__).resolve().parent
FOLDER_IN_REPO = "resources_servers/gdpval/data/deliverables"

TASKS = [
    {
        "task_id": "gdpval-ex-1",
        "sector": "Health Care and Social Assistance",
        "occupation": "Medical and Health Services Managers",
        "prompt": "Write a one-page memo (Word document) to clinic staff announcing that Saturday opening hours "
        "change to 9:00-13:00 from 1 March, explaining why, and saying whom to contact with questions.",
        "rubric": [
            "The deliverable is a Word document written as a memo to clinic staff.",
            "It states the new Saturday hours 9:00-13:00.",
            "It states the change starts on 1 March.",
            "It gives a reason for the change.",
            "It names a contact person or channel for questions.",
        ],
    },
    {
        "task_id": "gdpval-ex-2",
        "sector": "Finance and Insurance",
        "occupation": "Financial Managers",
        "prompt": "Build a quarterly budget workbook (Excel) for a four-person team with rows for salaries, "
        "software, travel and training, one column per quarter Q1-Q4, and a total row using formulas.",
        "rubric": [
            "The deliverable is an Excel workbook.",
            "It has rows for salaries, software, travel and training.",
            "It has one column per quarter, Q1 to Q4.",
            "It has a total row computed with formulas.",
        ],
    },
    {
        "task_id": "gdpval-ex-3",
        "sector": "Retail Trade",
        "occupation": "First-Line Supervisors of Retail Sales Workers",
        "prompt": "Prepare a short slide deck (PowerPoint) for a store team huddle covering last month's sales "
        "against target, the top-selling category, and two actions for next month.",
        "rubric": [
            "The deliverable is a PowerPoint deck.",
            "It compares last month's sales with the target, with figures.",
            "It names the top-selling category.",
            "It lists two concrete actions for next month.",
        ],
    },
    {
        "task_id": "gdpval-ex-4",
        "sector": "Educational Services",
        "occupation": "Secondary School Teachers",
        "prompt": "Write a one-page lesson plan (Word document) for a 45-minute lesson on photosynthesis.",
        "rubric": [
            "The deliverable is a Word document lesson plan.",
            "It fits a 45-minute lesson with timed parts.",
            "It states learning objectives.",
        ],
    },
    {
        "task_id": "gdpval-ex-5",
        "sector": "Real Estate and Rental and Leasing",
        "occupation": "Property, Real Estate, and Community Association Managers",
        "prompt": "Write a notice to tenants that the water will be shut off on 12 June from 10:00 to 14:00 "
        "for pipe repairs, with advice on preparing.",
        "rubric": [
            "It states the date 12 June and the hours 10:00-14:00.",
            "It gives the reason (pipe repairs).",
            "It advises tenants how to prepare (e.g. store water).",
            "It gives a contact for questions.",
        ],
    },
]


def memo(path: Path) -> None:
    document = docx.Document()
    document.add_heading("Memo: Saturday opening hours", level=1)
    document.add_paragraph("To: all clinic staff. From: Practice Manager.")
    document.add_paragraph(
        "From 1 March our Saturday opening hours change to 9:00-13:00. Afternoon bookings on Saturdays have "
        "been below a third of capacity for six months, and the shorter day lets us add a weekday evening "
        "session instead."
    )
    document.add_paragraph("Questions: contact Dana Reyes, practice manager, at extension 214.")
    document.save(str(path))


def budget(path: Path) -> None:
    workbook = openpyxl.Workbook()
    sheet = workbook.active
    sheet.title = "Budget"
    sheet.append(["Item", "Q1", "Q2", "Q3", "Q4"])
    for item, amount in [("Salaries", 96000), ("Software", 4800), ("Travel", 6000), ("Training", 3000)]:
        sheet.append([item, amount, amount, amount, amount])
    sheet.append(["Total", *[f"=SUM({column}2:{column}5)" for column in "BCDE"]])
    workbook.properties.created = workbook.properties.modified = datetime(2026, 1, 1)
    workbook.save(str(path))


def deck(path: Path) -> None:
    presentation = pptx.Presentation()
    layout = presentation.slide_layouts[1]
    for title, body in [
        ("Last month", "Sales were 182,000 against a 200,000 target (91%)."),
        ("Next month", "Restock the entrance display weekly.\nRun a loyalty sign-up drive at the tills."),
    ]:
        slide = presentation.slides.add_slide(layout)
        slide.shapes.title.text = title
        slide.placeholders[1].text = body
    presentation.save(str(path))


def pin_timestamps(path: Path) -> None:
    """Rewrite the zip with fixed member dates so the file's bytes do not change from run to run."""
    with zipfile.ZipFile(path) as source:
        members = [(info, source.read(info)) for info in source.infolist()]
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as target:
        for info, content in members:
            info.date_time = (2026, 1, 1, 0, 0, 0)
            target.writestr(info, content)


def row(task: dict, has_folder: bool) -> dict:
    instruction = (
        f"Sector: {task['sector']}\nOccupation: {task['occupation']}\n\n{task['prompt']}\n\n"
        "Save the files you hand in to your output folder and end with a short summary of what you made."
    )
    rubric = [{"score": 1, "criterion": criterion} for criterion in task["rubric"]]
    out = {
        "responses_create_params": {"input": [{"role": "user", "content": instruction}]},
        "task_id": task["task_id"],
        "sector": task["sector"],
        "occupation": task["occupation"],
        "prompt": task["prompt"],
        "rubric_json": json.dumps(rubric),
        "rubric_pretty": "\n".join(f"- {criterion}" for criterion in task["rubric"]),
    }
    if has_folder:
        out["deliverables_dir"] = f"{FOLDER_IN_REPO}/task_{task['task_id']}"
    return out


def main() -> None:
    root = DATA / "deliverables"
    shutil.rmtree(root, ignore_errors=True)
    makers = {
        "gdpval-ex-1": ("memo.docx", memo),
        "gdpval-ex-2": ("budget.xlsx", budget),
        "gdpval-ex-3": ("huddle.pptx", deck),
    }
    for task_id, (name, make) in makers.items():
        (root / f"task_{task_id}").mkdir(parents=True)
        make(root / f"task_{task_id}" / name)
        pin_timestamps(root / f"task_{task_id}" / name)
    # A damaged file: the start of a .docx cut off, as an interrupted write leaves it.
    (root / "task_gdpval-ex-4").mkdir(parents=True)
    (root / "task_gdpval-ex-4" / "lesson_plan.docx").write_bytes(b"PK\x03\x04\x14\x00\x06\x00" + b"\x00" * 40)
    lines = [json.dumps(row(task, task["task_id"] != "gdpval-ex-5")) for task in TASKS]
    (DATA / "example.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
