"""Write the gui_coordinate example rows: each synthetic screen of `screens.py` as an inline `input_image`,
an instruction, and the centre of the element to point at as `expected_answer` ("x,y" in 0-1).

    python -m resources_servers.gui_coordinate.generate_data --out data/example.jsonl
"""

from __future__ import annotations

import argparse
from pathlib import Path

import orjson

from resources_servers.gui_coordinate.screens import HEIGHT, SCREENS, WIDTH, Screen, centre, png, png_data_url

SYSTEM_PROMPT = (
    "You locate elements on app screenshots. Answer with one point <point>(x, y)</point>, where x and y are "
    "whole numbers from 0 to 1000: thousandths of the image width (from the left) and height (from the top)."
)


def make_row(screen: Screen) -> dict:
    x, y = centre(screen.target)
    # `file_id: null` spelled out: a result row spells the item that way, and replay_model compares image
    # parts key by key, so a row without it would not find its own recording offline.
    image = {"type": "input_image", "image_url": png_data_url(png(screen)), "detail": "auto", "file_id": None}
    text = f"Point to the region that this sentence describes: {screen.instruction}"
    return {
        "responses_create_params": {
            "input": [
                {"role": "system", "content": SYSTEM_PROMPT},
                {"role": "user", "content": [image, {"type": "input_text", "text": text}]},
            ]
        },
        "expected_answer": f"{x:.4f},{y:.4f}",
        "metadata": {"screen": screen.name, "target_box": list(screen.target), "image_size": [WIDTH, HEIGHT]},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    args.out.write_bytes(b"".join(orjson.dumps(make_row(screen)) + b"\n" for screen in SCREENS))


if __name__ == "__main__":
    main()
