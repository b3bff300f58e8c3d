"""What stops a LaTeX table from compiling, checked without a TeX installation: pylatexenc parses the file strictly
(an unclosed brace or environment is an error), and the checks below read what a parser lets through: a special
character outside math, a NaN, a non-ASCII character the file's first line does not account for, a row with more
cells than its column specification, an environment begun and not ended."""
import re

from pylatexenc.latexwalker import LatexWalker, LatexWalkerError

MATH = re.compile(r"(?<!\\)\$[^$]*(?<!\\)\$")


def tex_problems(text: str) -> list[str]:
    "Every problem of a `.tex` table, one line each naming its line; [] when it would compile."
    out = []
    try: LatexWalker(text, tolerant_parsing=False).get_latex_nodes()
    except LatexWalkerError as e: out.append(f"does not parse: {' '.join(str(e).split())[:200]}")
    needs = text.splitlines()[0] if text.startswith("%") else ""
    cells, begun = None, []
    for n, line in enumerate(text.splitlines(), 1):
        if line.startswith("%"): continue                                   # a comment (the packages it needs)
        line = re.sub(r"\\label\{[^}]*\}", "", line)                       # a label's _ is a name, not math
        bare = MATH.sub("", re.sub(r"\\[%_#$&{}]", "", line))
        out += [f"line {n}: unescaped {ch!r} outside math: {line[:80]}" for ch in "%_#$^~" if ch in bare]
        if line.startswith("\\caption") and "&" in bare: out.append(f"line {n}: & in the caption")
        if re.search(r"\bNaN\b|\bnan\b", line): out.append(f"line {n}: NaN")
        if any(ord(ch) > 127 for ch in line) and "fontenc" not in needs:
            out.append(f"line {n}: non-ASCII {[ch for ch in line if ord(ch) > 127][:3]} and no package named for it")
        for env in re.findall(r"\\begin\{(\w+)\}", line): begun.append(env)
        for env in re.findall(r"\\end\{(\w+)\}", line):
            if not begun or begun.pop() != env: out.append(f"line {n}: \\end{{{env}}} without its \\begin")
        if m := re.search(r"\\begin\{(?:tabular|longtable)\}\{([lrc]+)\}", line): cells = len(m.group(1))
        elif cells and line.endswith("\\\\") and not line.startswith("\\"):
            if (k := len(re.findall(r"(?<!\\)&", line)) + 1) != cells:
                out.append(f"line {n}: {k} cells in a table of {cells} columns")
    out += [f"\\begin{{{env}}} never ended" for env in begun]
    if "\\begin{longtable}" in text and "longtable" not in needs:
        out.append("a longtable, and no \\usepackage{longtable}")
    if "\\toprule" in text and "booktabs" not in needs: out.append("booktabs rules, and no \\usepackage{booktabs}")
    return out
