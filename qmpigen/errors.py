"""Errors carry a location; the CLI turns each into one line on stderr."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from qmpigen.escape import printable


@dataclass(frozen=True)
class Location:
    """A place in an input file (1-based line and column; 0 = unknown)."""

    file: str
    line: int = 0
    column: int = 0

    def __str__(self) -> str:
        text = printable(self.file)
        if self.line:
            text += f":{self.line}"
            if self.column:
                text += f":{self.column}"
        return text


class QmpigenError(Exception):
    """Any failure the user can fix: bad input, missing tools, a broken header."""

    def __init__(self, message: str, location: Optional[Location] = None):
        super().__init__(message)
        self.message = message
        self.location = location

    def one_line(self) -> str:
        # Control characters (a newline in a path) shown as escapes, runs of spaces as one.
        text = " ".join(printable(self.message.replace("\t", " ")).split())
        if self.location is not None:
            return f"{self.location}: {text}"
        return text
