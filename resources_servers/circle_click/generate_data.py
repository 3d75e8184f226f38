"""Write circle_click task rows: a small PNG of circles in distinct colours, inlined as an `input_image`
data URL, and the `click` tool the model answers with.

    python -m resources_servers.circle_click.generate_data --n 5 --seed 11 --out data/example.jsonl

The same seed always gives the same circles and prompts; the picture is redrawn from them.
"""

from __future__ import annotations

import argparse
import random
from pathlib import Path

import orjson

from resources_servers.circle_count.images import PALETTE, draw_png, place_circles, png_data_url

SYSTEM_PROMPT = (
    "You operate on pictures by clicking. Pixel coordinates start at (0, 0) in the top-left corner, x to "
    "the right and y downwards. Call the click tool once, on the centre of the circle you are asked for."
)
CLICK_TOOL = {
    "type": "function",
    "name": "click",
    "description": "Click at pixel (x, y) of the picture.",
    "parameters": {
        "type": "object",
        "properties": {
            "x": {"type": "integer", "description": "pixels from the left edge"},
            "y": {"type": "integer", "description": "pixels from the top edge"},
        },
        "required": ["x", "y"],
        "additionalProperties": False,
    },
    "strict": True,
}


def listing(colours: list[str]) -> str:
    names = [("an " if colour[0] in "aeiou" else "a ") + colour for colour in colours]
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]


def make_row(rng: random.Random, size: int, min_circles: int, max_circles: int, radius: int) -> dict:
    colours = rng.sample(sorted(PALETTE), rng.randint(min_circles, max_circles))
    target = rng.choice(colours)
    circles = place_circles(rng, size, colours, radius)
    question = (
        f"This is a {size}x{size} pixel picture with {listing(colours)} circle. Click on the {target} circle."
    )
    # `file_id: null` spelled out: a result row spells the item that way, and replay_model compares image
    # parts key by key, so a row without it would not find its own recording offline.
    image = {"type": "input_image", "image_url": png_data_url(draw_png(size, circles)), "detail": "auto"}
    content = [{**image, "file_id": None}, {"type": "input_text", "text": question}]
    return {
        "responses_create_params": {
            "input": [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": content}],
            "tools": [CLICK_TOOL],
        },
        "circles": circles,
        "target_color": target,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=5)
    parser.add_argument("--seed", type=int, default=11)
    parser.add_argument("--size", type=int, default=96, help="picture side in pixels")
    parser.add_argument("--min-circles", type=int, default=2)
    parser.add_argument("--max-circles", type=int, default=5)
    parser.add_argument("--radius", type=int, default=10)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    if args.max_circles > len(PALETTE):
        parser.error(f"--max-circles is at most {len(PALETTE)}: every circle has its own colour")
    rng = random.Random(args.seed)
    rows = [make_row(rng, args.size, args.min_circles, args.max_circles, args.radius) for _ in range(args.n)]
    args.out.write_bytes(b"".join(orjson.dumps(row) + b"\n" for row in rows))


if __name__ == "__main__":
    main()
