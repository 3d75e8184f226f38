"""The citation grammars a row may ask for, and the row's `verifier` settings.

Each grammar is a pattern with a `{IDS}` hole that the row's own `id_regex` fills, so rows with random
IDs (`citation_x7k2`) and numeric ones (`citation_12:snippet_3`) share one table. Group 1 of a grammar
holds the cited ID, or a comma-separated list of IDs where the grammar allows several (`multi`). The
`claim_wrap_xml` grammar wraps the claim itself (group 2); an empty claim is not a citation. The two
XML grammars also count their opening and closing tags, so a stray or broken tag is a malformed
citation. `curly_double` and `angle_pipe` are held out: meant for evaluation rows only, never training.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

# Any ID-shaped token, whatever the row's scheme: wider than every row's id_regex on purpose, so that a
# raw or half-formatted ID outside a well-formed citation is caught even when the row's IDs look different.
ATTEMPT = re.compile(r"citation_[A-Za-z0-9_:]+", re.IGNORECASE)

# The ID the instructions use in their examples; no row lists it as valid, so echoing the example fails.
RESERVED_EXAMPLE_ID = "citation_xmpl"

DEFAULT_ID_REGEX = {"full_source": r"citation_[0-9]+", "snippet": r"citation_[0-9]+:snippet_[0-9]+"}

_CITE_OPEN = re.compile(r"<cite\b", re.IGNORECASE)
_CITE_CLOSE = re.compile(r"</cite\s*>", re.IGNORECASE)


@dataclass(frozen=True)
class Grammar:
    template: str
    multi: bool = False
    claim_group: int | None = None
    tagged: bool = False  # open/close tags are counted (`<cite ...>` ... `</cite>`)
    holdout: bool = False
    flags: int = 0


GRAMMARS: dict[str, Grammar] = {
    "cite_xml": Grammar(r"<cite>({IDS})</cite>", multi=True, tagged=True),
    "ascii_brackets": Grammar(r"\[({IDS})\](?!\()"),  # not a markdown link [citation_1](url)
    "claim_wrap_xml": Grammar(
        r'<cite index="({IDS})">(.*?)</cite>', multi=True, claim_group=2, tagged=True, flags=re.DOTALL
    ),
    "fullwidth_brackets": Grammar("\u3010({IDS})\u3011"),  # 【...】, the lenticular brackets
    "ref_colon": Grammar(r"\[ref:({IDS})\]"),
    "double_angle": Grammar(r"<<({IDS})>>"),
    "web_brackets": Grammar(r"\[web:({IDS})\]"),
    "paren_part": Grammar(r"\(({IDS})\)"),
    "markdown_footnote": Grammar(r"\[\^({IDS})\]"),
    "curly_double": Grammar(r"\{\{({IDS})\}\}", holdout=True),
    "angle_pipe": Grammar(r"<ref\|({IDS})>", holdout=True),
}


@lru_cache(maxsize=512)
def citation_pattern(grammar_name: str, id_regex: str) -> re.Pattern[str]:
    """The grammar's pattern for this ID scheme (`str.replace`, as templates hold literal braces)."""
    grammar = GRAMMARS[grammar_name]
    ids = f"(?:{id_regex})(?:,(?:{id_regex}))*" if grammar.multi else f"(?:{id_regex})"
    return re.compile(grammar.template.replace("{IDS}", ids), grammar.flags)


def tag_counts(text: str) -> tuple[int, int]:
    """How many `<cite` opening and `</cite>` closing tags the text holds."""
    return len(_CITE_OPEN.findall(text)), len(_CITE_CLOSE.findall(text))
