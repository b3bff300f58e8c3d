"""The docs site's API rendering (scripts/docs_api.py), piece by piece: only a symbol's own docstring, classes as
classes with their parameters, anchors as MkDocs makes them, and links from backticked names to the right heading
(never into code, never to one of several symbols of the same name)."""
import sys
from dataclasses import dataclass

from conftest import ROOT

sys.path.insert(0, str(ROOT / "scripts"))
from docs_api import ApiRenderer, heading_ids, link_symbols, own_doc, parameters  # noqa: E402


@dataclass
class Plain:
    a: int
    b: str = "x"


class Child(ValueError):
    pass


def f(k: int, alpha: float = 0.05,  # the level
      *rest, **kw) -> tuple[float, float]:
    "Doc of f."


def test_only_own_docstrings_and_parameters_from_the_signature():
    assert own_doc(Plain) == "" and own_doc(Child) == ""          # generated and inherited text is not shown
    assert own_doc(f) == "Doc of f."
    ps = parameters(f)
    assert [(p["name"], p["type"], p["default"]) for p in ps] == [
        ("k", "int", ""), ("alpha", "float", "0.05"), ("*rest", "", ""), ("**kw", "", "")]
    assert ps[1]["note"] == "the level"                            # the comment beside the parameter


def test_a_class_is_shown_as_a_class_with_a_parameter_table():
    md = ApiRenderer(Plain)._repr_markdown_()
    assert "class Plain(a: int, b: str = 'x')" in md and "| `b` | `str` | `'x'` |" in md
    assert "Plain(a: int" not in md.split("```")[2]                 # no generated docstring under it
    fmd = ApiRenderer(f)._repr_markdown_()
    assert "def f(k: int, alpha: float = 0.05, *rest, **kw) -> tuple[float, float]" in fmd
    assert "**Returns** `tuple[float, float]`" in fmd and "| meaning |" in fmd


def test_anchors_are_unique_as_mkdocs_makes_them_and_links_go_to_the_right_one():
    page = ("# Stages\n\n---\n\n### Stage\n\n`stage` and `Stage` and `run` and `other.helper`\n\n"
            "```python\n`stage` in code\n```\n\n---\n\n### stage\n")
    other = "---\n\n### helper\n\n---\n\n### run\n\n---\n\n### merge_caches\n"
    third = "---\n\n### run\n"
    assert heading_ids(page) == [("Stages", "stages"), ("Stage", "stage"), ("stage", "stage_1")]
    assert heading_ids(other)[-1] == ("merge_caches", "merge_caches")     # a name's underscores stay
    out, made = link_symbols({"a": page, "other": other, "third": third}, {"other": "other"})
    a = out["a"]
    assert "[`stage`](#stage_1) and [`Stage`](#stage)" in a          # the second heading got `_1`
    assert "`run`" in a and "[`run`]" not in a                      # two pages document a `run`: left plain
    assert "[`other.helper`](other.md#helper)" in a                 # a qualified name resolves
    assert "```python\n`stage` in code\n```" in a and made == 3     # code is left alone


def test_a_table_rows_first_cell_names_a_field_of_the_table_and_is_not_linked():
    "Issue 45: the mapping field `assistant_name` in a table linked to the function of that name on another page."
    page = "| field | meaning |\n|---|---|\n| `assistant_name` | one name for every answer; see `assistant_name` |\n"
    other = "---\n\n### assistant_name\n"
    out, made = link_symbols({"a": page, "other": other})
    assert "| `assistant_name` | one name" in out["a"]                           # the field: plain
    assert "see [`assistant_name`](other.md#assistant_name)" in out["a"] and made == 1   # the prose: linked
