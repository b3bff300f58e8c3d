#!/usr/bin/env python
"""Rebuild data/external/ai-search-benchmark/variance.csv: the variance of CR and NCR (and their per-conversation
versions) measured on the bundled real answers, which `groundbench estimate` uses for the power of a planned study.

    python scripts/build_variance_table.py

What it measures is documented in nbs/79_findings_power.ipynb (groundbench.findings.power.variance_table);
tests/test_findings.py checks that the committed file is exactly what this script makes."""
from groundbench.core import project_root, write_table
from groundbench.findings.power import VARIANCE_FILE, variance_table

t = variance_table()
write_table(t, project_root() / VARIANCE_FILE)
print(t.to_string(index=False))
