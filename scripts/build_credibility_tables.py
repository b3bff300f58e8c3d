#!/usr/bin/env python
"""Rebuild data/credibility/derived/ from the upstream rating tables in data/credibility/.

    python scripts/build_credibility_tables.py [--out DIR]

The cleaning rules are documented in nbs/41_credibility_build.ipynb
(groundbench.credibility.build.build_derived_tables);
tests/test_credibility.py checks that the committed files are exactly what this script makes."""
import argparse
import json
from pathlib import Path

from groundbench.credibility.build import build_derived_tables

root = Path(__file__).resolve().parent.parent / "data" / "credibility"
ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
ap.add_argument("--out", type=Path, default=root / "derived")
args = ap.parse_args()
print(json.dumps(build_derived_tables(root, args.out), indent=1))
