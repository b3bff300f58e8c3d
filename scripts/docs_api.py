"""The docs site's API reference (scripts/build_docs.py): how each exported symbol is shown, and the links between
them.

`ApiRenderer` replaces nbdev's `show_doc` rendering on the site: a class is shown as `class Name(...)`, a function as
`def name(...)`, a patched method as `Class.name(...)`; the whole docstring as a paragraph; a table of the parameters
(name, type, default, and the comment beside the parameter where the code has one); the return type. Only a symbol's
own docstring is shown, never one it inherits (a dataclass's generated `Name(field, ...)` text, a base class's, a
library's). `link_symbols` turns a backticked name in the Markdown of every page into a link to the place that
documents it: on the same page first, else the one page that documents a symbol of that name (ambiguous names, such as
every stage's `run`, stay plain unless qualified, e.g. `report.run`).
"""
from __future__ import annotations

import dataclasses
import inspect
import re

from nbdev.showdoc import BasicMarkdownRenderer, NbdevLookup, _ext_link


def own_doc(obj) -> str:
    "The object's own docstring, cleaned; '' when it has none of its own (inherited and generated ones are not shown)."
    if inspect.isclass(obj):
        d = obj.__dict__.get("__doc__")
        if d and dataclasses.is_dataclass(obj) and d.startswith(obj.__name__ + "("): return ""
    else: d = getattr(obj, "__doc__", None)
    return inspect.cleandoc(d) if isinstance(d, str) and d.strip() else ""


def annotation(a) -> str:
    "An annotation as written ('' for none)."
    if a is inspect.Parameter.empty or a is inspect.Signature.empty: return ""
    return a if isinstance(a, str) else inspect.formatannotation(a)


def parameters(obj) -> list[dict]:
    "The parameters a caller gives (self and cls left out): name, type, default ('' for none), comment."
    try: sig = inspect.signature(obj)
    except (TypeError, ValueError): return []
    try:
        from fastcore.docments import docments
        notes = docments(obj, full=False) or {}
    except Exception: notes = {}
    out = []
    for p in sig.parameters.values():
        if p.name in ("self", "cls"): continue
        star = "*" if p.kind is p.VAR_POSITIONAL else "**" if p.kind is p.VAR_KEYWORD else ""
        default, note = ("" if p.default is p.empty else repr(p.default)), str(notes.get(p.name) or "")
        if cli := cli_parameter(p.default, p.name): default, note = cli
        out.append({"name": star + p.name, "type": annotation(p.annotation), "default": default, "note": note})
    return out


def cli_parameter(default, name: str) -> tuple[str, str] | None:
    """A command-line parameter (a typer `Option` or `Argument` as a default): its real default ('required' for none)
    and its help, led by the option's names; None for any other default."""
    try: from typer.models import OptionInfo, ParameterInfo
    except ImportError: return None
    if not isinstance(default, ParameterInfo): return None
    d = default.default
    shown = "required" if d is ... else "" if d is None else repr(d)
    names = ", ".join(x for x in (default.param_decls or ()) if x.startswith("-")) or (
        "--" + name.replace("_", "-") if isinstance(default, OptionInfo) else "")
    return shown, " ".join(x for x in (f"`{names}`" if names else "", default.help or "") if x)


def returns(obj) -> str:
    "The return annotation ('' for none, and for a class)."
    if inspect.isclass(obj): return ""
    try: r = annotation(inspect.signature(obj).return_annotation)
    except (TypeError, ValueError): return ""
    return "" if r in ("None", "") else r


def signature_line(kind: str, name: str, params: list[dict], ret: str) -> str:
    "`class Name(a: int, b=1)` or `def name(...) -> T`, one parameter a line when it would be long."
    args = [p["name"] + (f": {p['type']}" if p["type"] else "") + (
        (" = " if p["type"] else "=") + p["default"] if p["default"] and p["default"] != "required" else "")
        for p in params]
    tail = f" -> {ret}" if ret else ""
    one = f"{kind} {name}({', '.join(args)}){tail}"
    return one if len(one) <= 100 else f"{kind} {name}(\n" + "".join(f"    {a},\n" for a in args) + f"){tail}"


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


class ApiRenderer(BasicMarkdownRenderer):
    "nbdev's show_doc on the docs site: classes as classes, the parameters as a table, only own docstrings."
    def _repr_markdown_(self):
        obj = self.sym
        kind = "class" if inspect.isclass(obj) else "def"
        params, ret = parameters(obj), returns(obj)
        doc = "---\n\n"
        src = NbdevLookup().code(self.fn)
        if src: doc += _ext_link(src, "source", 'style="float:right; font-size:smaller"') + "\n\n"
        doc += f"{'#' * self.title_level} {self.nm}\n\n"
        doc += f"```python\n{signature_line(kind, self.nm, params, ret)}\n```\n\n"
        if d := own_doc(obj): doc += d + "\n\n"
        if params:
            notes = True    # a description column always: the comment beside a parameter, or a command's help
            doc += "| parameter | type | default |" + (" meaning |" if notes else "") + "\n"
            doc += "|---|---|---|" + ("---|" if notes else "") + "\n"
            for p in params:
                doc += (f"| `{p['name']}` | {'`' + _cell(p['type']) + '`' if p['type'] else ''} | "
                        f"{'`' + _cell(p['default']) + '`' if p['default'] else ''} |"
                        + (f" {_cell(p['note'])} |" if notes else "") + "\n")
            doc += "\n"
        if ret: doc += f"**Returns** `{ret}`\n\n"
        return doc


# an API heading the renderer writes: a rule, an optional source link, then "### name"
_HEADING = re.compile(r"^---\s*\n\s*\n(?:.*source</a>\s*\n\s*\n)?#{2,4} ([A-Za-z_][\w.]*)\s*$", re.M)
_CODE = re.compile(r"(```.*?```|~~~.*?~~~)", re.S)
_TICKED = re.compile(r"(?<![\[\w])`([A-Za-z_][\w]*(?:\.[A-Za-z_]\w*)*)`(?!\]\()")


def slug(name: str) -> str:
    "The anchor MkDocs (Python-Markdown's toc) gives a heading: lower case, word characters and hyphens only."
    from markdown.extensions.toc import slugify
    return slugify(name, "-")


_ANY_HEADING = re.compile(r"^(#{1,6}) (.+?)\s*#*\s*$", re.M)


def heading_ids(md: str) -> list[tuple[str, str]]:
    """(heading text, anchor) of every heading of a page outside code blocks, in order, made unique as MkDocs makes
    them (a second `stage` after `Stage` is `stage_1`)."""
    from markdown.extensions.toc import unique
    used, out = set(), []
    for i, part in enumerate(_CODE.split(md)):
        if i % 2: continue
        for m in _ANY_HEADING.finditer(part):
            text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", m.group(2)).replace("`", "").replace("*", "")
            out.append((m.group(2), unique(slug(text), used)))
    return out


def documented(pages: dict[str, str]) -> dict[str, dict[str, str]]:
    "Per page, each symbol its API heading documents and that heading's anchor: {page: {name: anchor}}."
    out = {}
    for page, md in pages.items():
        api, ids = {m.group(1) for m in _HEADING.finditer(md)}, heading_ids(md)
        out[page] = {text: anchor for text, anchor in ids if text in api}
    return out


def _link_line(line: str, sub) -> str:
    """A line's backticked names linked; in a table row the first cell names a field of that table (a mapping field, a
    parameter, a column: `assistant_name` there is not the function of that name), so it is left as it is."""
    if not line.lstrip().startswith("|"): return _TICKED.sub(sub, line)
    lead, bar, rest = line.partition("|")
    first, bar2, others = rest.partition("|")
    return lead + bar + first + bar2 + _TICKED.sub(sub, others)


def link_symbols(pages: dict[str, str], modules: dict[str, str] | None = None) -> tuple[dict[str, str], int]:
    """Each page's Markdown with backticked symbol names linked to their API headings, outside code blocks; `modules`
    (page -> its module's short name, e.g. `report`) lets a qualified `report.run` resolve. Returns the pages and the
    number of links made."""
    docs, modules = documented(pages), modules or {}
    where: dict[str, list[tuple[str, str]]] = {}
    for page, names in docs.items():
        for name, anchor in names.items():
            where.setdefault(name, []).append((page, anchor))
            if page in modules: where.setdefault(f"{modules[page]}.{name}", []).append((page, anchor))
    made = 0

    def link(page):
        methods = {}   # a method's short name on its own page: `stage` there is `Run.stage`
        for full, anchor in docs[page].items():
            if "." in full: methods.setdefault(full.rsplit(".", 1)[1], []).append(anchor)
        def sub(m):
            nonlocal made
            name = m.group(1)
            if name in docs[page]: target = f"#{docs[page][name]}"
            elif len(methods.get(name, [])) == 1: target = f"#{methods[name][0]}"
            elif len(where.get(name, [])) == 1: target = f"{where[name][0][0]}.md#{where[name][0][1]}"
            else: return m.group(0)
            made += 1
            return f"[`{name}`]({target})"
        return sub

    out = {}
    for page, md in pages.items():
        parts = _CODE.split(md)   # odd parts are code blocks: left alone
        out[page] = "".join(p if i % 2 else "\n".join(line if line.lstrip().startswith("#") else
                                                       _link_line(line, link(page)) for line in p.split("\n"))
                            for i, p in enumerate(parts))
    return out, made
