"""Build data/external/expertqa/judge_pairs_sample.csv: 60 (claim, evidence passage, expert support) pairs from the
ExpertQA files we ship, the example and test set of `groundbench validate-judge`.

Pairs: claims whose evidence carries a passage, whose support label is Complete, Partial or Incomplete and whose
worthiness is not "No"; one passage per claim (the first cited URL with a passage). 30 Complete and 30 not Complete
(Partial and Incomplete as they come), chosen by a seeded hash and spread over the answering systems round robin;
the first half of each label (in that order) is dev, the rest test. Column names are ExpertQA's words on purpose.

    .venv/bin/python scripts/build_judge_pairs_sample.py [--check]
"""
import hashlib
import re
import sys
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from groundbench.collect.expertqa import import_expertqa  # noqa: E402

OUT = ROOT / "data" / "external" / "expertqa" / "judge_pairs_sample.csv"
PER_LABEL, MAX_EVIDENCE = 30, 3000


def build() -> pd.DataFrame:
    e = import_expertqa(ROOT / "data" / "external" / "expertqa")
    src = {(r.conversation_id, r.url): r.text for r in e.sources.itertuples()}
    rows = []
    for c in e.claims.itertuples():
        if c.support not in ("Complete", "Partial", "Incomplete") or c.worthiness == "No": continue
        ev = next((src[(c.conversation_id, u)] for u in c.evidence_urls if (c.conversation_id, u) in src), None)
        if not ev: continue
        claim = " ".join(re.sub(r"\s*\[\d+\]", "", c.claim).split())
        rows.append({"claim id": f"{c.conversation_id}-{c.claim_index}", "system": c.system, "claim": claim,
                     "evidence passage": ev[:MAX_EVIDENCE], "expert support": c.support})
    df = pd.DataFrame(rows)
    df["_h"] = [hashlib.sha256(f"judge-pairs:{i}".encode()).hexdigest() for i in df["claim id"]]
    out = []
    for complete in (True, False):
        g = df[(df["expert support"] == "Complete") == complete].sort_values("_h")
        by_sys = {s: list(x.index) for s, x in g.groupby("system", sort=True)}
        picked = []
        while len(picked) < PER_LABEL and any(by_sys.values()):
            for s in sorted(by_sys):
                if by_sys[s] and len(picked) < PER_LABEL: picked.append(by_sys[s].pop(0))
        part = df.loc[picked].copy()
        part["split"] = ["dev"] * (PER_LABEL // 2) + ["test"] * (len(part) - PER_LABEL // 2)
        out.append(part)
    return pd.concat(out).drop(columns="_h").reset_index(drop=True)


if __name__ == "__main__":
    df = build()
    if "--check" in sys.argv:
        same = OUT.exists() and pd.read_csv(OUT, dtype=str, keep_default_na=False).equals(df.astype(str))
        print("up to date" if same else f"{OUT} differs from what the script makes"); sys.exit(0 if same else 1)
    df.to_csv(OUT, index=False)
    print(f"{len(df)} pairs -> {OUT}")
