"""`python -m qmpigen` runs the CLI."""

from qmpigen.cli import main

main()
