"""Build the docs site without Quarto: nbdev's notebook processing (show_doc rendered, hidden cells dropped, directives
applied), nbconvert's Markdown exporter, and MkDocs Material (theme assets in its wheel, the built-in offline plugin so
that
search works from a local folder, no web fonts). The Quarto site (`nbdev-docs`) stays the publishing path where Quarto
exists; this one builds on every machine.

    .venv/bin/python scripts/build_docs.py [--out _docs] [--figures-from runs/demo/report]

Writes the Markdown sources to build/docs_src/ and the site to --out (default _docs/, never committed); open
_docs/index.html in a browser. The page of a stage whose notebook describes a figure shows that figure from the report
folder given with --figures-from (the demo's, by default, when it exists).
"""
from __future__ import annotations

import argparse
import ast
import functools
import json
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
NBS = ROOT / "nbs"
sys.path.insert(0, str(ROOT))
from groundbench.stages import (CLAIMS, COLLECT, CREDIBILITY, GROUNDEDNESS, PROFILE, REPORT,  # noqa: E402
                                SOURCES)

# stage order and grouping of the navigation: (section, notebook-name prefixes)
SECTIONS = [("Foundations", tuple(f"{i:02d}" for i in range(10))), ("Claims", ("10",)),
            ("Models", tuple(str(i) for i in range(11, 20))),
            ("Collection", tuple(str(i) for i in range(20, 30))), ("Sources", ("30", "31", "32", "33")),
            ("Credibility", ("40", "41", "42", "43", "44", "45")),
            ("Groundedness", ("50", "51", "52", "53", "54", "55")),
            ("More lenses", ("59", "60", "64", "65", "68")), ("Labels and validation", ("70", "71", "72", "73")),
            ("Findings", ("74", "75", "76", "77", "78", "79")),
            ("Report and explorer", ("80", "81", "85")), ("Cost before you run", ("86", "87", "88", "89")),
            ("Running a study", ("90", "91", "92", "93", "94"))]
# the repository files the README links, and the site's page for each (every README link resolves on the site)
README_PAGES = {"nbs/guide.ipynb": "guide.md", "docs/METHOD.md": "method.md",
                "papermill_params/README.md": "parameter_files.md", "benchmarks/RESULTS.md": "benchmarks.md"}
# figures of the report a stage notebook describes
FIGURES = {"43_credibility_metrics": ["figure_2", "figure_9"], "53_groundedness_metrics": ["figure_3"],
           PROFILE: ["figure_profile"]}


def _import_only(cell) -> bool:
    "True for a code cell whose top-level statements are all imports."
    try: trees = ast.parse(cell.source).body
    except SyntaxError: return False
    return bool(trees) and all(isinstance(t, (ast.Import, ast.ImportFrom)) for t in trees)


def processors():
    """nbdev's docs processors, with two changes: only exported and import-only cells run (never a stage), and no links
    to a hosted site."""
    from nbdev.processors import FilterDefaults, _show_docs, add_links, exec_show_docs

    class exec_doc_cells(exec_show_docs):
        "Run exported cells, import-only cells and show_doc cells: what show_doc needs, and nothing that runs a stage."
        def begin(self):
            super().begin()
            if hasattr(self, "k"):   # the site's API rendering (scripts/docs_api.py) for every show_doc
                self.k.run_cell(f"import sys; sys.path.insert(0, {str(ROOT / 'scripts')!r})\n"
                                "import functools, nbdev.showdoc; from docs_api import ApiRenderer\n"
                                "show_doc = functools.partial(nbdev.showdoc.show_doc, renderer=ApiRenderer)")

        def __call__(self, cell):
            if not self.nb.has_docs_ or not hasattr(self, "k") or cell.cell_type != "code" or not cell.source: return
            ok = bool(cell.directives_.keys() & {"export", "exports", "exporti", "exec_doc"}) or _import_only(cell)
            if not ok:
                try: ok = bool(_show_docs(cell.parsed_()))
                except Exception: ok = False
            if ok: self.k.cell(cell)
            if (e := self.k.exc):
                raise RuntimeError(f"{self.nb.path_}: cell {cell.idx_}: {type(e).__name__}: {e}") from e

    procs = [exec_doc_cells if p is exec_show_docs else p for p in FilterDefaults().base_procs() if p is not add_links]
    return procs


@functools.cache
def markdown_exporter():
    "nbconvert's Markdown exporter that drops inputs tagged remove_input; made once (its templates compile once)."
    from groundbench.kernels import quiet_jsonschema
    quiet_jsonschema()   # nbformat's jsonschema, without the IRI parsers it would build at import (1.3 s)
    from nbconvert import MarkdownExporter
    from nbconvert.preprocessors import TagRemovePreprocessor
    exp = MarkdownExporter()
    exp.register_preprocessor(TagRemovePreprocessor(remove_input_tags={"remove_input"}, enabled=True), enabled=True)
    return exp


_CODE_PIPE = re.compile(r"`([^`\n]*\\\|[^`\n]*)`")


def table_pipes(md: str) -> str:
    """Code spans of table rows that hold an escaped pipe (a type `str \\| Path`) as HTML code with the pipe as an
    entity: Python-Markdown splits the row on it otherwise, and keeps the backslash inside a code span."""
    import html
    code = lambda m: "<code>" + html.escape(m.group(1).replace("\\|", "|"), quote=False).replace(
        "|", "&#124;") + "</code>"
    return "".join(_CODE_PIPE.sub(code, line) if line.lstrip().startswith("|") else line
                   for line in md.splitlines(keepends=True))


def notebook_markdown(path: Path, img_dir: Path) -> tuple[str, str]:
    "(title, Markdown) of one processed notebook; its images written to img_dir."
    exp = markdown_exporter()
    from fastcore.nbio import read_nb
    from nbdev.process import NBProcessor
    import nbformat
    nb = read_nb(path)
    nb.path_ = str(path)
    NBProcessor(nb=nb, procs=processors(), rm_directives="quarto").process()
    fm = getattr(nb, "frontmatter_", {}) or {}
    cells = [c for c in nb.cells if c.cell_type != "raw" and c.get("source")]
    raw = {"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": []}
    for i, c in enumerate(cells):
        d = {k: v for k, v in dict(c).items() if k in ("cell_type", "source", "outputs")} | {"id": f"cell-{i}"}
        d["metadata"] = {}                           # execution timings and tags: not for the page
        if d["cell_type"] == "code":
            lines = d["source"].splitlines()
            if any(re.match(r"#\|\s*echo:\s*false", l) for l in lines): d["metadata"] = {"tags": ["remove_input"]}
            # Quarto directives: not for the page
            d["source"] = "\n".join(l for l in lines if not l.startswith("#|")).strip("\n")
            d["execution_count"] = None
            d["outputs"] = [{k: v for k,
                             v in dict(o).items() if k != "execution_count"} | ({
                                 "execution_count": None} if o.get("output_type") == "execute_result" else {})
                            for o in d.get("outputs", [])]
            for o in d["outputs"]:
                if o.get("output_type") != "stream": o.setdefault("metadata", {})
        raw["cells"].append(d)
    node = nbformat.reads(json.dumps(raw), as_version=4)     # rejoins multi-line strings as nbformat reads a file
    body, res = exp.from_notebook_node(node, resources={"output_files_dir": f"img/{path.stem}"})
    for name, data in (res.get("outputs") or {}).items():
        (img_dir.parent / name).parent.mkdir(parents=True, exist_ok=True)
        (img_dir.parent / name).write_bytes(data)
    title = fm.get("title") or path.stem
    desc = fm.get("description", "")
    head = f"# {title}\n\n" + (f"> {desc}\n\n" if desc else "")
    src = f"*Source notebook: [nbs/{path.name}](notebooks/{path.name})*\n\n"
    return title, head + src + table_pipes(body)


STUDY_GUIDE_HEAD = "# Study guide: one claim from the claims file to Table 1 and Table 4\n\n"


def study_guide() -> str:
    "The study guide page, with the example claim and its prompts read from the shipped data."
    import pandas as pd
    claims = pd.read_csv(ROOT / "data/seed_study/claims.csv", dtype=str, keep_default_na=False)
    tpl = pd.read_csv(ROOT / "data/seed_study/templates.csv", dtype=str, keep_default_na=False)
    q = pd.read_csv(ROOT / "data/seed_study/questions.csv", dtype=str, keep_default_na=False)
    c = claims.iloc[0]
    cid = c.get("id", c.get("claim_id"))
    question = q[q.claim_id == cid].question.iloc[0] if "claim_id" in q and (q.claim_id == cid).any() else ""
    fc = tpl[tpl.role == "fact_checker"].iloc[0].template.replace("{claim}", c.claim).replace("{question}", question)
    cb = tpl[tpl.role == "claim_believer"].iloc[0].template.replace("{claim}", c.claim).replace("{question}", question)
    steps = [
        ("1. The claim", CLAIMS, f"`data/seed_study/claims.csv` row `{cid}` (topic *{c.topic}*): \"{c.claim}\". "
         "Every claim is filled into the three Fact-Checker and three Claim Believer templates of `templates.csv`; the "
         "Claim "
         f"Believer templates ask the reviewed question of `questions.csv`. Two of the six prompts:\n\n"
         f"- Fact-Checker, template 1: \"{fc}\"\n- Claim Believer, template 1: \"{cb}\""),
        ("2. Collection", COLLECT,
         "Each prompt goes to each assistant (browser collectors, notebooks 22-24 and 28; APIs, 25 and 26; or "
         "answers you already hold, 27 and 29). The answer becomes a `Conversation`: its text, its citations numbered "
         "by first "
         "appearance, and its segments, each sentence with the citations that cover it (METHOD 1.2, notebook 21)."),
        ("3. Sources", SOURCES,
         "Every cited URL is fetched safely (31), its text extracted (32) or rendered in Chromium (33); "
         "a page that cannot be fetched keeps its failure reason."),
        ("4. Credibility", CREDIBILITY,
         "Each cited domain gets the paper's MBFC-based label and score (42): credible (> 0), "
         "non-credible (< 0) or unrated. The conversation's CR is its credible share of rated citations; Table 1's "
         "cell for this "
         "claim's topic and the Fact-Checker role is the mean of those per-conversation rates over the topic's "
         "conversations, "
         "with 1.96 standard errors, beside the pooled rate with its Agresti-Coull interval (43)."),
        ("5. Groundedness", GROUNDEDNESS,
         "The answer is split into minimal units (51), each labelled and made self-contained; "
         "each verifiable unit is judged against the chunks of its own cited sources retrieved by embedding similarity "
         "(52). "
         "GS is the supported share of verified units per response, CG and NCG split the support by the source's "
         "credibility, "
         "and Table 4's cell is their mean over the group's responses (53)."),
        ("6. The report", REPORT,
         "Tables 1 and 4 of all runs side by side, the paper's values beside the run's with "
         "whether each difference lies within the combined interval, and the comparison of two runs or assistants; the "
         "explorer "
         "(85) opens any one conversation, claim by claim."),
    ]
    out = STUDY_GUIDE_HEAD + (
        "This page follows the first claim of the seed study through every stage; each step links the "
                              "notebook that defines it. The numbers of a real run are in its report "
                              "(`runs/<run_id>/report/`).\n\n")
    for h, nb, text in steps:
        out += f"## {h}\n\n{text}\n\nNotebook: [{nb}]({nb}.md)\n\n"
    return out


_MD_LINK = re.compile(r"(!?)\[([^\]]*)\]\(([^)\s]+)\)")

def fix_links(src: Path) -> list[str]:
    """Turn relative Markdown links to files the site does not have into plain text (e.g. third-party docstrings' own
    docs links)."""
    dropped = []
    for md in src.rglob("*.md"):
        text = md.read_text(encoding="utf-8")
        def sub(m):
            img, label, target = m.groups()
            u = target.split("#", 1)[0]
            if img or not u or re.match(r"^[a-z][a-z0-9+.-]*:", u) or (md.parent / u).exists(): return m.group(0)
            dropped.append(f"{md.name}: {target}")
            return label
        new = _MD_LINK.sub(sub, text)
        if new != text: md.write_text(new, encoding="utf-8")
    return dropped


def build(out: Path, figures_from: Path | None, src: Path) -> dict:
    "Write the Markdown sources and mkdocs.yml to `src`, build the site into `out`; returns counts."
    t0 = time.time()
    if src.exists(): shutil.rmtree(src)
    (src / "notebooks").mkdir(parents=True)
    nbs = sorted(p for p in NBS.glob("[0-9]*.ipynb"))
    nav, pages = {}, {}
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    readme = re.sub(r"^<!--.*?-->\n", "", readme, flags=re.S)
    for target, page in README_PAGES.items(): readme = readme.replace(f"]({target})", f"]({page})")
    (src / "index.md").write_text(readme, encoding="utf-8")
    from make_readme import guide_text
    (src / "guide.md").write_text(guide_text(), encoding="utf-8")
    if (ROOT / "docs" / "images").exists(): shutil.copytree(ROOT / "docs" / "images", src / "docs" / "images")
    (src / "study_guide.md").write_text(study_guide(), encoding="utf-8")
    from cli_reference import cli_reference
    (src / "cli.md").write_text(cli_reference(), encoding="utf-8")   # every command with its flags as typed
    for target, page in README_PAGES.items():    # the files the README links, as pages (the specification, ...)
        if target.endswith(".md"): shutil.copy2(ROOT / target, src / page)
    (src / "assets" / "iframe-worker").mkdir(parents=True)
    shutil.copy2(ROOT / "docs" / "vendor" / "iframe-worker" / "shim.js", src / "assets" / "iframe-worker" / "shim.js")
    figs, mds, modules = 0, {}, {}
    for p in nbs:
        title, md = notebook_markdown(p, src / "img")
        if m := re.search(r"#\|\s*default_exp\s+(\S+)", p.read_text(encoding="utf-8")):
            modules[p.stem] = m.group(1)
        for f in FIGURES.get(p.stem, []):
            png = figures_from / f"{f}.png" if figures_from else None
            if png and png.exists():
                (src / "figures").mkdir(exist_ok=True)
                shutil.copy2(png, src / "figures" / png.name)
                md += f"\n\n## {f.replace('_', ' ').capitalize()} from a demo run\n\n![{f}](figures/{png.name})\n"
                figs += 1
        mds[p.stem] = md
        shutil.copy2(p, src / "notebooks" / p.name)
        pages[p.stem] = f"{p.stem[:2]} {title}"
    from docs_api import link_symbols
    mds, links = link_symbols(mds, modules)    # backticked names -> their API headings
    for stem, md in mds.items(): (src / f"{stem}.md").write_text(md, encoding="utf-8")
    dropped = fix_links(src)
    for sec, prefixes in SECTIONS:
        nav[sec] = [{pages[s]: f"{s}.md"} for s in pages if s[:2] in prefixes]
    left = [s for s in pages if not any(s[:2] in pre for _, pre in SECTIONS)]
    if left: nav["Other"] = [{pages[s]: f"{s}.md"} for s in left]
    cfg = {"site_name": "groundbench", "docs_dir": str(src), "site_dir": str(out), "use_directory_urls": False,
           "theme": {"name": "material", "font": False,
                     "features": ["navigation.sections", "search.highlight", "content.code.copy"]},
           "plugins": ["search", "offline"],
           # vendored: the offline plugin would load it from unpkg
           "extra": {"polyfills": ["assets/iframe-worker/shim.js"]},
           "markdown_extensions": ["tables", "admonition", "attr_list", "md_in_html", {"toc": {"permalink": True}},
                                   "pymdownx.superfences", {"pymdownx.highlight": {"use_pygments": True}}],
           "nav": [{"Home": "index.md"}, {"User guide": "guide.md"}, {"Study guide": "study_guide.md"},
                   {"Specification": "method.md"}, {"Parameter files": "parameter_files.md"},
                   {"Command line": "cli.md"},
                   {"Benchmarks": "benchmarks.md"}, *[{k: v} for k, v in nav.items() if v]]}
    import yaml
    # beside the sources: MkDocs wants docs_dir to be a sibling of its config
    conf = src.parent / f"{src.name}.mkdocs.yml"
    conf.write_text(yaml.safe_dump(cfg, sort_keys=False), encoding="utf-8")
    if out.exists(): shutil.rmtree(out)
    import os
    r = subprocess.run([sys.executable, "-m", "mkdocs", "build", "-f", str(conf)], capture_output=True, text=True,
                       env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})
    if r.returncode: raise SystemExit(f"mkdocs build failed:\n{r.stdout}\n{r.stderr}")
    # a server's error page with absolute asset paths: nothing links it in a local folder
    (out / "404.html").unlink(missing_ok=True)
    info = {"pages": 3 + len(nbs), "notebooks": len(nbs), "figures": figs, "links_unlinked": dropped,
            "symbol_links": links,
            "seconds": round(time.time() - t0, 1), "site": str(out),
            "warnings": [l for l in r.stderr.splitlines() if "WARNING" in l]}
    (out / "build.json").write_text(json.dumps(info, indent=1), encoding="utf-8")
    return info


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, default=ROOT / "_docs", help="the site folder (default _docs/)")
    ap.add_argument("--figures-from", type=Path, default=None,
                    help="a report folder with figure PNGs (default runs/demo/report if present)")
    ap.add_argument("--src", type=Path, default=ROOT / "build" / "docs_src",
                    help="where the Markdown sources are written")
    a = ap.parse_args(argv)
    figs = a.figures_from or (ROOT / "runs" / "demo" / "report")
    info = build(a.out.resolve(), figs if figs.exists() else None, a.src.resolve())
    print(f"{info['pages']} pages ({info['notebooks']} notebooks), {info['figures']} figures, {len(info['warnings'])} "
          f"mkdocs warnings, "
          f"{len(info['links_unlinked'])} links to pages outside the site kept as text, "
          f"{info['seconds']} s -> {info['site']}/index.html")


if __name__ == "__main__":
    main()
