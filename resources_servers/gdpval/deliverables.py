"""Finding a rollout's deliverable files and reading their text, within bounds.

The deliverable is the folder named by the row's `deliverables_dir` (what NeMo Gym's Stirrup agent leaves
per task: the files plus `finish_params.json` and a `reference_files/` folder, both skipped here). Office
files are zip archives: their unpacked size is checked before they are opened, and every file's text is
cut to a share of the character budget, so a huge or hostile file costs bounded work.
"""

from __future__ import annotations

import os
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

OFFICE_SUFFIXES = {".docx", ".pptx", ".xlsx", ".xlsm"}
TEXT_SUFFIXES = {".txt", ".md", ".csv", ".tsv", ".json", ".html", ".htm", ".xml", ".yaml", ".yml"}
SKIPPED_NAMES = {"finish_params.json"}
SKIPPED_FOLDERS = {"reference_files"}
MAX_ENTRIES_SEEN = 5000


@dataclass(frozen=True)
class Limits:
    max_files: int
    max_file_bytes: int
    max_unpacked_bytes: int
    max_chars: int


@dataclass
class Deliverable:
    """The text the judge reads, the files it came from, and what could not be read (and why)."""

    text: str = ""
    files: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    truncated: bool = False


class UnreadableFile(Exception):
    pass


def docx_text(path: Path) -> str:
    import docx

    document = docx.Document(str(path))
    lines = [paragraph.text for paragraph in document.paragraphs if paragraph.text.strip()]
    for table in document.tables:
        for row in table.rows:
            lines.append(" | ".join(cell.text.strip() for cell in row.cells))
    return "\n".join(lines)


def pptx_text(path: Path) -> str:
    import pptx

    lines = []
    for number, slide in enumerate(pptx.Presentation(str(path)).slides, start=1):
        lines.append(f"--- slide {number} ---")
        for shape in slide.shapes:
            if shape.has_text_frame and shape.text_frame.text.strip():
                lines.append(shape.text_frame.text)
            if getattr(shape, "has_table", False) and shape.has_table:
                for row in shape.table.rows:
                    lines.append(" | ".join(cell.text.strip() for cell in row.cells))
    return "\n".join(lines)


def xlsx_text(path: Path, max_chars: int) -> str:
    import openpyxl

    workbook = openpyxl.load_workbook(str(path), read_only=True, data_only=False)
    try:
        lines: list[str] = []
        size = 0
        for sheet in workbook.worksheets:
            lines.append(f"--- sheet {sheet.title!r} ---")
            for row in sheet.iter_rows(values_only=True):
                if size > max_chars:
                    return "\n".join(lines)
                if any(value is not None for value in row):
                    line = " | ".join("" if value is None else str(value) for value in row)
                    lines.append(line)
                    size += len(line) + 1
        return "\n".join(lines)
    finally:
        workbook.close()


def file_text(path: Path, limits: Limits, budget: int) -> str:
    suffix = path.suffix.lower()
    if path.stat().st_size > limits.max_file_bytes:
        raise UnreadableFile(f"larger than {limits.max_file_bytes} bytes")
    if suffix in TEXT_SUFFIXES:
        with path.open("rb") as handle:
            return handle.read(budget * 4).decode("utf-8", errors="replace")
    if suffix not in OFFICE_SUFFIXES:
        raise UnreadableFile(f"a {suffix or 'suffix-less'} file is not read")
    try:
        with zipfile.ZipFile(path) as archive:
            unpacked = sum(member.file_size for member in archive.infolist())
    except (zipfile.BadZipFile, OSError) as error:
        raise UnreadableFile(f"not a valid {suffix[1:]} file ({error})") from None
    if unpacked > limits.max_unpacked_bytes:
        raise UnreadableFile(f"unpacks to more than {limits.max_unpacked_bytes} bytes")
    try:
        if suffix == ".docx":
            return docx_text(path)
        if suffix == ".pptx":
            return pptx_text(path)
        return xlsx_text(path, budget)
    except Exception as error:  # a damaged part inside a valid zip: the libraries raise many kinds
        raise UnreadableFile(f"not a valid {suffix[1:]} file ({type(error).__name__}: {error})") from None


def deliverable_files(folder: Path, max_files: int) -> list[Path]:
    """Regular files under `folder` (no symlinks, no dot files, no agent bookkeeping), folder by folder in
    name order, at most `max_files`; at most `MAX_ENTRIES_SEEN` entries are looked at, so a row naming a
    huge tree (`/`) costs bounded work."""
    found: list[Path] = []
    seen = 0
    for root, folders, names in os.walk(folder, followlinks=False):
        folders[:] = sorted(f for f in folders if f not in SKIPPED_FOLDERS and not f.startswith("."))
        for name in sorted(names):
            seen += 1
            path = Path(root) / name
            if name in SKIPPED_NAMES or name.startswith(".") or path.is_symlink() or not path.is_file():
                continue
            found.append(path)
            if len(found) == max_files:
                return found
        seen += len(folders)
        if seen > MAX_ENTRIES_SEEN:
            break
    return found


def read_deliverable(folder: Path, limits: Limits) -> Deliverable:
    """Every file's text under a heading with its name; the whole cut to `limits.max_chars`."""
    result = Deliverable()
    sections: list[str] = []
    budget = limits.max_chars
    for path in deliverable_files(folder, limits.max_files):
        name = str(path.relative_to(folder))
        result.files.append(name)
        try:
            text = file_text(path, limits, max(budget, 0)).strip()
        except UnreadableFile as error:
            result.errors.append(f"{name}: {error}")
            continue
        except OSError as error:
            result.errors.append(f"{name}: cannot be read ({error.strerror})")
            continue
        if len(text) > budget:
            text, result.truncated = text[: max(budget, 0)], True
        budget -= len(text)
        sections.append(f"=== {name} ===\n{text}")
    result.text = "\n\n".join(sections)
    return result
