"""Small synthetic pictures of coloured circles, drawn with Pillow for the example tasks and their tests.

Only the data generator and the tests draw or read pictures; the server grades from the circle list in
the row, so it runs without Pillow.
"""

from __future__ import annotations

import base64
import io
import random
from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from PIL import Image

# Named colours the prompts use, far enough apart that a plain RGB lookup tells them apart.
PALETTE: dict[str, tuple[int, int, int]] = {
    "red": (220, 30, 30),
    "green": (30, 160, 50),
    "blue": (30, 70, 220),
    "yellow": (240, 210, 20),
    "purple": (140, 50, 170),
    "orange": (245, 130, 20),
}
BACKGROUND = (255, 255, 255)
PNG_DATA_URL_PREFIX = "data:image/png;base64,"


def place_circles(
    rng: random.Random, size: int, colours: Sequence[str], radius: int, margin: int = 2
) -> list[dict[str, int | str]]:
    """One circle per entry of `colours`, inside the picture and not touching another (rejection sampling)."""
    placed: list[dict[str, int | str]] = []
    for colour in colours:
        for _ in range(10_000):
            x = rng.randint(radius + margin, size - radius - margin - 1)
            y = rng.randint(radius + margin, size - radius - margin - 1)
            apart = 2 * radius + margin
            if all((x - int(c["x"])) ** 2 + (y - int(c["y"])) ** 2 >= apart**2 for c in placed):
                placed.append({"x": x, "y": y, "radius": radius, "color": colour})
                break
        else:
            raise ValueError(f"{len(colours)} circles of radius {radius} do not fit in {size}x{size}")
    return placed


def draw_png(size: int, circles: Sequence[dict[str, int | str]]) -> bytes:
    """The circles filled in their palette colours on white, as PNG bytes."""
    from PIL import Image, ImageDraw

    picture = Image.new("RGB", (size, size), BACKGROUND)
    pen = ImageDraw.Draw(picture)
    for c in circles:
        x, y, r = int(c["x"]), int(c["y"]), int(c["radius"])
        pen.ellipse((x - r, y - r, x + r, y + r), fill=PALETTE[str(c["color"])])
    out = io.BytesIO()
    picture.save(out, format="PNG", optimize=True)
    return out.getvalue()


def png_data_url(png: bytes) -> str:
    return PNG_DATA_URL_PREFIX + base64.b64encode(png).decode()


def read_data_url(url: str) -> Image.Image:
    """The picture a PNG data URL carries, as RGB."""
    from PIL import Image

    if not url.startswith(PNG_DATA_URL_PREFIX):
        raise ValueError("not a PNG data URL")
    return Image.open(io.BytesIO(base64.b64decode(url[len(PNG_DATA_URL_PREFIX) :]))).convert("RGB")
