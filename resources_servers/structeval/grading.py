"""Pure grading for structeval: extract the document, parse it in the requested format, look up paths.

Runs in a CPU-pool worker: parsing a large answer and walking wildcard paths through it are not bounded
by anything but the deadline. Only scores cross back to the server, never the parsed document (a YAML
alias bomb is cheap to parse but huge to copy).
"""

from __future__ import annotations

import csv
import io
import json
import tomllib
import xml.etree.ElementTree as ElementTree
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import yaml

from nemo_gym.text.extraction import FENCE, one_line

FORMATS = ("json", "yaml", "csv", "toml", "xml")
BEGIN_CODE, END_CODE = "<|BEGIN_CODE|>", "<|END_CODE|>"
CSV_HEADER_PREFIX = "csv::"
REFUSED_XML_DECLARATIONS = ("<!doctype", "<!entity")
YAML_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


@dataclass(frozen=True)
class StructGrade:
    render_score: float
    key_validation_score: float
    raw_output_score: float
    error_type: str | None = None
    error_message: str | None = None


def extract_document(text: str) -> str:
    """The first ``` block (label line skipped, closing fence optional); else what follows <|BEGIN_CODE|>
    up to <|END_CODE|> or the end; else the whole text. Stripped."""
    start = text.find(FENCE)
    while start >= 0:
        label_start = start + len(FENCE)
        label_end = text.find("\n", label_start)
        if label_end < 0:
            break
        inline_close = text.find(FENCE, label_start, label_end)
        if inline_close < 0:
            end = text.find(FENCE, label_end + 1)
            return text[label_end + 1 : end if end >= 0 else len(text)].strip()
        start = text.find(FENCE, inline_close + len(FENCE))  # `x ```inline``` y` is not a block
    begin = text.find(BEGIN_CODE)
    if begin >= 0:
        body = text[begin + len(BEGIN_CODE) :]
        return body.split(END_CODE, 1)[0].strip()
    return text.strip()


def _collection(value: Any) -> Any:
    """JSON and YAML documents are objects or arrays: a bare scalar (prose parses as a YAML string) is not."""
    if not isinstance(value, dict | list):
        raise ValueError(f"the document is a {type(value).__name__}, not an object or array")
    return value


def parse_json(text: str) -> Any:
    return _collection(json.loads(text))


def parse_yaml(text: str) -> Any:
    return _collection(yaml.load(text, Loader=YAML_LOADER))


def parse_toml(text: str) -> Any:
    return tomllib.loads(text)


def parse_csv(text: str) -> Any:
    """A header and at least one data row, every row as wide as the header (blank lines skipped).
    Shaped for paths as `{"csv_headers": [...], "csv_rows": [{header: cell}]}`."""
    rows = [row for row in csv.reader(io.StringIO(text), strict=True) if row]
    if len(rows) < 2:
        raise ValueError("a CSV document needs a header row and at least one data row")
    header = rows[0]
    for number, row in enumerate(rows[1:], start=2):
        if len(row) != len(header):
            raise ValueError(f"row {number} has {len(row)} fields; the header has {len(header)}")
    return {"csv_headers": header, "csv_rows": [dict(zip(header, row, strict=True)) for row in rows[1:]]}


def parse_xml(text: str) -> Any:
    """`{root tag: node}`; DOCTYPE and ENTITY declarations are refused, so no entity can expand."""
    lowered = text.lower()
    if any(declaration in lowered for declaration in REFUSED_XML_DECLARATIONS):
        raise ValueError("DOCTYPE and ENTITY declarations are refused")
    root = ElementTree.fromstring(text)
    return {root.tag: xml_node(root)}


def xml_node(element: ElementTree.Element) -> Any:
    """An element as xmltodict would give it: attributes as `@name`, children by tag (repeated tags as a
    list), text as `#text` when there is structure beside it; a bare element is its text (or None)."""
    text = "".join([element.text or "", *(child.tail or "" for child in element)]).strip()
    if not len(element) and not element.attrib:
        return text or None
    node: dict[str, Any] = {f"@{name}": value for name, value in element.attrib.items()}
    children: dict[str, list[Any]] = {}
    for child in element:
        children.setdefault(child.tag, []).append(xml_node(child))
    node.update({tag: values[0] if len(values) == 1 else values for tag, values in children.items()})
    if text:
        node["#text"] = text
    return node


PARSERS: dict[str, Callable[[str], Any]] = {
    "json": parse_json,
    "yaml": parse_yaml,
    "csv": parse_csv,
    "toml": parse_toml,
    "xml": parse_xml,
}


def path_tokens(path: str) -> list[str] | None:
    """`a.b[0].c` → `["a", "b", "[0]", "c"]`; backticks quote a key holding dots or brackets. None when
    a bracket is not closed."""
    tokens: list[str] = []
    current, quoted, index = "", False, 0
    while index < len(path):
        char = path[index]
        if char == "`":
            quoted = not quoted
        elif quoted or char not in ".[":
            current += char
        else:
            tokens += [current] if current else []
            current = ""
            if char == "[":
                close = path.find("]", index)
                if close < 0:
                    return None
                tokens.append(path[index : close + 1])
                index = close
        index += 1
    return tokens + [current] if current else tokens


def path_exists(document: Any, path: str) -> bool:
    """Whether `path` leads somewhere in the parsed document (see the README for the syntax)."""
    if path.startswith(CSV_HEADER_PREFIX):
        headers = document.get("csv_headers") if isinstance(document, dict) else None
        return isinstance(headers, list) and path[len(CSV_HEADER_PREFIX) :] in headers
    tokens = path_tokens(path)
    return tokens is not None and _walk(document, tokens)


def _walk(node: Any, tokens: list[str]) -> bool:
    if not tokens:
        return True
    token, rest = tokens[0], tokens[1:]
    if token in ("*", "[*]"):
        return isinstance(node, list) and any(_walk(item, rest) for item in node)
    if token.startswith("[") and token.endswith("]"):
        position = token[1:-1]
        if not (position.isdigit() and isinstance(node, list) and int(position) < len(node)):
            return False
        return _walk(node[int(position)], rest)
    if not isinstance(node, dict):
        return False
    for key in (token, token[1:] if token.startswith("@") else f"@{token}"):  # XML attributes: @ optional
        if key in node:
            return _walk(node[key], rest)
    return False


def keyword_score(text: str, keywords: list[str]) -> float:
    """Share of the keywords found anywhere in the raw answer, ignoring case (StructEval's raw check)."""
    if not keywords:
        return 0.0
    lowered = text.lower()
    return sum(keyword.lower() in lowered for keyword in keywords) / len(keywords)


def grade(answer: str, output_type: str, paths: list[str], max_chars: int) -> StructGrade:
    """render_score: the extracted document parses in `output_type` and is not empty; key_validation_score:
    share of `paths` present (0 when it does not parse)."""
    raw = keyword_score(answer, paths)
    if not answer.strip():
        return StructGrade(0.0, 0.0, raw, "empty_response", "no assistant text")
    if len(answer) > max_chars:
        return StructGrade(
            0.0, 0.0, raw, "too_long", f"answer has {len(answer)} characters; the limit is {max_chars}"
        )
    try:
        document = PARSERS[output_type](extract_document(answer))
    except (
        ValueError,
        TypeError,
        RecursionError,
        yaml.YAMLError,
        csv.Error,
        ElementTree.ParseError,
    ) as error:
        return StructGrade(0.0, 0.0, raw, "parse_error", one_line(f"{type(error).__name__}: {error}"))
    if not document:
        return StructGrade(0.0, 0.0, raw, "parse_error", "the document is empty")
    if not paths:
        return StructGrade(1.0, 0.0, raw)
    found = sum(path_exists(document, path) for path in paths)
    return StructGrade(1.0, found / len(paths), raw)
