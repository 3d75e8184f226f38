"""Scoring a predicted mechanism against the gold one with RDKit: ordered checkpoint matching of
canonical product sets (the rule of upstream's scorer, with NeMo Gym's three departures; see README).

`score_answer` is module-level and takes plain values, so it runs in the CPU worker pool: RDKit is native
code, and a worker that dies on an input takes down a worker, not the server. Model-given SMILES are
bounded before RDKit sees them (`Limits`): a component longer than `max_smiles_chars`, a step with more
than `max_components` species is not parsed, and a pathway is read for at most `max_steps` steps and
`max_total_chars` characters of products (RDKit's time grows faster than linearly with molecule size, so
a flood of large distinct species would otherwise outlast any deadline).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from rdkit import Chem, RDLogger

from resources_servers.fukuyamabench.pathway import extract_pathway

RDLogger.DisableLog("rdApp.*")  # an unparseable SMILES is an ordinary outcome, not a log line
ATOM_MAP = re.compile(r":\d+\]")


@dataclass(frozen=True)
class Limits:
    max_smiles_chars: int
    max_components: int
    max_steps: int
    max_total_chars: int


def strip_atom_maps(smiles: str) -> str:
    """`[CH3:1][O:2]` -> `[CH3][O]`: prompts give mapped reactants and models echo the maps; gold is not
    mapped."""
    return ATOM_MAP.sub("]", smiles)


@lru_cache(maxsize=4096)
def canonical(smiles: str) -> str | None:
    """Canonical SMILES, or None if RDKit cannot read it. A strict parse first; failing that, one that
    skips only the valence check (metal complexes with ligand counts RDKit's valence model rejects),
    keeping ring and aromaticity perception so the canonical form stays comparable."""
    try:
        molecule = Chem.MolFromSmiles(smiles)
        if molecule is None:
            molecule = Chem.MolFromSmiles(smiles, sanitize=False)
            if molecule is None:
                return None
            Chem.SanitizeMol(molecule, sanitizeOps=Chem.SANITIZE_ALL ^ Chem.SANITIZE_PROPERTIES)
        return Chem.MolToSmiles(molecule, canonical=True)
    except Exception:  # RDKit raises its own exception types for malformed structures
        return None


def species(smiles_list: list[str], limits: Limits | None) -> tuple[frozenset[str], bool]:
    """(canonical species, whether every component parsed). Entries split on `.` on both sides, so one
    dotted string and separate entries of the same species compare equal. `limits` bound a prediction;
    gold (None) is trusted."""
    found: set[str] = set()
    all_parsed = True
    components = [part.strip() for entry in smiles_list for part in entry.split(".") if part.strip()]
    if limits is not None and len(components) > limits.max_components:
        return frozenset(), False
    for component in components:
        too_long = limits is not None and len(component) > limits.max_smiles_chars
        form = None if too_long else canonical(component)
        if form is None:
            all_parsed = False
        else:
            found.add(form)
    return frozenset(found), all_parsed


def step_products(step: Any, limits: Limits | None) -> list[str]:
    """The product SMILES of a step (mapping stripped): `product_smiles` (a dotted string or a list) or
    `products` (strings or {"smiles": ...} objects). Anything else names no products."""
    if not isinstance(step, dict):
        return []
    cap = 4 * limits.max_smiles_chars * limits.max_components if limits is not None else None
    raw: list[str] = []
    if "product_smiles" in step:
        value = step["product_smiles"]
        if isinstance(value, str):
            raw = [value]
        elif isinstance(value, list):
            raw = [item for item in value if isinstance(item, str)]
    elif isinstance(step.get("products"), list):
        for item in step["products"]:
            if isinstance(item, dict):
                item = item.get("smiles")
            if isinstance(item, str):
                raw.append(item)
    if cap is not None and sum(len(item) for item in raw) > cap:
        return ["?" * (limits.max_smiles_chars + 1)]  # far too much to parse: an unreadable component
    return [strip_atom_maps(item) for item in raw if item]


def matches(predicted: tuple[frozenset[str], bool], gold: frozenset[str], lenient: bool) -> bool:
    """Same species; under `lenient`, a non-empty subset of gold also counts (the main product named, a
    leaving group left out). A prediction with any unreadable component never matches."""
    found, all_parsed = predicted
    if not found or not gold or not all_parsed:
        return False
    return found == gold or (lenient and found < gold)


def score_answer(
    text: str, gt_pathway: list[dict[str, Any]], checkpoints: list[list[int]], lenient: bool, limits: Limits
) -> dict[str, Any]:
    """The scores of an answer text, with `status` scored, no_pathway or bad_gold (a checkpoint no
    prediction could match: none of its gold steps exists or parses)."""
    gold = [
        [species(step_products(gt_pathway[i - 1], None), None)[0] for i in ids if 1 <= i <= len(gt_pathway)]
        for ids in checkpoints
    ]
    unmatchable = [index + 1 for index, options in enumerate(gold) if not any(options)]
    if unmatchable:
        return {"status": "bad_gold", "bad_checkpoints": unmatchable}
    pathway = extract_pathway(text)
    if pathway is None:
        return {"status": "no_pathway"}
    predicted = []
    budget = limits.max_total_chars
    for step in pathway[: limits.max_steps]:
        products = step_products(step, limits)
        budget -= sum(len(product) for product in products)
        if budget < 0:
            break  # the steps read so far are the prediction
        predicted.append(species(products, limits))
    correct, cursor = 0, 0
    for options in gold:
        while cursor < len(predicted):
            cursor += 1
            if any(matches(predicted[cursor - 1], option, lenient) for option in options):
                correct += 1
                break
        else:
            break  # the predicted steps ran out: every later checkpoint fails too
    total = len(gold)
    return {
        "status": "scored",
        "exact_match": correct == total,
        "checkpoints_correct": correct,
        "checkpoints_total": total,
        "checkpoint_accuracy": correct / total,
        "any_checkpoint_correct": correct > 0,
        "pred_length": len(pathway),
        "gt_steps": len(gt_pathway),
    }
