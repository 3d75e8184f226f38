"""How a pre-rendered document reaches the policy, and how that shrinks when the model server refuses it.

A document is a manifest prepared once (`prepare.py`): `source_dpi`, and per page its `page_number`,
extracted `text` and a rendered `image` file beside the manifest. A request carries the task's text, the
whole extracted text in one `<document>` block, and the page images at the current DPI. When the endpoint
refuses the request as too large (context, payload) the DPI drops by a fifth toward `min_dpi`; when it
says how many images it takes, pages are composited 2 or 4 to an image, and beyond that only the leading
pages are shown (the text still covers every page). `Delivery.adapt` answers False when nothing is left to
shrink: the document does not fit this endpoint.
"""

from __future__ import annotations

import base64
import io
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import orjson
from PIL import Image, ImageDraw

from nemo_gym.http.client import HTTPStatusError

Limit = Literal["image_count", "payload", "context", "output_truncated"]
BACKOFF = 0.8
COMPOSITE_COLUMNS = 2
MAX_PAGES_PER_IMAGE = 4
LABEL_HEIGHT_AT_BASE = 28
BASE_DPI = 150
# A failure no change of the document can fix: the key, the quota, the rate.
SYSTEMIC_STATUSES = (401, 403, 429)
SYSTEMIC_MARKERS = ("ratelimiterror", "rate_limit_exceeded", "authenticationerror")
IMAGE_CAP_PATTERNS = (
    re.compile(r"(?:at most|maximum of|up to|more than)\s+(\d+)\s+images?"),
    re.compile(r"(?:maximum|max)\s+(?:number of )?images?[^\d]{0,20}(\d+)"),
)
PAYLOAD_MARKERS = (
    "request entity too large", "payload too large", "request body too large", "request_too_large",
    "image too large", "image dimensions exceed",
)  # fmt: skip
CONTEXT_MARKERS = (
    "context_length_exceeded", "maximum context length", "exceeds maximum input length", "input is too long",
    "prompt is too long", "exceeds the model's maximum context", "longer than the maximum model length",
)  # fmt: skip


def input_limit(error: HTTPStatusError) -> tuple[Limit | None, int | None]:
    """(which input limit the model server's refusal names, the image cap it states), or (None, None)
    for any other failure. The body may be the model server's error envelope around the upstream's."""
    text = error.response_content.decode("utf-8", errors="replace").lower()
    if error.status in SYSTEMIC_STATUSES or any(marker in text for marker in SYSTEMIC_MARKERS):
        return None, None
    for pattern in IMAGE_CAP_PATTERNS:
        if found := pattern.search(text):
            return "image_count", int(found[1])
    if "too many images" in text:
        return "image_count", None
    if error.status == 413 or any(marker in text for marker in PAYLOAD_MARKERS):
        return "payload", None
    if any(marker in text for marker in CONTEXT_MARKERS):
        return "context", None
    return None, None


@dataclass(frozen=True)
class Page:
    number: int
    text: str
    image: Path


@dataclass(frozen=True)
class Manifest:
    source_dpi: int
    pages: list[Page]


def load_manifest(path: Path) -> Manifest:
    """The manifest at `path`, pages in page order; a file that is not one raises ValueError naming it."""
    try:
        data = orjson.loads(path.read_bytes())
        pages = sorted(
            (
                Page(int(p["page_number"]), str(p.get("text") or ""), path.parent / str(p["image"]))
                for p in data["pages"]
            ),
            key=lambda page: page.number,
        )
        return Manifest(int(data["source_dpi"]), pages)
    except (orjson.JSONDecodeError, KeyError, TypeError, ValueError) as error:
        raise ValueError(f"{path} is not a document manifest ({type(error).__name__}: {error})") from None


@dataclass
class Delivery:
    """One rollout's delivery settings and the attempts the endpoint refused."""

    image_dpi: int
    max_images: int | None
    pages_per_image: int = 1
    page_count: int = 0
    image_count: int = 0
    image_pages_covered: int = 0
    image_pages_omitted: int = 0
    image_coverage_end_page: int | None = None
    attempts: list[dict[str, Any]] = field(default_factory=list)

    def record(self, limit: str | None = None) -> dict[str, Any]:
        return {
            "image_dpi": self.image_dpi,
            "pages_per_image": self.pages_per_image,
            "image_count": self.image_count,
            "page_count": self.page_count,
            "image_pages_covered": self.image_pages_covered,
            "image_pages_omitted": self.image_pages_omitted,
            "image_coverage_end_page": self.image_coverage_end_page,
            "limit": limit,
        }

    def adapt(self, limit: Limit, image_cap: int | None, min_dpi: int) -> bool:
        """Shrink the next attempt after a refusal of `limit`; False when nothing can shrink further."""
        self.attempts.append(self.record(limit))
        if limit == "image_count":
            cap = image_cap if image_cap is not None else self.image_count - 1
            if cap < 1 or cap >= self.image_count:
                return False
            self.max_images = cap if self.max_images is None else min(self.max_images, cap)
            return True
        if self.image_dpi <= min_dpi:
            return False
        self.image_dpi = max(min_dpi, math.floor(self.image_dpi * BACKOFF))
        return True

    def images(self, pages: list[Page], source_dpi: int, image_format: str, jpeg_quality: int) -> list[dict]:
        """The `input_image` parts of `pages` at the current DPI, composited to respect `max_images`."""
        self.page_count = len(pages)
        self.pages_per_image = 1
        while (
            self.max_images is not None
            and self.pages_per_image < MAX_PAGES_PER_IMAGE
            and math.ceil(len(pages) / self.pages_per_image) > self.max_images
        ):
            self.pages_per_image *= 2
        shown = pages if self.max_images is None else pages[: self.max_images * self.pages_per_image]
        groups = [shown[i : i + self.pages_per_image] for i in range(0, len(shown), self.pages_per_image)]
        self.image_count = len(groups)
        self.image_pages_covered = len(shown)
        self.image_pages_omitted = len(pages) - len(shown)
        self.image_coverage_end_page = shown[-1].number if shown else None
        return [
            image_part(
                composite([(page.number, page_image(page.image, source_dpi, self.image_dpi)) for page in group],
                          self.image_dpi),
                image_format,
                jpeg_quality,
            )
            for group in groups
        ]  # fmt: skip

    def notice(self) -> list[dict[str, Any]]:
        """A note to the policy when pages share images or some page images were left out."""
        notes = []
        if self.pages_per_image > 1:
            notes.append(
                f"The page images below hold up to {self.pages_per_image} pages each; every cell is labelled "
                "with its page number."
            )
        if self.image_pages_omitted:
            notes.append(
                f"Page images stop after page {self.image_coverage_end_page}: {self.image_pages_omitted} later "
                "page image(s) were left out for the endpoint's image limit. The document text covers every page."
            )
        return [text_part(f"<document_delivery>\n{' '.join(notes)}\n</document_delivery>")] if notes else []


def document_text(pages: list[Page]) -> list[dict[str, Any]]:
    text = "\n\n".join(page.text for page in pages).strip()
    return [text_part(f"<document>\n{text}\n</document>")] if text else []


def page_image(path: Path, source_dpi: int, image_dpi: int) -> Image.Image:
    """The page's cached rendering, scaled down to `image_dpi` (never re-rendered, never scaled up)."""
    with Image.open(path) as opened:
        image = opened.convert("RGB")
    if image_dpi >= source_dpi:
        return image
    scale = image_dpi / source_dpi
    return image.resize((max(1, round(image.width * scale)), max(1, round(image.height * scale))),
                        Image.Resampling.LANCZOS)  # fmt: skip


def composite(pages: list[tuple[int, Image.Image]], image_dpi: int) -> Image.Image:
    """One page as it is; several in a grid of COMPOSITE_COLUMNS, each under a "Page N" label."""
    if len(pages) == 1:
        return pages[0][1]
    label = max(24, round(LABEL_HEIGHT_AT_BASE * image_dpi / BASE_DPI))
    cell_w = max(image.width for _, image in pages)
    cell_h = max(image.height for _, image in pages) + label
    rows = math.ceil(len(pages) / COMPOSITE_COLUMNS)
    sheet = Image.new("RGB", (COMPOSITE_COLUMNS * cell_w, rows * cell_h), "white")
    pen = ImageDraw.Draw(sheet)
    for position, (number, image) in enumerate(pages):
        x, y = (position % COMPOSITE_COLUMNS) * cell_w, (position // COMPOSITE_COLUMNS) * cell_h
        pen.text((x + 8, y + 6), f"Page {number}", fill="black")
        sheet.paste(image, (x, y + label))
    return sheet


def image_part(image: Image.Image, image_format: str, jpeg_quality: int) -> dict[str, Any]:
    out = io.BytesIO()
    if image_format == "jpeg":
        image.save(out, format="JPEG", quality=jpeg_quality, optimize=True)
    else:
        image.save(out, format="PNG", optimize=True)
    url = f"data:image/{image_format};base64,{base64.b64encode(out.getvalue()).decode()}"
    return {"type": "input_image", "image_url": url, "detail": "high"}


def text_part(text: str) -> dict[str, Any]:
    return {"type": "input_text", "text": text}
