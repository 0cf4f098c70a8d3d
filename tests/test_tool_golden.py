"""Golden files of generated tools (tests/golden/tools/INTERFACE/NAME/): what
`qmpigen scaffold-tool` writes for the sample specs (sample_tools/*.qmpi), the complete
example of docs/spec-language.md (msgstat) and tests/fixtures/every.qmpi, for the
fixture header tests/fixtures/tools_mpi.h (quirks_mpi.h and the functions they name).

Rendered in process from the model read once per session; one test per interface runs
the command to show that the golden files are its output, byte for byte.
Regenerate with: QMPIGEN_REGEN_GOLDEN=1 make test-fast (then review the diff).
"""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path
from typing import Dict

import pytest

from qmpigen.mpi.select import enumerate_functions
from qmpigen.output.render import GeneratorInfo, render_tool
from qmpigen.spec.parse import parse_spec
from qmpigen.spec.resolve import resolve
from qmpigen.spec.tool import Interface

from conftest import FIXTURES, REPO, SAMPLE_TOOLS, TOOLS_MPI, fixture_api, needs_cc, run_cli

pytestmark = needs_cc

GOLDEN = Path(__file__).resolve().parent / "golden" / "tools"
REGENERATE = bool(os.environ.get("QMPIGEN_REGEN_GOLDEN"))
SPECS = {
    "counter": SAMPLE_TOOLS / "counter.qmpi",
    "profiler": SAMPLE_TOOLS / "profiler.qmpi",
    "empty": SAMPLE_TOOLS / "empty.qmpi",
    "msgstat": REPO / "docs" / "spec-language.md",  # its first ```qmpi block
    "every": FIXTURES / "every.qmpi",  # every construct both interfaces take
}
# The callback interface registers only what the fixture's QMPI enum lists, so counter
# (MPI_Init, MPI_Bcast, ... by name) and msgstat (`call exec_func`) are thesis-only.
CASES = [
    *((Interface.THESIS, name) for name in SPECS),
    (Interface.CALLBACK, "profiler"),
    (Interface.CALLBACK, "every"),
]


def spec_text(name: str) -> str:
    text = SPECS[name].read_text(encoding="utf-8")
    return re.findall(r"```qmpi\n(.*?)```", text, re.S)[0] if SPECS[name].suffix == ".md" else text


def command(interface: Interface, name: str) -> str:
    """The banner's command: scaffold-tool run on NAME.qmpi with the fixture header."""
    options = "" if interface is Interface.THESIS else f" --interface {interface.value}"
    return f"qmpigen scaffold-tool {name}.qmpi --mpi-header {TOOLS_MPI.name} --mpicc cc -o {name}{options}"


def generate(interface: Interface, name: str) -> Dict[str, str]:
    api = fixture_api(TOOLS_MPI)
    enumeration = enumerate_functions(api)
    tool = resolve(parse_spec(spec_text(name), f"{name}.qmpi"), enumeration, api, interface)
    return render_tool(
        tool, GeneratorInfo.for_enumeration(enumeration, command(interface, name), "cc"), len(enumeration)
    )


def case_id(case) -> str:
    return f"{case[0].value}-{case[1]}"


@pytest.mark.parametrize("interface, name", CASES, ids=map(case_id, CASES))
def test_tool_matches_golden_files(interface, name):
    files = generate(interface, name)
    golden = GOLDEN / interface.value / name
    if REGENERATE:
        shutil.rmtree(golden, ignore_errors=True)
        golden.mkdir(parents=True)
        for file, text in files.items():
            (golden / file).write_text(text, encoding="utf-8")
    assert sorted(files) == sorted(p.name for p in golden.iterdir())
    for file, text in files.items():
        where = f"tests/golden/tools/{interface.value}/{name}/{file}"
        assert text == (golden / file).read_text(encoding="utf-8"), f"{where} differs from the generated file"


def test_every_golden_tool_has_a_case():
    """No stale golden directory outlives its case."""
    expected = sorted(f"{interface.value}/{name}" for interface, name in CASES)
    if REGENERATE:
        for directory in GOLDEN.glob("*/*"):
            if directory.relative_to(GOLDEN).as_posix() not in expected:
                shutil.rmtree(directory)
    assert sorted(p.relative_to(GOLDEN).as_posix() for p in GOLDEN.glob("*/*")) == expected


THROUGH_THE_COMMAND = [(Interface.THESIS, "counter"), (Interface.CALLBACK, "every")]


@pytest.mark.parametrize("interface, name", THROUGH_THE_COMMAND, ids=map(case_id, THROUGH_THE_COMMAND))
def test_the_command_writes_the_golden_files(tmp_path, interface, name):
    spec = tmp_path / f"{name}.qmpi"
    spec.write_text(spec_text(name), encoding="utf-8")
    out = tmp_path / name
    proc = run_cli(
        "scaffold-tool",
        str(spec),
        "--mpi-header",
        str(TOOLS_MPI),
        "--mpicc",
        "cc",
        "-o",
        str(out),
        "--interface",
        interface.value,
    )
    assert proc.returncode == 0, proc.stderr
    golden = GOLDEN / interface.value / name
    assert sorted(p.name for p in out.iterdir()) == sorted(p.name for p in golden.iterdir())
    for path in golden.iterdir():
        assert (out / path.name).read_bytes() == path.read_bytes(), path.name
