"""The citation_if gates: does the answer cite, in the asked grammar, only real IDs, and the required ones?

The answer's content is never graded (rows carry no gold answer), only its citations, and only that
some answer exists besides them. In `cite` mode the gates run in order and the first that fails names
the verdict (`gate_failed`):

0. `structural`: the text is empty, or the reply made a tool call;
1. `no_answer`: nothing but citation markup, no word character once the citations are blanked out (a
   wrapped claim counts as answer text);
2. `malformed_attempt`: once every well-formed citation is blanked out, an ID-shaped token remains
   (raw IDs, `Sources:` lists, half-formatted citations), or the XML grammars' tags do not pair up
   with the citations found;
3. `must_cite`: fewer than `min_valid_citations` valid IDs cited;
4. `no_hallucination`: a cited ID is not in `valid_id_set`;
5. `correctness_missed_gold` / `correctness_over_cap` (rows with `expected_ids`): a required ID is not
   cited, or more than `len(expected_ids) + expected_slack` valid IDs are.

In `no_cite` mode the reward is 1 when the non-empty reply holds no ID-shaped token and no citation
markup at all. Every verdict lists what was cited (`cited_ids`) so rollouts can be re-scored offline.
"""

from __future__ import annotations

import re
from typing import Any

from resources_servers.citation_if.grammars import (
    ATTEMPT,
    DEFAULT_ID_REGEX,
    GRAMMARS,
    Grammar,
    citation_pattern,
    tag_counts,
)

TERMINAL_TOOL_RESPONSE = "No further tool results are available. Provide your final answer."
_WORD = re.compile(r"\w")


def well_formed_citations(text: str, grammar: Grammar, pattern: re.Pattern[str]) -> list[re.Match[str]]:
    """The grammar's citations in the text; a claim wrap with an empty claim is none."""
    group = grammar.claim_group
    return [match for match in pattern.finditer(text) if group is None or (match.group(group) or "").strip()]


def cited_ids(citations: list[re.Match[str]]) -> list[str]:
    """Every ID the citations name, in order of first appearance."""
    return list(dict.fromkeys(cited for match in citations for cited in match.group(1).split(",")))


def blanked(text: str, citations: list[re.Match[str]], keep_group: int | None = None) -> str:
    """The text with each citation replaced by spaces (offsets kept), except its `keep_group` span."""
    chars = list(text)
    for match in citations:
        kept = match.span(keep_group) if keep_group is not None else (0, 0)
        for index in range(match.start(), match.end()):
            if not kept[0] <= index < kept[1]:
                chars[index] = " "
    return "".join(chars)


def score(text: str, function_calls: int, verifier: dict[str, Any]) -> tuple[float, dict[str, Any]]:
    """(reward, match_details) of one reply; `verifier` is a validated row verifier (grammars.Verifier)."""
    grammar_name, mode = verifier["grammar"], verifier["mode"]
    id_regex = verifier.get("id_regex") or DEFAULT_ID_REGEX[verifier["id_kind"]]
    grammar = GRAMMARS[grammar_name]
    valid = set(verifier["valid_id_set"])
    expected = verifier["expected_ids"]
    details: dict[str, Any] = {
        "gate_failed": None,
        "mode": mode,
        "grammar": grammar_name,
        "id_kind": verifier["id_kind"],
        "id_regex": id_regex,
        "structural_ok": bool(text.strip()) and function_calls == 0,
        "function_call_count": function_calls,
        "attempt_hits": False,
        "bare_id_hits": False,
        "parsed_ids": [],
        "cited_ids": [],
        "valid_cited": [],
        "invalid_cited": [],
        "num_valid_cited": 0,
        "expected_ids": None,
        "missed_ids": [],
        "over_cap": False,
    }
    if not details["structural_ok"]:
        return _failed(details, "structural")

    citations = well_formed_citations(text, grammar, citation_pattern(grammar_name, id_regex))
    parsed = cited_ids(citations)
    valid_cited = [cited for cited in parsed if cited in valid]
    attempt_hits = ATTEMPT.search(text) is not None
    details.update(
        attempt_hits=attempt_hits,
        bare_id_hits=attempt_hits,
        parsed_ids=parsed,
        cited_ids=valid_cited,
        valid_cited=valid_cited,
        invalid_cited=[cited for cited in parsed if cited not in valid],
        num_valid_cited=len(valid_cited),
    )

    if mode == "no_cite":
        any_markup = bool(citations) or (grammar.tagged and tag_counts(text)[0] > 0)
        return (1.0, details) if not attempt_hits and not any_markup else _failed(details, "no_cite")

    if not _WORD.search(blanked(text, citations, grammar.claim_group)):
        return _failed(details, "no_answer")
    opened, closed = tag_counts(text) if grammar.tagged else (len(citations), len(citations))
    if ATTEMPT.search(blanked(text, citations)) or not opened == len(citations) == closed:
        return _failed(details, "malformed_attempt")
    if len(valid_cited) < verifier["min_valid_citations"]:
        return _failed(details, "must_cite")
    if details["invalid_cited"]:
        return _failed(details, "no_hallucination")
    if expected is not None:
        missed = sorted(set(expected) - set(valid_cited))
        over_cap = len(valid_cited) > len(set(expected)) + verifier["expected_slack"]
        details.update(expected_ids=list(expected), missed_ids=missed, over_cap=over_cap)
        if missed:
            return _failed(details, "correctness_missed_gold")
        if over_cap:
            return _failed(details, "correctness_over_cap")
    return 1.0, details


def _failed(details: dict[str, Any], gate: str) -> tuple[float, dict[str, Any]]:
    details["gate_failed"] = gate
    return 0.0, details
