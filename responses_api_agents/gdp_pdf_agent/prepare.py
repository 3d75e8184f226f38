"""Render a PDF once into the manifest gdp_pdf_agent reads: each page's extracted text and one PNG per page
at `--dpi` (150 by default, the agent's starting DPI), so rollouts never parse or render a PDF.

    python -m responses_api_agents.gdp_pdf_agent.prepare report.pdf lease.pdf --out documents

writes documents/report/manifest.json, documents/report/page_0001.png, ... (one folder per PDF, named after
it); a row then names `report/manifest.json` with `documents_base_dir: documents`.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import orjson
import pymupdf

DEFAULT_DPI = 150


def prepare_document(pdf: Path, out_dir: Path, dpi: int = DEFAULT_DPI) -> Path:
    """Write `out_dir/manifest.json` and `out_dir/page_NNNN.png`; answer the manifest's path."""
    out_dir.mkdir(parents=True, exist_ok=True)
    pages = []
    with pymupdf.open(pdf) as document:
        for number, page in enumerate(document, start=1):
            image = f"page_{number:04d}.png"
            page.get_pixmap(dpi=dpi).save(out_dir / image)
            pages.append({"page_number": number, "text": page.get_text().strip(), "image": image})
    manifest = out_dir / "manifest.json"
    manifest.write_bytes(
        orjson.dumps({"source": pdf.name, "source_dpi": dpi, "pages": pages}, option=orjson.OPT_INDENT_2)
    )
    return manifest


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("pdfs", type=Path, nargs="+")
    parser.add_argument("--out", type=Path, required=True, help="the folder of the documents' folders")
    parser.add_argument("--dpi", type=int, default=DEFAULT_DPI)
    args = parser.parse_args()
    for pdf in args.pdfs:
        print(prepare_document(pdf, args.out / pdf.stem, args.dpi))


if __name__ == "__main__":
    main()
