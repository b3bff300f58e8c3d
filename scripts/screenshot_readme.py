"""The README's first screen as a reader sees it: README.md rendered to HTML (Python-Markdown, GitHub-like styles),
opened in headless Chromium at 1280 x 900, screenshot written to docs/images/readme-first-screen.png; with --report,
also the first screen of a run's report page (docs/images/report-demo.png, the picture the README shows).

    .venv/bin/python scripts/screenshot_readme.py [--out docs/images/readme-first-screen.png]
    .venv/bin/python scripts/screenshot_readme.py --report runs/demo/report/index.html

tests/test_docs.py renders it the same way and checks what the first screen holds (the paper, its authors, the demo,
the report picture loaded).
"""
from __future__ import annotations

import argparse
import html
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

CSS = """body{font-family:-apple-system,BlinkMacSystemFont,"Segoe UI",Helvetica,Arial,sans-serif;font-size:16px;
line-height:1.5;color:#1f2328;max-width:980px;margin:0 auto;padding:32px 45px}
h1{font-size:2em;border-bottom:1px solid #d1d9e0;padding-bottom:.3em} h2{border-bottom:1px solid #d1d9e0}
img{max-width:100%} code{background:#eff1f3;padding:.2em .4em;border-radius:6px;font-size:85%}
pre{background:#f6f8fa;padding:16px;border-radius:6px;overflow:auto} pre code{background:none;padding:0}
a{color:#0969da;text-decoration:none} table{border-collapse:collapse} td,th{border:1px solid #d1d9e0;padding:6px 13px}
"""


def readme_html(readme: Path = ROOT / "README.md") -> str:
    "README.md as one HTML page whose relative links and images resolve from the repository root."
    import markdown
    body = markdown.markdown(readme.read_text(encoding="utf-8"), extensions=["tables", "fenced_code"])
    return (f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(readme.name)}</title>"
            f"<base href='{readme.parent.as_uri()}/'><style>{CSS}</style></head><body>{body}</body></html>")


def first_screen(out: Path, width: int = 1280, height: int = 900) -> dict:
    """Write the screenshot of the README's first screen to `out`; returns what the screen shows: its text, and each
    image in view with its natural width (0: not loaded)."""
    from groundbench.collect.browser import make_driver
    page = out.parent / (out.stem + ".html")
    page.parent.mkdir(parents=True, exist_ok=True)
    page.write_text(readme_html(), encoding="utf-8")
    driver = make_driver(window=(width, height))
    try:
        driver.get(page.as_uri())
        driver.execute_script("return document.readyState")
        shown = driver.execute_script("""
            const h = window.innerHeight, seen = e => e.getBoundingClientRect().top < h;
            const text = [...document.body.querySelectorAll('h1,p,li')].filter(seen).map(e => e.innerText).join('\\n');
            const imgs = [...document.images].filter(seen).map(i => [i.getAttribute('src'), i.naturalWidth]);
            return {text: text, images: imgs, height: h};""")
        driver.save_screenshot(str(out))
    finally:
        driver.quit()
        page.unlink(missing_ok=True)
    return shown


def report_screen(report: Path, out: Path, width: int = 1400, height: int = 900):
    "The first screen of a report page (its contents, the smoke banner, the first tables), written to `out`."
    from groundbench.collect.browser import make_driver
    driver = make_driver(window=(width, height))
    try:
        driver.get(report.resolve().as_uri())
        driver.execute_script("return document.readyState")
        driver.save_screenshot(str(out))
    finally: driver.quit()


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=ROOT / "docs" / "images" / "readme-first-screen.png")
    ap.add_argument("--report", type=Path, help="a report page (runs/<id>/report/index.html) to screenshot too")
    a = ap.parse_args(argv)
    if a.report:
        report_screen(a.report, ROOT / "docs" / "images" / "report-demo.png")
        print(f"{ROOT / 'docs' / 'images' / 'report-demo.png'}: the first screen of {a.report}")
    shown = first_screen(a.out)
    print(f"{a.out}: first screen with {len(shown['text'].split())} words, images {shown['images']}")


if __name__ == "__main__":
    main()
