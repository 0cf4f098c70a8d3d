"""The command line: `qmpigen` (commands) and what it prints about an MPI (listing)."""

from qmpigen.cli.commands import main

__all__ = ["main"]
