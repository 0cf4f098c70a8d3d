"""The built manual (`make docs`) renders offline: no page or stylesheet loads anything
from another site (fonts, scripts, styles, pictures, frames). Links a reader may follow
(`<a href="https://...">`) are fine. `make docs` runs it on build/site:

    python tests/site_check.py build/site

Exit 1 with one line per external resource (file: URL), else 0."""

from __future__ import annotations

import re
import sys
from html.parser import HTMLParser
from pathlib import Path
from typing import List, Tuple

EXTERNAL = re.compile(r"^(?:[a-z][a-z0-9+.-]*:)?//", re.I)  # https://..., //host/...
CSS_URL = re.compile(r"""url\(\s*['"]?([^'")\s]+)|@import\s+['"]([^'"]+)""", re.I)
# Elements and attributes whose URL the browser fetches to show the page.
FETCHED = {
    "link": ("href",),
    "script": ("src",),
    "img": ("src", "srcset"),
    "iframe": ("src",),
    "source": ("src", "srcset"),
    "video": ("src", "poster"),
    "audio": ("src",),
    "embed": ("src",),
    "object": ("data",),
    "track": ("src",),
}


class _Resources(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.urls: List[str] = []

    def handle_starttag(self, tag: str, attrs) -> None:
        values = dict(attrs)
        for name in FETCHED.get(tag, ()):
            value = (values.get(name) or "").strip()
            candidates = value.split(",") if name == "srcset" else [value]  # srcset: "url 2x, url 3x"
            self.urls += [c.strip().split()[0] for c in candidates if c.strip()]
        if values.get("style"):
            self.urls += css_urls(values["style"])


def css_urls(text: str) -> List[str]:
    return [a or b for a, b in CSS_URL.findall(text)]


def external_resources(site: Path) -> List[Tuple[str, str]]:
    """(file relative to site, URL) for everything fetched from another site."""
    found = []
    for path in sorted(site.rglob("*")):
        if path.suffix == ".html":
            parser = _Resources()
            text = path.read_text(encoding="utf-8", errors="replace")
            parser.feed(text)
            urls = parser.urls + [
                u for block in re.findall(r"<style[^>]*>(.*?)</style>", text, re.S) for u in css_urls(block)
            ]
        elif path.suffix == ".css":
            urls = css_urls(path.read_text(encoding="utf-8", errors="replace"))
        else:
            continue
        found += [(path.relative_to(site).as_posix(), url) for url in urls if EXTERNAL.match(url)]
    return found


def main(argv: List[str]) -> int:
    site = Path(argv[1]) if len(argv) > 1 else Path("build/site")
    if not (site / "index.html").is_file():
        print(f"site_check: {site} holds no built site (index.html)", file=sys.stderr)
        return 1
    found = external_resources(site)
    for file, url in found:
        print(f"{site / file}: loads {url} from another site (the manual must render offline)", file=sys.stderr)
    return 1 if found else 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
