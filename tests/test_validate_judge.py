"""`groundbench validate-judge` on labelled pairs with column names and labels of their own (issue 14): the real bundled
judge (llama.cpp, SmolLM2: a smoke judge, and labelled so) and both baselines on the same test rows; the shipped sample
is exactly what its build script makes."""
import json
import subprocess
import sys

import pandas as pd
import pytest

from conftest import ROOT, groundbench, user_docs

ROWS = [("The Eiffel Tower is in Paris.", "The Eiffel Tower is a landmark in Paris, France, built in 1889.", "Y",
         "dev"),
        ("The moon orbits Mars.", "The Moon is Earth's only natural satellite and orbits the Earth.", "N", "dev"),
        ("Water boils at 100 degrees Celsius at sea level.", "At sea level, water boils at 100 degrees Celsius.", "Y",
         "dev"),
        ("Bananas are blue when ripe.", "Ripe bananas are yellow; unripe ones are green.", "N", "dev"),
        ("Mount Everest is the highest mountain on Earth.",
         "Mount Everest, 8,849 m, is Earth's highest mountain above sea level.", "Y", "test"),
        ("Milan is the capital of Italy.", "Rome is the capital city of Italy.", "N", "test"),
        ("Python was created by Guido van Rossum.", "Guido van Rossum began working on Python in the late 1980s.", "Y",
         "test"),
        ("The Pacific is the smallest ocean.", "The Pacific Ocean is the largest and deepest of Earth's oceans.", "N",
         "test")]


def test_validate_judge_with_the_smoke_judge_on_pairs_with_their_own_names(tmp_path):
    p = tmp_path / "labels.csv"
    columns = ["Generated sentence", "Retrieved\npassage", "Annotator: attributable? ", "fold"]
    pd.DataFrame(ROWS, columns=columns).to_csv(p, index=False)
    out = tmp_path / "o"
    r = groundbench("validate-judge", p, "--claim-col", "generated sentence", "--evidence-col", "Retrieved passage",
                    "--label-col", "annotator: attributable?", "--label-map", "Y=supported,N=not_supported",
                    "--split-col", "fold", "--out", out, "--n-boot", "200", check=True)
    assert "8 pairs (4 dev, 4 test" in r.stdout and "SMOKE RUN" in r.stdout
    table = pd.read_csv(out / "pairs_agreement.csv")
    assert table.method.tolist() == ["judge", "word_overlap", "embedding_cosine"]
    # the same 4 test rows for all three
    assert (table.n + table.parse_failures).tolist() == [4, 4, 4]
    for m in ("judge", "word_overlap", "embedding_cosine"):
        assert m in r.stdout
    s = json.loads((out / "pairs_validation.json").read_text())
    assert s["smoke"] is True and s["judge_collapse"]["Unverifiable"] == "not_supported"
    scored = pd.read_parquet(out / "pairs_scored.parquet")
    # thresholds never saw these rows
    assert sorted(scored.statement) == sorted(r_[0] for r_ in ROWS if r_[3] == "test")
    assert "SMOKE RUN" in (out / "pairs_agreement.md").read_text()
    assert (out / "pairs_agreement.png").read_bytes()[:4] == b"\x89PNG" and "figure: " in r.stdout   # issue 54
    # --max-rows: a first look at a few rows, dev and test in their shares, said on the screen and in the summary
    r = groundbench("validate-judge", p, "--claim-col", "generated sentence", "--evidence-col", "Retrieved passage",
                    "--label-col", "annotator: attributable?", "--label-map", "Y=supported,N=not_supported",
                    "--split-col", "fold", "--out", tmp_path / "few", "--n-boot", "50", "--no-judge", "--max-rows", "4",
                    check=True)
    assert "4 pairs (2 dev, 2 test" in r.stdout and "max_rows: 4 of the 8 pairs used" in r.stdout
    assert json.loads((tmp_path / "few" / "pairs_validation.json").read_text())["pairs_available"] == 8


def test_shipped_sample_baselines_and_its_build_script():
    chk = subprocess.run([sys.executable, ROOT / "scripts" / "build_judge_pairs_sample.py", "--check"],
                         capture_output=True, text=True)
    assert chk.returncode == 0, chk.stdout + chk.stderr
    from groundbench.embed import embedder_from_settings
    from groundbench.labels.pairs import PairColumns, load_pairs, validate_pairs
    pairs, counts = load_pairs(ROOT / "data/external/expertqa/judge_pairs_sample.csv",
                               PairColumns("claim", "evidence passage", "expert support", group="system",
                                           split="split"))
    assert counts["pairs"] == 60 and counts["gold_supported_share"] == 0.5
    # as the CLI
    scored, agree, conf, thr = validate_pairs(pairs, None, embedder_from_settings(), n_boot=1000, progress=False)
    overall = agree[agree.group == "all"].set_index("method")
    assert overall.n.tolist() == [30, 30]
    assert set(agree.group) == {"all", *pairs.group.unique()}
    assert all(0 <= v <= 1 for v in overall.balanced_accuracy)
    readme = user_docs()
    wo, ec = overall.loc["word_overlap"], overall.loc["embedding_cosine"]
    said = (f"word overlap {wo.balanced_accuracy:.2f} and embedding cosine {ec.balanced_accuracy:.2f} "
            "balanced accuracy "
            f"(kappa {wo.kappa:.2f} [{wo.kappa_low:.2f}, {wo.kappa_high:.2f}] and "
            f"{ec.kappa:.2f} [{ec.kappa_low:.2f}, {ec.kappa_high:.2f}])")
    assert said in readme, said


@pytest.mark.slow
def test_validate_sourcebench_with_the_smoke_judge(tmp_path):
    """Issue 26: the SourceBench judge against human 1-5 scores (seed 001, Table 3): MAE per metric for the real bundled
    judge and the constant baseline, graders averaged; a smoke judge, and labelled so."""
    p = tmp_path / "human.csv"
    pd.DataFrame({"query": ["How do vaccines work?", "Best budget laptop?"],
                  "url": ["https://www.cdc.gov/vaccines/basics", "https://deals.example/laptops"],
                  "text": ["Vaccines train the immune system to recognise a germ. " * 20,
                           "BUY NOW! Best laptops! " * 30],
                  **{f"{m}_1": [5, 2] for m in ("CR", "FA", "NE", "FR", "AA", "OA", "DA", "LC")},
                  **{f"{m}_2": [4, 2] for m in ("CR", "FA", "NE", "FR", "AA", "OA", "DA", "LC")}}
                 ).to_csv(p, index=False)
    r = groundbench("validate-sourcebench", p, "--out", tmp_path / "o", check=True)
    assert "2 pages" in r.stdout and "SMOKE RUN" in r.stdout and "constant baseline" in r.stdout
    a = pd.read_csv(tmp_path / "o" / "sourcebench_agreement.csv").set_index("method")
    assert a.loc["constant baseline", "CR"] == 1.25          # graders' means 4.5 and 2; median 3.25 for both pages
    judged = pd.read_csv(tmp_path / "o" / "judge_scores.csv")
    assert len(judged) == 2
    maes = a.loc["judge", ["CR", "FA", "NE", "FR", "AA", "OA", "DA", "LC"]].dropna()
    # a missing score: counted
    assert ((maes >= 0) & (maes <= 4)).all() and len(maes) + judged.missing_metrics.max() >= 8
