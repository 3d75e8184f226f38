"""Scoring a MolDeTox molecule answer with RDKit, and finding it in the model's text.

`score_answer` is module-level and takes plain values, so it runs in the CPU worker pool: RDKit is native
code (its canonical ranking recurses per atom, so a long enough chain overflows the C stack), and a
worker that dies takes down a worker, not the server. The answer is bounded before RDKit sees it
(`max_answer_chars`).
"""

from __future__ import annotations

import json
import re
from typing import Any

from rapidfuzz.distance import Levenshtein
from rdkit import Chem, DataStructs, RDLogger
from rdkit.Chem import MACCSkeys, rdFingerprintGenerator

RDLogger.DisableLog("rdApp.*")  # an unparseable SMILES is an ordinary outcome, not a log line
FENCE = "```"
FLAT_OBJECT = re.compile(r"\{[^{}]*\}")
MORGAN = rdFingerprintGenerator.GetMorganGenerator(radius=2, fpSize=2048)
FINGERPRINTS = {
    "rdk": Chem.RDKFingerprint,
    "maccs": MACCSkeys.GenMACCSKeys,
    "morgan": MORGAN.GetFingerprint,
}


def extract_answer(text: str) -> str | None:
    """The `answer` string of the `{"answer": ...}` object the prompt asks for: the whole text if it is
    that object, else the fenced blocks and flat `{...}` objects, the rightmost first (a model that
    reasons before answering is read at its conclusion). Every candidate is a disjoint stretch of the
    text, so the parsing stays linear in it."""
    located = []
    parts = text.split(FENCE)
    offset = len(parts[0]) + len(FENCE)
    for index in range(1, len(parts) - 1):
        if index % 2 == 1:  # between an opening and a closing fence
            inner = parts[index]
            located.append((offset, inner[4:] if inner.startswith("json") else inner))
        offset += len(parts[index]) + len(FENCE)
    located += [(match.start(), match.group()) for match in FLAT_OBJECT.finditer(text)]
    candidates = [text] + [candidate for _, candidate in sorted(located, key=lambda pair: -pair[0])]
    for candidate in candidates:
        try:
            parsed = json.loads(candidate.strip())
        except (ValueError, RecursionError):
            continue
        if isinstance(parsed, dict) and isinstance(parsed.get("answer"), str) and parsed["answer"].strip():
            return parsed["answer"].strip()
    return None


def molecule(smiles: str) -> Any:
    """The RDKit molecule of a SMILES, or None."""
    try:
        return Chem.MolFromSmiles(smiles)
    except Exception:  # RDKit raises its own exception types on some malformed input
        return None


def canonical(smiles: str) -> str | None:
    parsed = molecule(smiles)
    return Chem.MolToSmiles(parsed) if parsed is not None else None


def score_answer(answer: str, gold: str, toxic: str | None) -> dict[str, Any]:
    """Exact match of canonical structures, plus validity, edit distance, fingerprint similarities and
    whether the answer is the toxic input unchanged. None for what cannot be computed."""
    gold_molecule = molecule(gold)
    if gold_molecule is None:
        return {"status": "bad_gold"}
    gold_canonical = Chem.MolToSmiles(gold_molecule)
    predicted = molecule(answer)
    scores: dict[str, Any] = {"status": "scored", "validity": float(predicted is not None)}
    if predicted is None:
        scores["exact_match"] = 0.0
        scores["levenshtein"] = float(Levenshtein.distance(answer, gold))
        return scores
    predicted_canonical = Chem.MolToSmiles(predicted)
    scores["exact_match"] = float(predicted_canonical == gold_canonical)
    scores["levenshtein"] = float(Levenshtein.distance(predicted_canonical, gold_canonical))
    for name, fingerprint in FINGERPRINTS.items():
        similarity = DataStructs.TanimotoSimilarity(fingerprint(predicted), fingerprint(gold_molecule))
        scores[f"tanimoto_{name}"] = round(similarity, 6)
    toxic_canonical = canonical(toxic) if toxic else None
    scores["is_input_copy"] = None if toxic_canonical is None else predicted_canonical == toxic_canonical
    return scores
