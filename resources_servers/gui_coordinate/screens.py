"""Five tiny synthetic app screens drawn with Pillow, each with a named element to point at.

An element is a box `(x0, y0, x1, y1)` in pixels; its centre, as fractions of the width and height, is
the task's `expected_answer`. Only the data generator and the tests use this module (and Pillow).
"""

from __future__ import annotations

import base64
import io
from collections.abc import Callable
from dataclasses import dataclass

Box = tuple[int, int, int, int]
WIDTH, HEIGHT = 128, 96
PNG_DATA_URL_PREFIX = "data:image/png;base64,"


@dataclass(frozen=True)
class Screen:
    name: str
    instruction: str  # what the user asks to point at
    target: Box
    fill: tuple[int, int, int]  # the colour inside the target box, away from its label
    draw: Callable[..., None]  # draw(pen) paints the whole screen


def _bar(pen, title: str) -> None:
    pen.rectangle((0, 0, WIDTH - 1, 15), fill=(40, 60, 120))
    pen.text((24, 3), title, fill=(255, 255, 255))


def _settings(pen) -> None:
    _bar(pen, "Settings")
    pen.rectangle((110, 2, 124, 13), fill=(200, 40, 40))
    pen.line((113, 4, 121, 11), fill=(255, 255, 255), width=2)
    pen.line((121, 4, 113, 11), fill=(255, 255, 255), width=2)
    for row, label in enumerate(("Wi-Fi", "Sound")):
        y = 24 + row * 18
        pen.text((6, y), label, fill=(0, 0, 0))
        pen.rounded_rectangle((96, y, 120, y + 10), radius=5, fill=(60, 170, 80))
    pen.rectangle((34, 70, 94, 86), fill=(60, 170, 80))
    pen.text((52, 73), "Save", fill=(255, 255, 255))


def _search(pen) -> None:
    _bar(pen, "Library")
    pen.rectangle((6, 20, 121, 34), fill=(250, 250, 250), outline=(120, 120, 120))
    pen.text((10, 22), "Search books", fill=(150, 150, 150))
    for row in range(3):
        y = 42 + row * 17
        pen.rectangle((6, y, 20, y + 12), fill=(180, 140, 90))
        pen.line((26, y + 3, 100 - row * 12, y + 3), fill=(90, 90, 90), width=2)
        pen.line((26, y + 9, 70, y + 9), fill=(170, 170, 170), width=2)


def _shop(pen) -> None:
    _bar(pen, "Shop")
    pen.rectangle((34, 20, 94, 58), fill=(200, 200, 210))
    pen.ellipse((52, 28, 76, 52), fill=(120, 130, 150))
    pen.text((38, 61), "Mug  $9", fill=(0, 0, 0))
    pen.rectangle((24, 74, 104, 90), fill=(240, 140, 30))
    pen.text((36, 77), "Add to cart", fill=(255, 255, 255))


def _menu(pen) -> None:
    _bar(pen, "News")
    pen.rectangle((3, 2, 17, 13), fill=(40, 60, 120))
    for y in (4, 7, 10):
        pen.line((5, y, 15, y), fill=(255, 255, 255), width=1)
    for row in range(4):
        y = 22 + row * 18
        pen.rectangle((6, y, 121, y + 14), outline=(200, 200, 200))
        pen.line((10, y + 7, 110 - row * 10, y + 7), fill=(80, 80, 80), width=2)


def _dialog(pen) -> None:
    pen.rectangle((0, 0, WIDTH - 1, HEIGHT - 1), fill=(110, 110, 110))
    pen.rectangle((14, 18, 113, 78), fill=(255, 255, 255))
    pen.text((22, 26), "Delete file?", fill=(0, 0, 0))
    pen.rectangle((22, 54, 62, 70), fill=(225, 225, 225))
    pen.text((27, 57), "Cancel", fill=(0, 0, 0))
    pen.rectangle((70, 54, 105, 70), fill=(30, 110, 220))
    pen.text((81, 57), "OK", fill=(255, 255, 255))


SCREENS = (
    Screen(
        "settings",
        "Close the settings page with the red X icon.",
        (110, 2, 124, 13),
        (200, 40, 40),
        _settings,
    ),
    Screen(
        "search", "Tap the search field at the top of the page.", (6, 20, 121, 34), (250, 250, 250), _search
    ),
    Screen("shop", "Press the orange 'Add to cart' button.", (24, 74, 104, 90), (240, 140, 30), _shop),
    Screen("menu", "Open the navigation menu (the three-line icon).", (3, 2, 17, 13), (40, 60, 120), _menu),
    Screen(
        "dialog", "Confirm the deletion with the blue OK button.", (70, 54, 105, 70), (30, 110, 220), _dialog
    ),
)


def png(screen: Screen) -> bytes:
    from PIL import Image, ImageDraw

    picture = Image.new("RGB", (WIDTH, HEIGHT), (255, 255, 255))
    screen.draw(ImageDraw.Draw(picture))
    out = io.BytesIO()
    picture.save(out, format="PNG", optimize=True)
    return out.getvalue()


def png_data_url(data: bytes) -> str:
    return PNG_DATA_URL_PREFIX + base64.b64encode(data).decode()


def centre(box: Box) -> tuple[float, float]:
    """The box's centre as fractions of the screen's width and height (pixel centres at +0.5)."""
    x0, y0, x1, y1 = box
    return (x0 + x1 + 1) / 2 / WIDTH, (y0 + y1 + 1) / 2 / HEIGHT
