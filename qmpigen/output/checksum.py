"""The checksum line of generated tool files: what lets scaffold-tool tell its own,
unedited output (safe to overwrite) from a file someone changed.

The line holds a SHA-256 of the file without that line. Templates write it with a
pending digest (checksum_line); stamp() fills it in after rendering.
"""

from __future__ import annotations

import hashlib
import re
from typing import Optional

CHECKSUM_TAG = "qmpigen-checksum:"
PENDING = "0" * 64
CHECKSUM_LINE = re.compile(r"^(?:/\* |# )" + re.escape(CHECKSUM_TAG) + r" ([0-9a-f]{64})\b.*\n?", re.M)


def checksum_line(style: str) -> str:
    """The pending line, as a C ("c") or shell/make ("make") comment."""
    if style == "c":
        return f"/* {CHECKSUM_TAG} {PENDING} (qmpigen overwrites this file only while it matches) */"
    return f"# {CHECKSUM_TAG} {PENDING} (qmpigen overwrites this file only while it matches)"


def _digest(text_without_checksum: str) -> str:
    return hashlib.sha256(text_without_checksum.encode("utf-8")).hexdigest()


def stamp(text: str) -> str:
    """Fill in the checksum line of a freshly rendered file."""
    match = CHECKSUM_LINE.search(text)
    if match is None or match.group(1) != PENDING:
        raise AssertionError("template without a pending checksum line")
    digest = _digest(text[: match.start()] + text[match.end() :])
    return text[: match.start(1)] + digest + text[match.end(1) :]


def intact(text: str) -> Optional[bool]:
    """None: no checksum line (not ours); True: unchanged since qmpigen wrote it; False: edited."""
    match = CHECKSUM_LINE.search(text)
    if match is None:
        return None
    return _digest(text[: match.start()] + text[match.end() :]) == match.group(1)
