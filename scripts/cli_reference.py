"""The command-line reference as a person types it: every `groundbench` command (and `cache merge`) with its usage line,
what it does, each argument and option by the flags it is typed with (`--claim-col`, never `claim_col`), its default,
its help, and the worked example shown under its --help. Read from the app itself (click, under typer), so it cannot
fall behind the code. A page of the docs site (scripts/build_docs.py); alone:

    .venv/bin/python scripts/cli_reference.py > cli.md
"""
from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def _cell(text) -> str:
    "A Markdown table cell: pipes escaped, one line."
    return " ".join(str(text).split()).replace("|", "\\|")


def _default(p) -> str:
    "An option's default as typed ('' when it has none or is required)."
    if p.required: return "required"
    d = p.default
    if d is None or d == () or d == []: return ""
    if isinstance(d, bool): return "on" if d else "off"
    return f"`{d}`"


def _flags(p) -> str:
    "How a parameter is typed: an argument by its name, an option by its flags and a value's name (none for a flag)."
    if p.param_type_name == "argument": return f"`{p.name.upper()}`"
    value = "" if p.is_flag or p.count else f" {p.name.upper()}"
    return " / ".join(f"`{f}{value}`" for f in [*p.opts, *p.secondary_opts])


def _section(path: str, cmd) -> list[str]:
    "One command's section: heading, usage, help, parameters table, example."
    params = [p for p in cmd.params if not getattr(p, "hidden", False) and p.name != "help"]
    args = " ".join(p.name.upper() for p in params if p.param_type_name == "argument")
    out = [f"## groundbench {path}", "", f"```\ngroundbench {path}{' ' + args if args else ''} [OPTIONS]\n```", "",
           (cmd.help or "").strip(), ""]
    if params:
        out += ["| typed as | default | meaning |", "|---|---|---|"]
        for p in params:
            hlp = getattr(p, "help", None) or ""
            if getattr(p, "multiple", False) and "repeat" not in hlp: hlp += " (repeat for more)"
            out.append(f"| {_cell(_flags(p))} | {_cell(_default(p))} | {_cell(hlp)} |")
        out.append("")
    if cmd.epilog: out += [f"{cmd.epilog.strip()}", ""]
    return out


def cli_reference() -> str:
    "The Markdown page."
    import typer
    from groundbench.cli.commands import groundbench_app
    app = typer.main.get_command(groundbench_app())
    lines = ["# Command line", "",
             "Every command of `groundbench` with its flags as you type them, read from the program itself; "
             "`groundbench COMMAND --help` prints the same. Options that take settings (`--setting section.key=value`) "
             "are described in the User guide, Configuration.", ""]
    for name, cmd in app.commands.items():
        if hasattr(cmd, "commands"):                       # a group: cache merge
            for sub, c in cmd.commands.items(): lines += _section(f"{name} {sub}", c)
        else: lines += _section(name, cmd)
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.stdout.write(cli_reference())
