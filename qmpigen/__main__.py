"""`python -m qmpigen` runs the CLI."""

from .cli import main

main()
