"""Templates hold what varies per MPI; fixed C is a .c file (qmpigen/runtime). A template
of more than 40 lines needs at least 5 % of its lines to be Jinja, and all templates
together stay within 2,600 lines."""

from __future__ import annotations

import re
from pathlib import Path

TEMPLATES = Path(__file__).resolve().parent.parent / "templates"
JINJA = re.compile(r"\{[{%]")  # as grep -n '{[{%]' counts them


def shapes():
    for path in sorted(TEMPLATES.rglob("*.j2")):
        lines = path.read_text().splitlines()
        yield path.relative_to(TEMPLATES).as_posix(), len(lines), sum(1 for line in lines if JINJA.search(line))


def test_no_template_is_mostly_fixed_text():
    mostly_fixed = [
        f"{name}: {jinja} of {total} lines are Jinja"
        for name, total, jinja in shapes()
        if total > 40 and jinja < 0.05 * total
    ]
    assert not mostly_fixed, "move the fixed text to qmpigen/runtime:\n" + "\n".join(mostly_fixed)


def test_templates_total_at_most_2600_lines():
    assert sum(total for _, total, _ in shapes()) <= 2600
