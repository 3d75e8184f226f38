"""Writes data/example.jsonl: five GDP.pdf-style tasks over small PDFs made here with pymupdf.

Each PDF is built in memory, then handed to the policy the way NeMo Gym's gdp_pdf agent does at rollout
time: the text extracted from the PDF plus one rendered PNG page per `input_image` part. The rows carry
that already, so the plain simple_agent serves them and nothing is parsed or rendered at run time.

    python resources_servers/gdp_pdf/data/make_example.py      # needs pymupdf (requirements.txt)

With `--documents` it writes the same tasks for gdp_pdf_agent instead: the PDFs into data/documents/ and
data/example_documents.jsonl, whose rows carry only the task and name the document by
`verifier_metadata.document_manifest`. Render the manifests they name once with

    python -m responses_api_agents.gdp_pdf_agent.prepare resources_servers/gdp_pdf/data/documents/*.pdf \
        --out resources_servers/gdp_pdf/data/documents
"""

from __future__ import annotations

import argparse
import base64
import json
from pathlib import Path

import pymupdf

OUT = Path(__file__).resolve().parent / "example.jsonl"
DOCUMENTS_OUT = Path(__file__).resolve().parent / "example_documents.jsonl"
PDF_DIR = Path(__file__).resolve().parent / "documents"
PAGE_W, PAGE_H, DPI = 420, 300, 72

DOCUMENTS: dict[str, list[str]] = {
    "harbor-foods-revenue.pdf": [
        "Harbor Foods Ltd. - Revenue summary FY2025\n\n"
        "Quarter    Revenue (USD k)   Gross margin\n"
        "Q1         265               31%\n"
        "Q2         290               33%\n"
        "Q3         371               35%\n"
        "Q4         314               32%\n\n"
        "All figures unaudited. Prepared by the finance office.",
    ],
    "elm-street-lease.pdf": [
        "Residential lease - 14 Elm Street, Unit 3B\n\n"
        "1. Term. Twelve months from March 1, 2026.\n"
        "2. Rent. The tenant pays USD 2,150 per month,\n   due on the first day of each month.\n"
        "3. Late fee. USD 75 after the fifth day.\n"
        "4. Deposit. One month's rent, held in escrow.",
        "5. Termination. Either party may end this lease\n   early with 60 days' written notice.\n"
        "6. Pets. One cat or one dog under 25 lb.\n\n"
        "Signed: L. Ortega (landlord), P. Nair (tenant)",
    ],
    "batch-qc-report.pdf": [
        "Quality control release report - sterile saline\n\n"
        "Batch   Sterility   Endotoxin (EU/mL)   Release\n"
        "B-15    pass        0.08                yes\n"
        "B-16    pass        0.11                yes\n"
        "B-17    pass        0.62                NO\n"
        "B-18    pass        0.09                yes\n\n"
        "Endotoxin limit: 0.50 EU/mL.",
    ],
    "clinic-punch-list.pdf": [
        "Punch list - Riverside Clinic fit-out (walkthrough 10/02)\n\n"
        "#  Item                         Subcontractor     Status\n"
        "1  Outlet cover missing, rm 104  Norda Electric    open\n"
        "2  Ceiling tile stained, hall    Apex Interiors    closed\n"
        "3  Switch dead, rm 110           Norda Electric    open\n"
        "4  Door closer loose, rm 102     Apex Interiors    open\n"
        "5  GFCI trips, break room        Norda Electric    open\n"
        "6  Paint touch-up, lobby         Hue Painting      closed",
    ],
    "homeowner-policy.pdf": [
        "Homeowner policy HP-88213 - declarations\n\n"
        "Dwelling coverage: USD 420,000\n"
        "Personal property: USD 150,000\n"
        "Deductible (all perils): USD 1,000\n\n"
        "Exclusions: flood, including surface water and\n"
        "storm surge; earth movement; wear and tear.\n"
        "Flood cover requires a separate flood policy.",
    ],
}


def build(pages: list[str]) -> pymupdf.Document:
    document = pymupdf.open()
    for text in pages:
        page = document.new_page(width=PAGE_W, height=PAGE_H)
        page.insert_text((24, 32), text, fontname="cour", fontsize=9)
    return document


def inline(name: str, task_prompt: str) -> list[dict]:
    """The user content NeMo Gym's agent would build: the task, the extracted text, the rendered pages."""
    document = build(DOCUMENTS[name])
    text = "\n\n".join(f"[page {i + 1}]\n{page.get_text().strip()}" for i, page in enumerate(document))
    parts = [
        {"type": "input_text", "text": task_prompt},
        {
            "type": "input_text",
            "text": f"Document {name} ({len(document)} page(s)), extracted text:\n\n{text}",
        },
    ]
    for page in document:
        png = page.get_pixmap(dpi=DPI, colorspace=pymupdf.csGRAY).tobytes("png")
        url = "data:image/png;base64," + base64.b64encode(png).decode()
        # `file_id: null` spelled out: result rows spell the item that way, and replay_model matches parts key by key.
        parts.append({"type": "input_image", "image_url": url, "detail": "auto", "file_id": None})
    return parts


def referenced(name: str, task_prompt: str) -> list[dict]:
    """The user content of a gdp_pdf_agent row: the task alone; the agent adds the document."""
    return [{"type": "input_text", "text": task_prompt}]


def row(
    task_id: str, domain: str, document: str, task_prompt: str, criteria: list[str], content=inline
) -> dict:
    manifest = {"document_manifest": f"{Path(document).stem}/manifest.json"} if content is referenced else {}
    return {
        "responses_create_params": {"input": [{"role": "user", "content": content(document, task_prompt)}]},
        "verifier_metadata": {
            "task_id": task_id,
            "task_prompt": task_prompt,
            "domain": domain,
            "document": document,
            **manifest,
            "rubric_criteria": [
                {"id": f"rubric-{i + 1}", "criterion": text} for i, text in enumerate(criteria)
            ],
        },
    }


def rows(content=inline) -> list[dict]:
    return [
        row(
            "example-revenue",
            "Finance/Investing",
            "harbor-foods-revenue.pdf",
            "From the attached revenue summary, give the total FY2025 revenue and the quarter with the highest "
            "revenue.",
            [
                "The response states total FY2025 revenue of USD 1,240k (1.24 million).",
                "The response identifies Q3 as the quarter with the highest revenue.",
            ],
            content,
        ),
        row(
            "example-lease",
            "Real Estate",
            "elm-street-lease.pdf",
            "Using the attached lease, what is the monthly rent and how much notice is needed to end the lease "
            "early?",
            [
                "The response states a monthly rent of USD 2,150.",
                "The response states that 60 days' written notice is required for early termination.",
            ],
            content,
        ),
        row(
            "example-qc",
            "Manufacturing/Supply Chains",
            "batch-qc-report.pdf",
            "Per the attached QC report, which batch was not released and why?",
            [
                "The response identifies batch B-17 and says its endotoxin (0.62 EU/mL) exceeds the 0.50 limit."
            ],
            content,
        ),
        row(
            "example-punch-list",
            "Construction",
            "clinic-punch-list.pdf",
            "Based on the attached punch list, which subcontractor has the most open items, and how many?",
            [
                "The response identifies Norda Electric as the subcontractor with the most open items.",
                "The response states that Norda Electric has 3 open items.",
            ],
            content,
        ),
        row(
            "example-policy",
            "Insurance",
            "homeowner-policy.pdf",
            "According to the attached policy, is flood damage covered, and what is the deductible?",
            [
                "The response states that flood damage is not covered (excluded) by this policy.",
                "The response states a deductible of USD 1,000.",
            ],
            content,
        ),
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--documents", action="store_true", help="gdp_pdf_agent's rows and the PDFs they name"
    )
    if not parser.parse_args().documents:
        OUT.write_text("".join(json.dumps(item) + "\n" for item in rows()), encoding="utf-8")
        return
    PDF_DIR.mkdir(exist_ok=True)
    for name, pages in DOCUMENTS.items():
        build(pages).save(PDF_DIR / name)
    DOCUMENTS_OUT.write_text("".join(json.dumps(item) + "\n" for item in rows(referenced)), encoding="utf-8")


if __name__ == "__main__":
    main()
