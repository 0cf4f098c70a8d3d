"""The built manual rendered at 1280 px by headless Chromium, measured in the page itself:
no code block runs past its column (long lines wrap), no code word in a table cell is
broken across lines, every picture links its full size, and no table cell shows an
escaped `\\|`. `make docs` runs it where Chromium is installed:

    python tests/site_render.py build/site [PAGE ...]      # PAGE: tracing, install, ...

Exit 1 with one line per problem (page: what), else 0."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import List, Optional

# The pages issue 34 found cut off or broken, and the Quick start.
PAGES = ("tracing", "install", "core", "spec-language", "quickstart")
WIDTH = 1280
MEASURE = """
<script>
window.addEventListener("load", () => {
  const problems = [];
  document.querySelectorAll("pre > code").forEach((code) => {
    if (code.scrollWidth > code.clientWidth + 1)
      problems.push("code block runs past its column: " + code.textContent.split("\\n").find((l) => l.length > 60));
  });
  document.querySelectorAll("td code").forEach((code) => {
    if (code.getClientRects().length > 1) problems.push("code word broken in a table cell: " + code.textContent);
  });
  document.querySelectorAll("td").forEach((cell) => {
    if (cell.textContent.includes("\\\\|")) problems.push("escaped pipe shown in a table cell: " + cell.textContent);
  });
  document.querySelectorAll("article img").forEach((img) => {
    const link = img.closest("a");
    if (!link || link.getAttribute("href") !== img.getAttribute("src"))
      problems.push("picture not linked to its full size: " + img.getAttribute("src"));
  });
  const out = document.createElement("pre");
  out.id = "qmpigen-render";
  out.textContent = JSON.stringify({width: window.innerWidth, problems: problems});
  document.body.appendChild(out);
});
</script>
"""
RESULT = re.compile(r'<pre id="qmpigen-render">(.*?)</pre>', re.S)


def chromium() -> Optional[str]:
    return shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")


def render(browser: str, page: Path, profile: Path) -> dict:
    """The page, with the measuring script, loaded at WIDTH px; what the script found."""
    probe = page.with_name("qmpigen-render-probe.html")  # beside it: the same relative assets
    probe.write_text(page.read_text(encoding="utf-8").replace("</body>", MEASURE + "</body>"), encoding="utf-8")
    try:
        proc = subprocess.run(
            [
                browser,
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                "--no-first-run",
                f"--user-data-dir={profile}",
                f"--window-size={WIDTH},1000",
                "--virtual-time-budget=5000",
                "--dump-dom",
                probe.as_uri(),
            ],
            capture_output=True,
            text=True,
            timeout=120,
        )
    finally:
        probe.unlink()
    found = RESULT.search(proc.stdout)
    if not found:
        return {"width": None, "problems": [f"no measurement (chromium exit {proc.returncode}): {proc.stderr[-300:]}"]}
    return json.loads(found.group(1).replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&"))


def check(site: Path, pages=PAGES) -> List[str]:
    browser = chromium()
    if browser is None:
        return ["chromium is not installed"]
    lines = []
    with tempfile.TemporaryDirectory(prefix="qmpigen-chromium-") as profile:
        for name in pages:
            page = site / name / "index.html"
            if not page.is_file():
                lines.append(f"{name}: no such page in {site}")
                continue
            result = render(browser, page, Path(profile))
            if result["width"] not in (None, WIDTH):
                lines.append(f"{name}: rendered {result['width']} px wide, not {WIDTH}")
            lines += [f"{name}: {problem}" for problem in result["problems"]]
    return lines


def main(argv: List[str]) -> int:
    site = (Path(argv[1]) if len(argv) > 1 else Path("build/site")).resolve()
    problems = check(site, argv[2:] or PAGES)
    for line in problems:
        print(f"site_render: {line}", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
