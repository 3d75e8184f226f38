"""Writes data/example.jsonl: five labbench2-style tasks whose figures, tables and protocol page are drawn
here with Pillow and carried in the prompt as PNG data URLs (the upstream rows point to media on disk that
NeMo Gym's own agent inlines; these rows are already inlined, so the plain simple_agent serves them).

    python resources_servers/labbench2_vlm/data/make_example.py
"""

from __future__ import annotations

import base64
import io
import json
from collections.abc import Callable
from pathlib import Path

from PIL import Image, ImageDraw

OUT = Path(__file__).resolve().parent / "example.jsonl"
INK, GRID = (30, 30, 30), (200, 200, 200)


def png(width: int, height: int, draw: Callable[[ImageDraw.ImageDraw], None]) -> str:
    picture = Image.new("L", (width, height), 255)
    draw(ImageDraw.Draw(picture))
    out = io.BytesIO()
    picture.save(out, format="PNG", optimize=True)
    return "data:image/png;base64," + base64.b64encode(out.getvalue()).decode()


def bar_chart(pen: ImageDraw.ImageDraw) -> None:
    pen.text((70, 6), "Fig. 2A  Enzyme activity vs pH", fill=0)
    pen.line((40, 170, 300, 170), fill=0)
    pen.line((40, 20, 40, 170), fill=0)
    for value, label in ((0, "0"), (50, "50"), (100, "100")):
        y = 170 - value * 1.3
        pen.text((12, y - 5), label, fill=0)
    for i, (ph, activity) in enumerate(((5, 22), (6, 58), (7, 96), (8, 41))):
        x = 60 + i * 60
        pen.rectangle((x, 170 - activity * 1.3, x + 36, 170), fill=90)
        pen.text((x + 6, 176), f"pH {ph}", fill=0)
    pen.text((110, 196), "activity (% of max)", fill=0)


def growth_curve(pen: ImageDraw.ImageDraw) -> None:
    pen.text((70, 6), "Fig. 3  E. coli growth in LB", fill=0)
    pen.line((40, 170, 300, 170), fill=0)
    pen.line((40, 20, 40, 170), fill=0)
    points = [(0, 0.05), (2, 0.1), (4, 0.3), (6, 0.7), (8, 1.0), (10, 1.3), (12, 1.4)]
    for hour in range(0, 13, 4):
        pen.text((40 + hour * 20 - 4, 176), str(hour), fill=0)
    for od in (0.5, 1.0, 1.5):
        y = 170 - od * 100
        pen.line((40, y, 300, y), fill=220)
        pen.text((12, y - 5), f"{od}", fill=0)
    xy = [(40 + hour * 20, 170 - od * 100) for hour, od in points]
    pen.line(xy, fill=0, width=2)
    for x, y in xy:
        pen.ellipse((x - 3, y - 3, x + 3, y + 3), fill=0)
    pen.text((120, 196), "time (h)   y: OD600", fill=0)


def table(title: str, header: list[str], rows: list[list[str]]) -> Callable[[ImageDraw.ImageDraw], None]:
    def draw(pen: ImageDraw.ImageDraw) -> None:
        pen.text((10, 6), title, fill=0)
        widths = [90, 80, 80, 80][: len(header)]
        y = 26
        for r, cells in enumerate([header, *rows]):
            x = 10
            for width, cell in zip(widths, cells, strict=True):
                pen.rectangle((x, y, x + width, y + 22), outline=0, fill=225 if r == 0 else 255)
                pen.text((x + 5, y + 6), cell, fill=0)
                x += width
            y += 22

    return draw


def protocol_page(pen: ImageDraw.ImageDraw) -> None:
    steps = [
        "Plasmid miniprep (modified)",
        "1. Pellet 2 mL overnight culture, 1 min at 12,000 g.",
        "2. Resuspend in 250 uL P1 buffer with RNase A.",
        "3. Add 250 uL P2 lysis buffer, invert 5 times.",
        "4. Add 350 uL N3, invert, spin 10 min.",
        "5. Load the supernatant on the column, spin 1 min.",
        "6. Wash with 750 uL PE buffer, spin 1 min.",
        "7. Elute with 50 uL of 100% ethanol, spin 1 min.",
        "8. Run 5 uL of the eluate on a 1% agarose gel.",
    ]
    for i, line in enumerate(steps):
        pen.text((10, 8 + i * 18), line, fill=0)


def image_part(url: str) -> dict:
    # `file_id: null` spelled out: result rows spell the item that way, and replay_model matches parts key by key.
    return {"type": "input_image", "image_url": url, "detail": "auto", "file_id": None}


def row(task_id: str, tag: str, picture: str, question: str, ideal: str, **extra: str) -> dict:
    content = [image_part(picture), {"type": "input_text", "text": question}]
    return {
        "responses_create_params": {"input": [{"role": "user", "content": content}]},
        "verifier_metadata": {"ideal": ideal, "tag": tag, "id": task_id, **extra},
    }


def rows() -> list[dict]:
    return [
        row(
            "fig-ph-activity",
            "figqa2-img",
            png(320, 214, bar_chart),
            "In Fig. 2A, at which pH does the enzyme show its highest activity? Answer briefly.",
            "pH 7",
        ),
        row(
            "fig-growth-od1",
            "figqa2-img",
            png(320, 214, growth_curve),
            "In Fig. 3, after how many hours does the culture first reach an OD600 of 1.0? Answer briefly.",
            "8 hours",
        ),
        row(
            "table-primer-tm",
            "tableqa2-img",
            png(
                350,
                120,
                table(
                    "Table 1. Primers",
                    ["primer", "length", "GC %", "Tm (C)"],
                    [
                        ["P1", "20", "45", "56.3"],
                        ["P2", "22", "50", "59.8"],
                        ["P3", "24", "58", "62.1"],
                    ],
                ),
            ),
            "According to Table 1, which primer has the highest melting temperature? Answer briefly.",
            "P3 (62.1 C)",
        ),
        row(
            "table-ic50",
            "tableqa2-img",
            png(
                270,
                98,
                table(
                    "Table 2. IC50 (uM)",
                    ["compound", "HeLa", "A549"],
                    [
                        ["A", "12.5", "8.1"],
                        ["B", "4.2", "15.0"],
                    ],
                ),
            ),
            "According to Table 2, what is the IC50 of compound B in HeLa cells? Answer briefly.",
            "4.2 uM",
        ),
        row(
            "protocol-miniprep-elution",
            "protocolqa2",
            png(330, 172, protocol_page),
            "I followed this miniprep protocol, but the gel in step 8 showed no plasmid band at all, although "
            "the culture grew well. What might have caused this?\n\nPlease return a single important change "
            "with a brief explanation, rather than a list of possible adjustments.",
            "Step 7 elutes with 100% ethanol; elute with water or EB buffer instead, since ethanol keeps the "
            "DNA bound to the column.",
            reference_passage="The elution buffer in step 7 was replaced with 100% ethanol. DNA does not "
            "come off a silica column in ethanol, so nothing is eluted and the gel lane stays empty.",
        ),
    ]


if __name__ == "__main__":
    OUT.write_text("".join(json.dumps(item) + "\n" for item in rows()), encoding="utf-8")
