"""Write circle_count task rows: a small PNG of coloured circles inlined as an `input_image` data URL.

    python -m resources_servers.circle_count.generate_data --n 5 --seed 7 --out data/example.jsonl

The same seed always gives the same circles and prompts; the picture is redrawn from them.
"""

from __future__ import annotations

import argparse
import random
from pathlib import Path

import orjson

from resources_servers.circle_count.images import PALETTE, draw_png, place_circles, png_data_url

SYSTEM_PROMPT = (
    "You look at pictures and count things. Think briefly, then give the final count as a whole number "
    "in \\boxed{}, for example \\boxed{3}."
)


def make_row(rng: random.Random, size: int, min_circles: int, max_circles: int, radius: int) -> dict:
    names = sorted(PALETTE)
    used = rng.sample(names, rng.randint(2, 4))
    colours = [rng.choice(used) for _ in range(rng.randint(min_circles, max_circles))]
    # Now and then ask about a colour that is not drawn at all: the right answer is then 0.
    target = rng.choice(used) if rng.random() < 0.8 else rng.choice([n for n in names if n not in used])
    circles = place_circles(rng, size, colours, radius)
    question = f"How many {target} circles are in this {size}x{size} picture? Answer with \\boxed{{n}}."
    # `file_id: null` spelled out: a result row spells the item that way, and replay_model compares image
    # parts key by key, so a row without it would not find its own recording offline.
    image = {"type": "input_image", "image_url": png_data_url(draw_png(size, circles)), "detail": "auto"}
    content = [
        {**image, "file_id": None},
        {"type": "input_text", "text": question},
    ]
    return {
        "responses_create_params": {
            "input": [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": content}]
        },
        "circles": circles,
        "target_color": target,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=5)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--size", type=int, default=96, help="picture side in pixels")
    parser.add_argument("--min-circles", type=int, default=3)
    parser.add_argument("--max-circles", type=int, default=7)
    parser.add_argument("--radius", type=int, default=8)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    rows = [make_row(rng, args.size, args.min_circles, args.max_circles, args.radius) for _ in range(args.n)]
    args.out.write_bytes(b"".join(orjson.dumps(row) + b"\n" for row in rows))


if __name__ == "__main__":
    main()
