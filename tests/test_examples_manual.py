"""The manual `qmpigen examples DIR` writes out (for a user with only the wheel) is whole:
every link and picture of every page points at a file of the written-out copy, and the
pictures are the repository's bytes. Links to the web are left to the reader; code is
not a link."""

from __future__ import annotations

import re
from pathlib import Path

from conftest import REPO, run_cli

FENCE = re.compile(r"^```.*?^```", re.S | re.M)
CODE_SPAN = re.compile(r"`[^`\n]*`")
# [text](target) and ![alt](target); the target up to a space (a title) or ')'
MARKDOWN_LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
HTML_LINK = re.compile(r"""\b(?:src|href)=["']([^"']+)["']""")


def links(page: Path):
    text = CODE_SPAN.sub("", FENCE.sub("", page.read_text(encoding="utf-8")))
    for target in MARKDOWN_LINK.findall(text) + HTML_LINK.findall(text):
        if re.match(r"[a-z][a-z0-9+.-]*:", target) or target.startswith("#"):
            continue  # the web, mail, or a place in the same page
        yield target.split("#", 1)[0]


def test_every_link_and_picture_of_the_written_out_manual_is_there(tmp_path):
    proc = run_cli("examples", str(tmp_path))
    assert proc.returncode == 0, proc.stderr
    root = (tmp_path / "docs").resolve()
    pages = sorted(root.rglob("*.md"))
    assert len(pages) == len(list((REPO / "docs").rglob("*.md")))
    missing, checked = [], 0
    for page in pages:
        for target in links(page):
            path = (page.parent / target).resolve()
            checked += 1
            if not path.is_file() or root not in path.parents and path.parent != root:
                missing.append(f"{page.relative_to(root)} -> {target}")
    assert not missing, missing
    assert checked > 50  # the pages do link each other
    for picture in sorted((REPO / "docs").glob("*.png")):
        assert (root / picture.name).read_bytes() == picture.read_bytes()
