"""Writes data/example.jsonl: five invented CRISPR screens over one 40-gene library (run from the repo root).

Each screen ranks its hits by relevance (positive), marks opposite-direction hits negative, and leaves the
rest of the library at 0. Deterministic: no randomness, so the file only changes when this script does.
"""

from __future__ import annotations

import json
from pathlib import Path

LIBRARY = (
    "TP53 CDKN1A MDM2 KRAS BRAF NRAS PTEN PIK3CA AKT1 MTOR RB1 CDK4 CDK6 CCND1 MYC MAX BCL2 BAX BAK1 "
    "MCL1 BBC3 CASP3 CASP8 FADD TNFRSF10B ATM ATR CHEK1 CHEK2 BRCA1 BRCA2 PARP1 ABCB1 SLC29A1 DCK "
    "KEAP1 NFE2L2 VHL HIF1A EGFR"
).split()

SYSTEM = (
    "You predict the outcome of pooled CRISPR screens. Think it through, then write the line "
    "'[[ ## answer ## ]]' followed by your ranked gene list: HGNC symbols, strongest hit first, comma "
    "separated, nothing else after it."
)

SCREENS = [
    ("assaybench-ex-1", "Fitness / Proliferation / Viability", "knockout", "HCT116 (colorectal carcinoma)",
     "cell viability after 14 days with nutlin-3a", "resistance (genes whose loss lets cells grow)",
     {"TP53": 3.0, "CDKN1A": 2.0, "BAX": 1.5, "BBC3": 1.0, "MDM2": -2.0}),
    ("assaybench-ex-2", "Drug / Chemical / Environmental Response", "knockout", "K562 (leukemia)",
     "survival under cytarabine", "resistance",
     {"DCK": 3.0, "SLC29A1": 2.5, "BAK1": 1.0}),
    ("assaybench-ex-3", "Drug / Chemical / Environmental Response", "knockout", "A549 (lung adenocarcinoma)",
     "survival under the PARP inhibitor olaparib", "sensitization (genes whose loss kills cells)",
     {"BRCA1": 3.0, "BRCA2": 3.0, "ATM": 2.0, "CHEK2": 1.0, "PARP1": -2.5}),
    ("assaybench-ex-4", "Fitness / Proliferation / Viability", "knockout", "A375 (melanoma, BRAF V600E)",
     "proliferation under vemurafenib", "resistance",
     {"NRAS": 2.5, "PTEN": 2.0, "KEAP1": 1.0, "EGFR": 1.5}),
    ("assaybench-ex-5", "Cell Death / Apoptosis", "knockout", "Jurkat (T-cell leukemia)",
     "survival after TRAIL treatment", "resistance",
     {"TNFRSF10B": 3.0, "FADD": 3.0, "CASP8": 2.5, "BAX": 1.0}),
]  # fmt: skip


def row(screen: tuple) -> dict:
    source_id, phenotype_class, modality, cell_line, phenotype, direction, hits = screen
    question = (
        f"A genome-scale CRISPR {modality} screen was run in {cell_line}. Phenotype: {phenotype}. "
        f"Hits are genes scored as significant for {direction}. List the 10 genes most likely to be hits, "
        "ranked from strongest to weakest."
    )
    return {
        "responses_create_params": {
            "input": [{"role": "system", "content": SYSTEM}, {"role": "user", "content": question}]
        },
        "source_id": source_id,
        "dataset_name": "synthetic",
        "split": "example",
        "question": question,
        "cleaned_phenotype": phenotype_class,
        "screen_category": modality,
        "num_genes": len(LIBRARY),
        "relevance_genes": LIBRARY,
        "relevance_scores": [hits.get(gene, 0.0) for gene in LIBRARY],
    }


if __name__ == "__main__":
    path = Path(__file__).resolve().parent / "example.jsonl"
    path.write_text("".join(json.dumps(row(s)) + "\n" for s in SCREENS), encoding="utf-8")
