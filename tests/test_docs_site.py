"""The manual as a site: it renders offline (tests/site_check.py finds anything a page
loads from another site) and, at 1280 px in Chromium, keeps code inside its column,
code words in table cells whole and pictures linked to their full size
(tests/site_render.py). `make docs` runs both on build/site; here the checker is tested
on small pages, and the whole site is built and checked where mkdocs and Chromium are
installed (slow tier)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import site_check
import site_render

from conftest import REPO


def page(tmp_path: Path, html: str, css: str = "") -> Path:
    (tmp_path / "index.html").write_text(
        f"<html><head>{html}</head><body><a href='https://ok.example/'>x</a></body></html>"
    )
    (tmp_path / "extra.css").write_text(css)
    return tmp_path


def test_a_page_that_loads_from_another_site_is_found(tmp_path):
    site = page(
        tmp_path,
        '<link rel="stylesheet" href="https://fonts.googleapis.com/css?family=Roboto:300,400">'
        '<link rel="preconnect" href="https://fonts.gstatic.com" crossorigin>'
        '<script src="//cdn.example/x.js"></script><img srcset="a.png 1x, https://img.example/b.png 2x">'
        '<div style="background: url(https://img.example/c.png)"></div>',
        css="@import 'https://fonts.example/d.css'; .x { background: url(e.png) }",
    )
    found = sorted(url for _, url in site_check.external_resources(site))
    assert found == sorted(
        [
            "https://fonts.googleapis.com/css?family=Roboto:300,400",
            "https://fonts.gstatic.com",
            "//cdn.example/x.js",
            "https://img.example/b.png",
            "https://img.example/c.png",
            "https://fonts.example/d.css",
        ]
    )
    assert site_check.main(["site_check", str(site)]) == 1


def test_links_a_reader_follows_are_not_resources(tmp_path):
    site = page(tmp_path, '<link rel="stylesheet" href="assets/main.css"><script src="assets/x.js"></script>')
    assert site_check.external_resources(site) == [] and site_check.main(["site_check", str(site)]) == 0


@pytest.mark.slow
def test_the_built_manual_renders_offline_and_whole_at_1280_px(tmp_path):
    mkdocs = Path(sys.executable).parent / "mkdocs"
    if not mkdocs.exists() or site_render.chromium() is None:
        pytest.skip("needs mkdocs (make docs installs it) and chromium")
    proc = subprocess.run(
        [str(mkdocs), "build", "--strict", "--quiet", "--site-dir", str(tmp_path / "site")],
        capture_output=True,
        text=True,
        cwd=REPO,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
    )
    assert proc.returncode == 0, proc.stderr
    assert site_check.external_resources(tmp_path / "site") == []
    assert site_render.check(tmp_path / "site") == []
