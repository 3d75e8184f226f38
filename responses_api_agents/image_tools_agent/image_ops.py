"""The ten image tools a policy may call while it inspects its pictures, as pure functions of Pillow images.

Each tool reads the images of the rollout by index (`img_idx`, `img_idx_a`/`img_idx_b`, `img_indices`),
makes one new picture and a few facts about it. Boxes and points are on the 0-1000 grid over width and
height (a box with any coordinate above 1000 is read as pixels instead, as NeMo Gym's tools read it). A call
that cannot be carried out raises `ToolError`, whose message is what the model is told.
"""

from __future__ import annotations

import io
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
from PIL import Image, ImageDraw
from scipy import ndimage

GRID = 1000
# Vision encoders take sides in multiples of 32 pixels; a zoomed region smaller than that is widened first.
PATCH = 32
MAX_OUTPUT_SIDE = 4096
DEFAULT_ZOOM = 3.0
# A channel difference above this marks a pixel as changed (image_diff_tool).
CHANGED_LEVEL = 30
DEFAULT_TOLERANCE = 40
DEFAULT_MIN_BLOB = 30
FIND_MIN_BLOB = 20
MAX_BLOBS = 40
PATCH_RADIUS = 12
SWATCH_SIDE = 150
SIDE_BY_SIDE_GAP = 8
SIDE_BY_SIDE_RANGE = (2, 6)
WHITE = (255, 255, 255)
MARK = (255, 0, 0)
MATCH_TINT = (255, 0, 255)


class ToolError(ValueError):
    """A call the tool cannot carry out (bad argument, index out of range, empty region)."""


@dataclass(frozen=True)
class ToolOutput:
    image: Image.Image
    facts: dict[str, Any]


@dataclass(frozen=True)
class ResizeBounds:
    """Pixel count a zoomed region is scaled into (NeMo Gym's crop_min_pixels / crop_max_pixels)."""

    min_pixels: int
    max_pixels: int


def encoded(image: Image.Image, image_format: str, jpeg_quality: int) -> bytes:
    """The picture as the model gets it: RGB, at most MAX_OUTPUT_SIDE a side, as JPEG or PNG."""
    image = image.convert("RGB")
    if max(image.size) > MAX_OUTPUT_SIDE:
        image = image.copy()
        image.thumbnail((MAX_OUTPUT_SIDE, MAX_OUTPUT_SIDE), Image.Resampling.LANCZOS)
    out = io.BytesIO()
    if image_format == "png":
        image.save(out, format="PNG")
    else:
        image.save(out, format="JPEG", quality=jpeg_quality)
    return out.getvalue()


def run_tool(
    name: str, arguments: dict[str, Any], images: list[Image.Image], bounds: ResizeBounds
) -> ToolOutput:
    tool = TOOLS.get(name)
    if tool is None:
        raise ToolError(f"Unknown tool name: {name}")
    return tool(arguments, images, bounds)


# ---- argument readers --------------------------------------------------------------------------------------


def image_at(
    images: list[Image.Image], arguments: dict[str, Any], key: str, default: Any = None
) -> tuple[int, Image.Image]:
    value = arguments.get(key, default)
    try:
        index = int(value)
    except (TypeError, ValueError):
        raise ToolError(f"{key} must be an integer") from None
    if not 0 <= index < len(images):
        raise ToolError(f"{key} {index} is out of range for {len(images)} image(s)")
    return index, images[index]


def as_box(value: Any) -> list[float] | None:
    """Four numbers as [left, top, right, bottom] (corners given in either order), else None."""
    if not isinstance(value, list | tuple) or len(value) != 4:
        return None
    try:
        x1, y1, x2, y2 = (float(v) for v in value)
    except (TypeError, ValueError):
        return None
    if not all(math.isfinite(v) for v in (x1, y1, x2, y2)):
        return None
    return [min(x1, x2), min(y1, y2), max(x1, x2), max(y1, y2)]


def box_overlap(a: list[float], b: list[float]) -> float:
    """Intersection over union of two boxes."""
    width = min(a[2], b[2]) - max(a[0], b[0])
    height = min(a[3], b[3]) - max(a[1], b[1])
    if width <= 0 or height <= 0:
        return 0.0
    inter = width * height
    union = (a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter
    return inter / union if union > 0 else 0.0


def _pixel_box(arguments: dict[str, Any], image: Image.Image) -> tuple[list[float], list[float]]:
    """(the box as given, the box in pixels of `image`); grid coordinates unless one exceeds the grid."""
    box = as_box(arguments.get("bbox_2d"))
    if box is None:
        raise ToolError("bbox_2d must be a list of four numbers")
    if max(abs(v) for v in box) > GRID:
        return box, box
    sx, sy = image.width / GRID, image.height / GRID
    return box, [box[0] * sx, box[1] * sy, box[2] * sx, box[3] * sy]


def _clipped(box: list[float], image: Image.Image) -> tuple[int, int, int, int]:
    left, top = max(0, math.floor(box[0])), max(0, math.floor(box[1]))
    right, bottom = min(image.width, math.ceil(box[2])), min(image.height, math.ceil(box[3]))
    if right <= left or bottom <= top:
        raise ToolError(
            f"the region {[round(v, 1) for v in box]} lies outside the {image.width}x{image.height} image"
        )
    return left, top, right, bottom


def _widened(region: tuple[int, int, int, int], image: Image.Image) -> tuple[int, int, int, int]:
    """A region narrower than PATCH pixels, scaled up about its centre so its short side reaches PATCH."""
    left, top, right, bottom = region
    width, height = right - left, bottom - top
    if min(width, height) >= PATCH:
        return region
    scale = PATCH / max(1, min(width, height))
    cx, cy = (left + right) / 2, (top + bottom) / 2
    half_w, half_h = math.ceil(width * scale / 2), math.ceil(height * scale / 2)
    return (
        max(0, math.floor(cx - half_w)),
        max(0, math.floor(cy - half_h)),
        min(image.width, math.ceil(cx + half_w)),
        min(image.height, math.ceil(cy + half_h)),
    )


def fitted_size(width: float, height: float, bounds: ResizeBounds) -> tuple[int, int]:
    """Sides in multiples of PATCH, near width x height, whose product lies within the bounds."""
    w = max(PATCH, round(width / PATCH) * PATCH)
    h = max(PATCH, round(height / PATCH) * PATCH)
    if w * h > bounds.max_pixels:
        shrink = math.sqrt(width * height / bounds.max_pixels)
        w = max(PATCH, math.floor(width / shrink / PATCH) * PATCH)
        h = max(PATCH, math.floor(height / shrink / PATCH) * PATCH)
    elif w * h < bounds.min_pixels:
        grow = math.sqrt(bounds.min_pixels / (width * height))
        w, h = math.ceil(width * grow / PATCH) * PATCH, math.ceil(height * grow / PATCH) * PATCH
    return w, h


def _number(arguments: dict[str, Any], key: str, default: Any = None) -> float:
    try:
        value = float(arguments[key] if default is None else arguments.get(key, default))
    except (KeyError, TypeError, ValueError):
        raise ToolError(f"{key} must be a number") from None
    if not math.isfinite(value):
        raise ToolError(f"{key} must be finite")
    return value


def _whole(arguments: dict[str, Any], key: str, default: int, low: int, high: int | None = None) -> int:
    try:
        value = int(arguments.get(key, default))
    except (TypeError, ValueError):
        raise ToolError(f"{key} must be an integer") from None
    if value < low or (high is not None and value > high):
        raise ToolError(
            f"{key} must be in the {low}-{high} range" if high is not None else f"{key} must be >= {low}"
        )
    return value


def _colour(value: Any) -> list[int]:
    if not isinstance(value, list | tuple) or len(value) != 3:
        raise ToolError("color must be an [R, G, B] list")
    try:
        colour = [int(channel) for channel in value]
    except (TypeError, ValueError):
        raise ToolError("color must contain three integers") from None
    if any(not 0 <= channel <= 255 for channel in colour):
        raise ToolError("color channels must be in the 0-255 range")
    return colour


def _on_grid(x: float, y: float, image: Image.Image) -> list[int]:
    return [
        min(GRID, max(0, round(x / image.width * GRID))),
        min(GRID, max(0, round(y / image.height * GRID))),
    ]


def _grid_box(box: tuple[int, int, int, int] | list[int], image: Image.Image) -> list[int]:
    return [*_on_grid(box[0], box[1], image), *_on_grid(box[2], box[3], image)]


def _label(arguments: dict[str, Any]) -> str:
    return str(arguments.get("label", ""))


# ---- the tools ---------------------------------------------------------------------------------------------


def zoom(arguments: dict[str, Any], images: list[Image.Image], bounds: ResizeBounds) -> ToolOutput:
    index, image = image_at(images, arguments, "img_idx", 0)
    box, pixels = _pixel_box(arguments, image)
    left, top, right, bottom = _widened(_clipped(pixels, image), image)
    factor = _number(arguments, "factor", DEFAULT_ZOOM)
    if factor <= 0:
        raise ToolError("factor must be a positive number")
    size = fitted_size((right - left) * factor, (bottom - top) * factor, bounds)
    output = image.crop((left, top, right, bottom)).resize(size, Image.Resampling.BICUBIC)
    return ToolOutput(output, {"box": box, "factor": factor, "label": _label(arguments), "img_idx": index})


def crop(arguments: dict[str, Any], images: list[Image.Image], bounds: ResizeBounds) -> ToolOutput:
    index, image = image_at(images, arguments, "img_idx", 0)
    box, pixels = _pixel_box(arguments, image)
    output = image.crop(_clipped(pixels, image))
    return ToolOutput(output, {"box": box, "label": _label(arguments), "img_idx": index})


def rotate(arguments: dict[str, Any], images: list[Image.Image], bounds: ResizeBounds) -> ToolOutput:
    index, image = image_at(images, arguments, "img_idx", 0)
    degrees = _number(arguments, "degrees")
    output = image.rotate(degrees, expand=True, fillcolor=WHITE)
    return ToolOutput(output, {"degrees": degrees, "label": _label(arguments), "img_idx": index})


def flip(arguments: dict[str, Any], images: list[Image.Image], bounds: ResizeBounds) -> ToolOutput:
    index, image = image_at(images, arguments, "img_idx", 0)
    axis = str(arguments.get("axis", ""))
    transposes = {"horizontal": Image.Transpose.FLIP_LEFT_RIGHT, "vertical": Image.Transpose.FLIP_TOP_BOTTOM}
    if axis not in transposes:
        raise ToolError('axis must be "horizontal" or "vertical"')
    return ToolOutput(
        image.transpose(transposes[axis]), {"axis": axis, "label": _label(arguments), "img_idx": index}
    )


def _pair(arguments: dict[str, Any], images: list[Image.Image]) -> tuple[int, Image.Image, int, Image.Image]:
    index_a, first = image_at(images, arguments, "img_idx_a")
    index_b, second = image_at(images, arguments, "img_idx_b")
    return index_a, first, index_b, second.resize(first.size, Image.Resampling.BICUBIC)


def diff(arguments: dict[str, Any], images: list[Image.Image], bounds: ResizeBounds) -> ToolOutput:
    index_a, first, index_b, second = _pair(arguments, images)
    delta = np.abs(np.asarray(first, dtype=np.int16) - np.asarray(second, dtype=np.int16)).astype(np.uint8)
    strongest = delta.max(axis=2)
    changed = strongest > CHANGED_LEVEL
    facts: dict[str, Any] = {
        "mean_abs_diff": round(float(delta.mean()), 2),
        "changed_pixel_fraction": round(float(changed.mean()), 4),
        "label": _label(arguments),
        "img_idx_a": index_a,
        "img_idx_b": index_b,
    }
    if changed.any():
        ys, xs = np.nonzero(changed)
        facts["changed_bbox"] = _grid_box(
            [int(xs.min()), int(ys.min()), int(xs.max()) + 1, int(ys.max()) + 1], first
        )
    heat = np.zeros_like(delta)
    heat[..., 0] = np.clip(strongest.astype(np.uint16) * 3, 0, 255).astype(np.uint8)
    return ToolOutput(Image.blend(first, Image.fromarray(heat), 0.6), facts)


def overlay(arguments: dict[str, Any], images: list[Image.Image], bounds: ResizeBounds) -> ToolOutput:
    index_a, first, index_b, second = _pair(arguments, images)
    alpha = _number(arguments, "alpha", 0.5)
    if not 0.0 <= alpha <= 1.0:
        raise ToolError("alpha must be in the 0-1 range")
    facts = {"alpha": alpha, "label": _label(arguments), "img_idx_a": index_a, "img_idx_b": index_b}
    return ToolOutput(Image.blend(first, second, alpha), facts)


def side_by_side(arguments: dict[str, Any], images: list[Image.Image], bounds: ResizeBounds) -> ToolOutput:
    indices = arguments.get("img_indices")
    low, high = SIDE_BY_SIDE_RANGE
    if not isinstance(indices, list | tuple) or not low <= len(indices) <= high:
        raise ToolError(f"img_indices must list between {low} and {high} image indices")
    chosen = [image_at(images, {"img_indices": value}, "img_indices") for value in indices]
    labels = arguments.get("labels") or []
    if not isinstance(labels, list | tuple):
        raise ToolError("labels must be an array when given")
    height = max(image.height for _, image in chosen)
    scaled = [
        image.resize((max(1, round(image.width * height / image.height)), height), Image.Resampling.BICUBIC)
        for _, image in chosen
    ]
    width = sum(image.width for image in scaled) + SIDE_BY_SIDE_GAP * (len(scaled) - 1)
    output = Image.new("RGB", (width, height), WHITE)
    x = 0
    for position, image in enumerate(scaled):
        if position < len(labels):
            ImageDraw.Draw(image).text((4, 4), str(labels[position]), fill=MARK)
        output.paste(image, (x, 0))
        x += image.width + SIDE_BY_SIDE_GAP
    return ToolOutput(output, {"img_indices": [index for index, _ in chosen], "label": _label(arguments)})


def _blobs(mask: np.ndarray, min_size: int) -> list[tuple[list[int], list[float], int]]:
    """(pixel box, centre, size) of each connected region of `mask` with at least `min_size` pixels."""
    labels, _ = ndimage.label(mask)
    found = []
    for number, region in enumerate(ndimage.find_objects(labels), start=1):
        if region is None:
            continue
        ys, xs = np.nonzero(labels[region] == number)
        if len(xs) < min_size:
            continue
        xs, ys = xs + (region[1].start or 0), ys + (region[0].start or 0)
        box = [int(xs.min()), int(ys.min()), int(xs.max()) + 1, int(ys.max()) + 1]
        found.append((box, [float(xs.mean()), float(ys.mean())], int(len(xs))))
        if len(found) >= MAX_BLOBS:
            break
    return found


def _colour_regions(
    arguments: dict[str, Any], images: list[Image.Image], colour_required: bool, min_size: int
):
    index, image = image_at(images, arguments, "img_idx", 0)
    pixels = np.asarray(image, dtype=np.int16)
    tolerance = _whole(arguments, "tolerance", DEFAULT_TOLERANCE, 0, 255)
    given = arguments.get("color")
    if given is not None or colour_required:
        mask = (np.abs(pixels - np.asarray(_colour(given), dtype=np.int16)) <= tolerance).all(axis=2)
    else:  # against the background: the median colour of the border
        border = np.concatenate([pixels[0], pixels[-1], pixels[:, 0], pixels[:, -1]])
        mask = (np.abs(pixels - np.median(border, axis=0).astype(np.int16)) > tolerance).any(axis=2)
    blobs = _blobs(mask, min_size)
    described = [
        {"bbox": _grid_box(box, image), "center": _on_grid(*centre, image), "centroid": _on_grid(*centre, image),
         "pixels": size}
        for box, centre, size in blobs
    ]  # fmt: skip
    return index, image, mask, blobs, described


def count_objects(arguments: dict[str, Any], images: list[Image.Image], bounds: ResizeBounds) -> ToolOutput:
    min_size = _whole(arguments, "min_size", DEFAULT_MIN_BLOB, 1)
    index, image, _, blobs, described = _colour_regions(arguments, images, False, min_size)
    output = image.copy()
    pen = ImageDraw.Draw(output)
    for number, (box, _, _) in enumerate(blobs, start=1):
        pen.rectangle(box, outline=MARK, width=2)
        pen.text((box[0] + 2, box[1] + 2), str(number), fill=MARK)
    facts = {"count": len(described), "blobs": described, "label": _label(arguments), "img_idx": index}
    return ToolOutput(output, facts)


def find_colour(arguments: dict[str, Any], images: list[Image.Image], bounds: ResizeBounds) -> ToolOutput:
    _whole(arguments, "min_size", DEFAULT_MIN_BLOB, 1)
    index, image, mask, _, described = _colour_regions(arguments, images, True, FIND_MIN_BLOB)
    tinted = np.asarray(image).copy()
    tinted[mask] = MATCH_TINT
    facts = {
        "match_fraction": round(float(mask.mean()), 4),
        "count": len(described),
        "blobs": described,
        "label": _label(arguments),
        "img_idx": index,
    }
    return ToolOutput(Image.fromarray(tinted), facts)


def colour_at(arguments: dict[str, Any], images: list[Image.Image], bounds: ResizeBounds) -> ToolOutput:
    index, image = image_at(images, arguments, "img_idx", 0)
    point = arguments.get("point_2d")
    if not isinstance(point, list | tuple) or len(point) != 2:
        raise ToolError("point_2d must be an [x, y] list")
    try:
        gx, gy = (float(v) for v in point)
    except (TypeError, ValueError):
        raise ToolError("point_2d must contain two numbers") from None
    if not (0 <= gx <= GRID and 0 <= gy <= GRID):
        raise ToolError(f"point_2d coordinates must be in the 0-{GRID} range")
    x = min(image.width - 1, max(0, round(gx / GRID * image.width)))
    y = min(image.height - 1, max(0, round(gy / GRID * image.height)))
    near = image.crop((max(0, x - PATCH_RADIUS), max(0, y - PATCH_RADIUS),
                       min(image.width, x + PATCH_RADIUS + 1), min(image.height, y + PATCH_RADIUS + 1)))  # fmt: skip
    facts = {"point_2d": [round(gx), round(gy)], "rgb": list(image.getpixel((x, y))), "label": _label(arguments),
             "img_idx": index}  # fmt: skip
    return ToolOutput(near.resize((SWATCH_SIDE, SWATCH_SIDE), Image.Resampling.NEAREST), facts)


Tool = Callable[[dict[str, Any], list[Image.Image], ResizeBounds], ToolOutput]
TOOLS: dict[str, Tool] = {
    "image_zoom_in_tool": zoom,
    "image_crop_tool": crop,
    "image_rotate_tool": rotate,
    "image_flip_tool": flip,
    "image_diff_tool": diff,
    "image_side_by_side_tool": side_by_side,
    "image_overlay_tool": overlay,
    "count_objects_tool": count_objects,
    "find_color_tool": find_colour,
    "color_at_tool": colour_at,
}
REGION_TOOLS = frozenset({"image_zoom_in_tool", "image_crop_tool"})
