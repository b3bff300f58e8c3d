"""The house's shape (issues 28 and 43), read from the library's own source with `ast`: every import of a groundbench
module, at the top of a module, inside a function or by a string (`importlib.import_module("groundbench.x")`, an
f-string naming `groundbench.` modules, `__import__`), is an arrow; the arrows make no circle, the modules that show
results (the report, the explorer) reach no module that loads or calls a model, however indirectly, and the only import
by a string the library makes is the backend loader's `pkg.mod:attr`."""
import ast
import json
import re
from pathlib import Path

from conftest import ROOT

PKG = ROOT / "groundbench"
MODEL_MODULES = {"groundbench.llm.client", "groundbench.llm.backends", "groundbench.embed"}


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports_of(path: Path, modules: set[str]) -> set[str]:
    "The groundbench modules `path` imports anywhere in its code (a package's __init__ counts as the package)."
    me = module_name(path)
    package = me if path.name == "__init__.py" else me.rpartition(".")[0]
    out = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        names = []
        if isinstance(node, ast.Import): names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(up + ([base] if base else []))
            names = [base] + [f"{base}.{a.name}" for a in node.names]
        elif (target := string_import(node)) is not None:
            lit, prefix = target
            names = [lit] if lit else [m for m in modules if m.startswith(prefix)] if prefix else []
        for n in names:
            while n and n not in modules: n = n.rpartition(".")[0]
            if n and n != me: out.add(n)
    return out


def string_import(node) -> tuple[str, str] | None:
    """For a call that imports by a string (`import_module(x)`, `importlib.import_module(x)`, `__import__(x)`): (the
    module when `x` is a literal, the constant prefix when `x` is an f-string); ("", "") when `x` is a variable."""
    if not isinstance(node, ast.Call) or not node.args: return None
    f = node.func
    name = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""
    if name not in ("import_module", "__import__"): return None
    a = node.args[0]
    if isinstance(a, ast.Constant) and isinstance(a.value, str): return a.value, ""
    if isinstance(a, ast.JoinedStr) and a.values and isinstance(a.values[0], ast.Constant):
        return "", a.values[0].value
    return "", ""


def string_imports(path: Path) -> list[tuple[int, str]]:
    "Each import by a string in `path`: (line, the literal or the f-string's prefix, or '' for a variable)."
    return [(node.lineno, lit or prefix) for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
            if (t := string_import(node)) is not None for lit, prefix in [t]]


def graph() -> dict[str, set[str]]:
    files = [p for p in PKG.rglob("*.py") if p.name != "_modidx.py"]
    modules = {module_name(p) for p in files}
    return {module_name(p): imports_of(p, modules) - {"groundbench"} for p in files}


def reach(g: dict, start: str) -> set[str]:
    seen, todo = set(), [start]
    while todo:
        for n in g.get(todo.pop(), ()):
            if n not in seen: seen.add(n); todo.append(n)
    return seen


def test_the_import_graph_has_no_circle():
    g = graph()
    assert {"groundbench.runner", "groundbench.stages", "groundbench.cli.commands",
            "groundbench.report.tables"} <= set(g)
    circles = sorted(m for m in g if m in reach(g, m))
    assert not circles, f"modules on an import circle: {circles}: " + "; ".join(
        f"{m} -> {sorted(n for n in g[m] if m in reach(g, n))}" for m in circles)


# the imports by a string the library may make: the backend loader (a registered 'pkg.mod:attr'), vLLM's own module
# where vLLM is optional, and the extraction worker's preloads of third-party libraries
ALLOWED_STRING_IMPORTS = {("groundbench.llm.client", ""), ("groundbench.llm.vllm_backend", "vllm.sampling_params"),
                          ("groundbench.sources.extract", "")}


def test_no_import_by_a_string_but_the_backend_loader():
    found = {(module_name(p), lit): line for p in PKG.rglob("*.py") if p.name != "_modidx.py"
             for line, lit in string_imports(p)}
    assert set(found) == ALLOWED_STRING_IMPORTS, {k: v for k, v in found.items() if k not in ALLOWED_STRING_IMPORTS}


def test_report_and_explorer_reach_no_model_module():
    g = graph()
    for m in ("groundbench.report.tables", "groundbench.report.explorer", "groundbench.stages"):
        assert not (reach(g, m) & MODEL_MODULES), f"{m} reaches {sorted(reach(g, m) & MODEL_MODULES)}"


def test_the_graph_reader_sees_function_level_and_relative_imports(tmp_path):
    "The reader itself: a lazy import inside a function and a relative import are arrows, a foreign import is not."
    pkg = tmp_path / "groundbench" / "sub"
    pkg.mkdir(parents=True)
    f = pkg / "a.py"
    f.write_text("import os\nfrom ..core import x\ndef g():\n    from groundbench.llm.client import LLM\n")
    mods = {"groundbench.core", "groundbench.llm.client", "groundbench.sub.a", "groundbench.sub", "groundbench.est",
            "groundbench.stages"}
    global ROOT
    old, ROOT = ROOT, tmp_path
    try:
        assert imports_of(f, mods) == {"groundbench.core", "groundbench.llm.client"}
        f.write_text("import importlib\nm = importlib.import_module('groundbench.est')\n"
                     "def h(n): return importlib.import_module(f'groundbench.st{n}')\nx = __import__(n)\n")
        assert imports_of(f, mods) == {"groundbench.est", "groundbench.stages"}
        assert sorted(lit for _, lit in string_imports(f)) == ["", "groundbench.est", "groundbench.st"]
    finally: ROOT = old


NBS = ROOT / "nbs"


def default_exp(nb: Path) -> str | None:
    for c in json.loads(nb.read_text(encoding="utf-8"))["cells"]:
        m = re.match(r"#\|\s*default_exp\s+(\S+)", "".join(c["source"]))
        if m: return m.group(1)
    return None


def test_no_module_over_500_lines_and_no_export_cell_over_60():
    long = {str(p.relative_to(ROOT)): n for p in PKG.rglob("*.py") if p.name != "_modidx.py"
            if (n := len(p.read_text(encoding="utf-8").splitlines())) > 500}
    assert not long, f"modules over 500 lines: {long}"
    cells = [(nb.name, i, n) for nb in sorted(NBS.glob("*.ipynb"))
             for i, c in enumerate(json.loads(nb.read_text(encoding="utf-8"))["cells"])
             if c["cell_type"] == "code" and "".join(c["source"]).startswith("#| export")
             and (n := len("".join(c["source"]).splitlines())) > 60]
    assert not cells, f"export cells over 60 lines (notebook, cell, lines): {cells}"


def test_stage_names_are_written_once():
    "A stage's name is a literal only in the registry (stages.py); the library and the scripts use its constant."
    from groundbench.stages import STAGES
    names = "|".join(STAGES)
    lit = re.compile(rf"""["']({names})["']""")
    files = [p for p in [*PKG.rglob("*.py"), *(ROOT / "scripts").glob("*.py"), *(ROOT / "benchmarks").glob("*.py")]
             if p.name not in ("_modidx.py", "stages.py")]
    hits = [f"{p.relative_to(ROOT)}:{i}" for p in files
            for i, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1) if lit.search(line)]
    assert not hits, f"stage names written as literals: {hits}"


def test_every_stage_is_an_exported_run_with_its_notebooks_parameters():
    """Each stage's notebook exports `run` to the module the registry names; `run`'s parameters are its notebook's
    parameters cell, in the same order; a stage with LLM steps has a planner for the estimate, the others none."""
    import importlib
    import inspect
    from groundbench.plan.planners import PLANNERS
    from groundbench.stages import STAGES, StageOutput, stage_parameters
    for s in STAGES.values():
        assert default_exp(s.notebook) == s.module, (s.name, default_exp(s.notebook), s.module)
        sig = inspect.signature(importlib.import_module(f"groundbench.{s.module}").run)
        assert list(sig.parameters) == list(stage_parameters(s.name)), (s.name, list(sig.parameters))
        assert sig.return_annotation in (StageOutput, "StageOutput"), (s.name, sig.return_annotation)
        assert bool(s.llm_steps) == (s.name in PLANNERS), s.name
        src = json.loads(s.notebook.read_text(encoding="utf-8"))["cells"]
        assert any("".join(c["source"]).startswith("#| export\ndef run(") for c in src), s.name
        calls = [c for c in src if c["cell_type"] == "code" and re.search(r"\brun\(", "".join(c["source"]))
                 and not "".join(c["source"]).startswith("#| export")]
        assert calls, f"{s.name}: no cell calls run(...)"
