"""Plain-text tables for the terminal, as `gym run` and `gym status` print them."""

from __future__ import annotations


def format_table(rows: list[tuple[str, ...]]) -> str:
    """Each column as wide as its widest cell, two spaces apart, no trailing blanks."""
    widths = [max(len(row[column]) for row in rows) for column in range(len(rows[0]))]
    return "\n".join(
        "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip() for row in rows
    )
