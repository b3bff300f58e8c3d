"""`groundbench prompts`: the 600-prompt table, and bad claim files that stop with file, row and field."""
import pandas as pd
import pytest

from conftest import groundbench


@pytest.mark.parametrize("ext", ["csv", "parquet"])
def test_prompts_default_claims(tmp_path, ext):
    out = tmp_path / f"p.{ext}"
    p = groundbench("prompts", "--out", out, check=True)
    assert "600 prompts (300 fact_checker, 300 claim_believer) from 100 claims" in p.stdout
    df = pd.read_csv(out) if ext == "csv" else pd.read_parquet(out)
    assert list(df.columns) == ["prompt_id", "claim_id", "topic", "role", "template_id", "text"]
    assert len(df) == 600 and df.claim_id.nunique() == 100 and df.prompt_id.is_unique
    assert df.role.value_counts().to_dict() == {"fact_checker": 300, "claim_believer": 300}
    assert (df.groupby("topic").size() == 120).all()
    # Claim Believer template 3 is the reviewed question rewrite, nothing else
    q = df[(df.role == "claim_believer") & (df.template_id == 3)]
    assert len(q) == 100 and q.text.str.endswith("?").all()


def test_user_claims_any_language(tmp_path):
    claims = tmp_path / "mine.csv"
    claims.write_text("id,topic,claim,question\n"
                      "U1,Santé,Le vinaigre guérit le diabète,Comment le vinaigre guérit-il le diabète ?\n"
                      "U2,Здоровье,Чеснок лечит грипп,Как чеснок лечит грипп?\n", encoding="utf-8")
    out = tmp_path / "p.csv"
    groundbench("prompts", "--claims", claims, "--out", out, check=True)
    df = pd.read_csv(out)
    assert len(df) == 12
    assert "Is it true that Чеснок лечит грипп?" in set(df.text)
    assert "Comment le vinaigre guérit-il le diabète ?" in set(df.text)


BAD = {
    "missing_column": ("id,claim\nX1,foo\n", "line 1: missing column 'topic'"),
    "duplicate_id": ("id,topic,claim,question\nX1,T,foo,Why foo?\nX1,T,bar,Why bar?\n",
                     "line 3: field 'claim_id': duplicate id 'X1', first at line 2"),
    "empty_claim": ("id,topic,claim,question\nX1,T,,Why?\n", "line 2: field 'claim': empty"),
    "missing_question": ("id,topic,claim\nX1,T,foo\n", "line 2: field 'question': empty for claim 'X1'"),
    "undecodable": (b"id,topic,claim,question\nX1,T,caf\xe9,Why?\n", "line 2: not UTF-8"),
    "extra_field": ("id,topic,claim,question\nX1,T,foo,Why?,surplus\n", "line 2: more fields than the header"),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_claims_file(tmp_path, case):
    text, expected = BAD[case]
    f = tmp_path / f"{case}.csv"
    f.write_bytes(text if isinstance(text, bytes) else text.encode())
    out = tmp_path / "p.csv"
    p = groundbench("prompts", "--claims", f, "--out", out)
    assert p.returncode != 0
    assert str(f) in p.stderr and expected in p.stderr, p.stderr
    assert not out.exists()


def test_bad_template_and_missing_file(tmp_path):
    t = tmp_path / "t.csv"
    t.write_text("role,template_id,template\nfact_checker,1,Check {claims}\n")
    p = groundbench("prompts", "--templates", t, "--out", tmp_path / "p.csv")
    assert p.returncode != 0 and f"{t}: line 2: field 'template'" in p.stderr
    p = groundbench("prompts", "--claims", tmp_path / "nope.csv", "--out", tmp_path / "p.csv")
    assert p.returncode != 0 and "nope.csv: no such file" in p.stderr
