"""Write the image_tools example rows: five pivot turns over small pictures drawn with Pillow, each with the
demonstrated action as `expected_action`.

    python -m resources_servers.image_tools.generate_data --out data/example.jsonl
    python -m resources_servers.image_tools.generate_data --inspection --out data/example_inspection.jsonl

`--inspection` writes the rows of the image_tools_agent pairing instead: whole questions over larger
pictures whose detail is small, answered after any number of tool calls the agent executes, and graded as
answer turns (`__answer__`).

Tool calls are written in the text (Qwen3-Coder XML, described in the system prompt), so the rows carry no
`tools` and one model call makes the decision.
"""

from __future__ import annotations

import argparse
import base64
import io
from collections.abc import Callable
from pathlib import Path

import orjson

SIZE = 96
SYSTEM_PROMPT = """You answer questions about images. Images are numbered by img_idx from 0; coordinates \
are whole numbers from 0 to 1000 across the width and height, (0, 0) being the top-left corner.

When the images do not show what you need clearly enough, call one tool and stop; you will see its result \
next turn. When you know the answer, give it in \\boxed{} and call no tool.

Tools:
- image_zoom_in_tool(bbox_2d: [x1, y1, x2, y2], img_idx: int, label: str, factor: number = 3): magnify a region.
- image_crop_tool(bbox_2d: [x1, y1, x2, y2], img_idx: int, label: str): cut out a region at its scale.
- image_rotate_tool(degrees: number, img_idx: int, label: str): turn an image counter-clockwise.
- image_diff_tool(img_idx_a: int, img_idx_b: int, label: str): highlight where two images differ.
- image_overlay_tool(img_idx_a: int, img_idx_b: int, label: str, alpha: number = 0.5): blend two images.
- color_at_tool(point_2d: [x, y], img_idx: int, label: str): read the exact colour at a point.

Write a call as:
<tool_call>
<function=TOOL_NAME>
<parameter=NAME>
VALUE
</parameter>
</function>
</tool_call>
with arrays and numbers in JSON and strings as plain text."""


def _png(draw: Callable, background: tuple[int, int, int] = (255, 255, 255)) -> str:
    from PIL import Image, ImageDraw

    picture = Image.new("RGB", (SIZE, SIZE), background)
    draw(ImageDraw.Draw(picture))
    out = io.BytesIO()
    picture.save(out, format="PNG", optimize=True)
    return "data:image/png;base64," + base64.b64encode(out.getvalue()).decode()


def _label(pen) -> None:
    pen.rectangle((8, 8, 60, 50), fill=(90, 140, 200))
    pen.text((72, 80), "B7", fill=(40, 40, 40))


def _arrow(pen) -> None:
    pen.line((48, 80, 48, 24), fill=(20, 20, 20), width=5)
    pen.polygon([(48, 12), (36, 28), (60, 28)], fill=(20, 20, 20))


def _room(with_lamp: bool) -> Callable:
    def draw(pen) -> None:
        pen.rectangle((10, 60, 86, 86), fill=(150, 100, 60))
        pen.rectangle((20, 20, 44, 44), fill=(120, 180, 230))
        if with_lamp:
            pen.ellipse((64, 30, 78, 44), fill=(250, 220, 60))

    return draw


def _swatches(pen) -> None:
    pen.rectangle((0, 0, 47, 95), fill=(203, 65, 84))
    pen.rectangle((48, 0, 95, 95), fill=(198, 72, 90))


def _dots(pen) -> None:
    for x, y in ((20, 20), (70, 25), (30, 70), (75, 72)):
        pen.ellipse((x - 7, y - 7, x + 7, y + 7), fill=(30, 30, 30))


def _image(url: str) -> dict:
    # `file_id: null` spelled out: a result row spells the item that way, and replay_model compares image
    # parts key by key, so a row without it would not find its own recording offline.
    return {"type": "input_image", "image_url": url, "detail": "auto", "file_id": None}


def _row(uuid: str, question: str, images: list[str], action: dict, tool_family: str) -> dict:
    content = [{"type": "input_text", "text": question}, *(_image(url) for url in images)]
    return {
        "responses_create_params": {
            "input": [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": content}]
        },
        "uuid": uuid,
        "expected_action": action,
        "metadata": {"tool_family": tool_family},
    }


def rows() -> list[dict]:
    return [
        _row(
            "zoom-label",
            "What is written on the small tag in the bottom-right corner?",
            [_png(_label)],
            {
                "name": "image_zoom_in_tool",
                "arguments": {"bbox_2d": [700, 780, 950, 960], "img_idx": 0, "label": "the tag"},
            },
            "bbox",
        ),
        _row(
            "rotate-arrow",
            "The photo was taken sideways. Turn it upright: which way does the arrow then point?",
            [_png(_arrow)],
            {"name": "image_rotate_tool", "arguments": {"degrees": 90, "img_idx": 0, "label": "upright"}},
            "scalar",
        ),
        _row(
            "diff-room",
            "What was added to the room between the first and the second picture?",
            [_png(_room(False)), _png(_room(True))],
            {
                "name": "image_diff_tool",
                "arguments": {"img_idx_a": 0, "img_idx_b": 1, "label": "before and after"},
            },
            "pair",
        ),
        _row(
            "colour-left",
            "Give the exact RGB colour of the left half of the picture.",
            [_png(_swatches)],
            {
                "name": "color_at_tool",
                "arguments": {"point_2d": [250, 500], "img_idx": 0, "label": "left half"},
            },
            "point",
        ),
        _row(
            "answer-dots",
            "How many black dots are in the picture?",
            [_png(_dots)],
            {"name": "__answer__", "arguments": {"answer": "4"}},
            "answer",
        ),
    ]


INSPECTION_SIZE = (320, 240)
# The base agent the pivot rows name; the pairing config maps it to this environment.
BASE_AGENT_REF = {"type": "responses_api_agents", "name": "image_tools_pivot_agent"}


def _scene(draw: Callable) -> str:
    from PIL import Image, ImageDraw

    picture = Image.new("RGB", INSPECTION_SIZE, (236, 236, 228))
    pen = ImageDraw.Draw(picture)
    pen.rectangle((20, 30, 150, 200), fill=(90, 140, 200))
    draw(pen)
    out = io.BytesIO()
    picture.save(out, format="PNG", optimize=True)
    return "data:image/png;base64," + base64.b64encode(out.getvalue()).decode()


def _tiny_tag(pen) -> None:
    pen.rectangle((282, 206, 306, 224), fill=(255, 255, 255), outline=(40, 40, 40))
    pen.text((286, 209), "K7", fill=(20, 20, 20))


def _boxed_dots(pen) -> None:
    pen.rectangle((250, 20, 300, 60), outline=(30, 30, 30))
    for x in (260, 274, 288):
        pen.ellipse((x - 3, 37, x + 3, 43), fill=(20, 20, 20))


def _corner_square(pen) -> None:
    pen.rectangle((296, 8, 310, 22), fill=(40, 170, 70))


def _small_letter(pen) -> None:
    pen.rectangle((6, 6, 24, 22), fill=(250, 250, 250), outline=(40, 40, 40))
    pen.text((11, 9), "Q", fill=(20, 20, 20))


def _corner_triangle(pen) -> None:
    pen.polygon([(8, 232), (22, 232), (15, 218)], fill=(200, 60, 60))


def inspection_rows() -> list[dict]:
    questions = (
        ("inspect-tag", "What code is printed on the small tag in the bottom-right corner?", _tiny_tag, "K7"),
        ("inspect-dots", "How many dots are inside the small box at the top right?", _boxed_dots, "3"),
        ("inspect-square", "What colour is the small square in the top-right corner: red, green or blue?",
         _corner_square, "green"),
        ("inspect-letter", "Which letter is on the small sign in the top-left corner?", _small_letter, "Q"),
        ("inspect-shape", "What shape is in the bottom-left corner: circle, square or triangle?", _corner_triangle,
         "triangle"),
    )  # fmt: skip
    return [
        {
            **_row(
                uuid,
                question,
                [_scene(draw)],
                {"name": "__answer__", "arguments": {"answer": answer}},
                "answer",
            ),
            "image_tools_base_agent_ref": BASE_AGENT_REF,
        }
        for uuid, question, draw, answer in questions
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--inspection", action="store_true", help="the image_tools_agent pairing's rows")
    args = parser.parse_args()
    written = inspection_rows() if args.inspection else rows()
    args.out.write_bytes(b"".join(orjson.dumps(row) + b"\n" for row in written))


if __name__ == "__main__":
    main()
