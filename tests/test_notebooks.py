"""Notebooks are committed clean, stage notebooks have a papermill parameters cell, and the library matches the
notebooks."""
import json
import re

import pytest

from conftest import ROOT

NBS = sorted((ROOT / "nbs").glob("*.ipynb"))
STAGES = [p for p in NBS if re.match(r"\d\d_", p.name)
          and any("tags" in c.get("metadata", {}) and "parameters" in c["metadata"]["tags"]
                  for c in json.loads(p.read_text())["cells"])]


@pytest.mark.parametrize("nb", NBS, ids=lambda p: p.name)
def test_clean(nb):
    d = json.loads(nb.read_text())
    for i, c in enumerate(d["cells"]):
        if c["cell_type"] == "code":
            assert c.get("execution_count") is None, f"{nb.name} cell {i}: execution count committed (run nbdev-clean)"
            assert not c.get("outputs"), f"{nb.name} cell {i}: outputs committed (clear outputs before committing)"


def test_stage_notebooks_have_one_parameters_cell():
    assert any(p.name == "10_claims.ipynb" for p in STAGES)
    for nb in STAGES:
        cells = json.loads(nb.read_text())["cells"]
        tagged = [c for c in cells if "parameters" in c.get("metadata", {}).get("tags", [])]
        assert len(tagged) == 1, nb.name
        assert "run_dir = None" in "".join(tagged[0]["source"]), \
            f"{nb.name}: the parameters cell must default run_dir to None"


@pytest.mark.parametrize("nb", [p for p in NBS if p.name not in ("index.ipynb", "guide.ipynb")], ids=lambda p: p.name)
def test_exported_module_exists(nb):
    src = "\n".join("".join(c["source"]) for c in json.loads(nb.read_text())["cells"] if c["cell_type"] == "code")
    m = re.search(r"#\|\s*default_exp\s+(\S+)", src)
    assert m, f"{nb.name}: no default_exp"
    mod = ROOT / "groundbench" / (m.group(1).replace(".", "/") + ".py")
    assert mod.exists(), f"{nb.name} exports to {mod}, which is missing (run nbdev-export)"
