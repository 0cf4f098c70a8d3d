"""The model of real mpi.h files, checked against readings that do not go through qmpigen.

Counts alone would only pin today's numbers. Each model is also checked by the MPI's own
compiler and library:
- every modelled signature is type-compatible with the declared function (and its PMPI
  twin): `_Static_assert(__builtin_types_compatible_p(__typeof__(&MPI_X), R (*)(params)))`;
- the set of declared MPI_/MPIX_ functions equals what gcc's -aux-info lists;
- is_macro agrees with `#ifdef NAME` under the real driver;
- every intercepted function and its PMPI twin are dynamic symbols of the libmpi the
  driver links;
- for MPICH, the model equals the header's own enum QMPI_Functions_enum.
Debian's and Intel's headers are read too when installed (never installed by the tests).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import pytest

from qmpigen.cli.listing import manifest
from qmpigen.mpi.header import HeaderRequest, PreprocessedHeader, read_header
from qmpigen.mpi.model import Enumeration, MpiApi
from qmpigen.mpi.parse import parse_header
from qmpigen.mpi.select import Selection, enumerate_functions

from conftest import qmpigen

pytestmark = pytest.mark.mpi

# (implementation, version) -> what the wheels in the Makefile give.
EXPECTED = {
    ("MPICH", "5.0.2"): dict(
        enumerated=700, large_count=159, mpi_t=51, mpix_declared=58, macros=20, mpi=(5, 0), declares_qmpi=True
    ),
    ("Open MPI", "5.0.11"): dict(
        enumerated=458, large_count=0, mpi_t=31, mpix_declared=0, macros=0, mpi=(3, 1), declares_qmpi=False
    ),
}


@dataclass
class Model:
    pre: PreprocessedHeader
    api: MpiApi
    default: Enumeration  # what `qmpigen functions` enumerates
    everything: Enumeration  # with --mpix


def load(mpi_header: str, mpicc: str) -> Model:
    pre = read_header(HeaderRequest(mpi_header, mpicc))
    api = parse_header(pre)
    return Model(pre, api, enumerate_functions(api), enumerate_functions(api, Selection(mpix=True)))


@pytest.fixture(scope="module")
def model(mpi) -> Model:
    return load("auto", mpi.mpicc)


# -- C checks ---------------------------------------------------------------------------


def signature_checks(m: Model) -> str:
    """One _Static_assert per function and per PMPI twin.

    Function-like macros (MPICH's MPI_Comm_c2f) are checked too: `&NAME` is not followed
    by '(' so the macro does not expand and the real declaration is seen. A PMPI twin
    that is a macro may be nothing but a macro, so it is left out."""
    lines = ["#include <mpi.h>", ""]
    for f in m.api:
        pointer = f"{f.return_type} (*)({f.params_c})"
        for name in (f.name, f.pmpi):
            if name in m.pre.object_macros or (name == f.pmpi and name in m.pre.macro_names):
                continue
            lines.append(
                f"_Static_assert(__builtin_types_compatible_p(__typeof__(&{name}), {pointer}), "
                f'"{name}: the model says {f.signature}");'
            )
    return "\n".join(lines) + "\n"


def compile_c(cmd: Sequence[str], source: Path, env=None) -> subprocess.CompletedProcess:
    return subprocess.run([*cmd, "-fsyntax-only", str(source)], capture_output=True, text=True, env=env, timeout=120)


def check_signatures(cmd: Sequence[str], m: Model, tmp_path: Path, env=None) -> int:
    source = tmp_path / "signatures.c"
    text = signature_checks(m)
    source.write_text(text)
    proc = compile_c(cmd, source, env)
    assert proc.returncode == 0, "\n".join(proc.stderr.splitlines()[:40])
    return text.count("_Static_assert")


# -- counts --------------------------------------------------------------------------------


def test_counts_of_known_versions(model):
    """The numbers of the wheels the Makefile installs (a changed count needs a look)."""
    facts = model.api.facts
    expected = EXPECTED.get((facts.implementation, facts.version))
    if expected is None:
        pytest.skip(f"no recorded counts for {facts.implementation} {facts.version}")
    names = model.default.names
    assert len(model.default) == expected["enumerated"]
    assert sum(n.endswith("_c") for n in names) == expected["large_count"]
    assert sum(n.startswith("MPI_T_") for n in names) == expected["mpi_t"]
    assert sum(f.prefix == "MPIX" for f in model.api) == expected["mpix_declared"]
    assert sum(f.is_macro for f in model.default) == expected["macros"]
    assert (facts.mpi_version, facts.mpi_subversion) == expected["mpi"]
    assert facts.declares_qmpi == expected["declares_qmpi"]


def test_enumeration_invariants(model):
    """Holds for any MPI: code-point order, only candidates, MPI_Pcontrol variadic."""
    names = list(model.everything.names)
    assert names == sorted(names)
    assert len(set(names)) == len(names)
    assert all(f.has_pmpi for f in model.everything)
    assert not any(f.prefix == "MPIX" for f in model.default)
    assert model.default.get("MPI_Pcontrol").variadic
    assert model.default.get("MPI_Wtime").return_type == "double"
    assert [f.name for f in model.default if f.variadic] == ["MPI_Pcontrol"]


# -- independent readings -------------------------------------------------------------------


def test_modelled_signatures_match_the_header(mpi, model, tmp_path):
    """The real compiler agrees with every printed signature (arrays, const, function
    types, non-int returns), for MPI_ and PMPI_ names alike."""
    checked = check_signatures([mpi.mpicc], model, tmp_path, mpi.env())
    assert checked >= len(model.api) > 0


def test_signature_check_catches_a_wrong_signature(mpi, model, tmp_path):
    """Negative control: a const dropped from MPI_Send's buffer must fail the check,
    so the check above is not vacuous."""
    send = model.api.get("MPI_Send")
    assert send.params[0].declaration == "const void *buf"
    wrong = send.params_c.replace("const void *buf", "void *buf", 1)
    source = tmp_path / "wrong.c"
    source.write_text(
        "#include <mpi.h>\n"
        f'_Static_assert(__builtin_types_compatible_p(__typeof__(&MPI_Send), int (*)({wrong})), "MPI_Send");\n'
    )
    proc = compile_c([mpi.mpicc], source, mpi.env())
    assert proc.returncode != 0
    assert "MPI_Send" in proc.stderr


def test_declared_functions_match_gcc_aux_info(mpi, model, tmp_path):
    """gcc -aux-info lists every prototype the compiler saw: the model must hold exactly
    its MPI_/MPIX_ functions, at the same file:line, with the same PMPI twins."""
    source = tmp_path / "aux.c"
    source.write_text("#include <mpi.h>\n")
    aux = tmp_path / "aux.txt"
    proc = subprocess.run(
        [mpi.mpicc, "-fsyntax-only", "-aux-info", str(aux), str(source)],
        capture_output=True,
        text=True,
        env=mpi.env(),
    )
    if proc.returncode != 0 or not aux.exists():
        pytest.skip(f"the compiler behind {mpi.mpicc} has no -aux-info (not gcc): {proc.stderr[:200]}")
    seen = {}
    for line in aux.read_text().splitlines():
        match = re.match(r"/\* (.+):(\d+):\w+ \*/ .*?\b(\w+) \(", line)  # first 'name (' is the function
        if match:
            seen.setdefault(match.group(3), (os.path.realpath(match.group(1)), int(match.group(2))))
    declared = {n for n in seen if n.startswith(("MPI_", "MPIX_"))}
    assert {f.name for f in model.api} == declared
    for f in model.api:
        assert (os.path.realpath(f.location.file), f.location.line) == seen[f.name], f.name
        assert f.has_pmpi == (f.pmpi in seen or f.pmpi in model.pre.macro_names), f.name


def test_is_macro_agrees_with_the_preprocessor(mpi, model, tmp_path):
    """Generated C must never define a name mpi.h #defines, and may define every other."""
    source = tmp_path / "macros.c"
    lines = ["#include <mpi.h>"]
    for f in model.everything:
        test = "#ifndef" if f.is_macro else "#ifdef"
        lines += [f"{test} {f.name}", f"#error {f.name}: is_macro={f.is_macro} is wrong", "#endif"]
    source.write_text("\n".join(lines) + "\n")
    proc = compile_c([mpi.mpicc], source, mpi.env())
    assert proc.returncode == 0, "\n".join(proc.stderr.splitlines()[:20])


def test_mpich_model_equals_its_own_qmpi_enum(model):
    """MPICH >= 4 numbers its functions itself: same set of names, nothing missing."""
    if not model.api.facts.forum_enum:
        pytest.skip(f"{model.api.facts.implementation} declares no enum QMPI_Functions_enum")
    members = {name for name, _ in model.api.facts.forum_enum}
    assert "MPI_LAST_FUNC_T" in members
    declared = {f.forum_enum for f in model.api}
    if int(model.api.facts.version.split(".")[0]) >= 5:
        assert declared == members - {"MPI_LAST_FUNC_T"}
    else:
        # MPICH 4.0 leaves ROMIO's functions (MPI_File_*, MPI_Register_datarep*) and the
        # Fortran interop ones (MPI_Status_*2f*, MPI_Type_create_f90_*) out of its enum:
        # callback tools cannot register them there (the core refuses them by name).
        missing = declared - members
        outside = ("MPI_FILE_", "MPI_REGISTER_DATAREP", "MPI_STATUS_", "MPI_TYPE_CREATE_F90_")
        assert missing and all(name.startswith(outside) for name in missing), missing
        assert members - {"MPI_LAST_FUNC_T"} <= declared
    values = [value for _, value in model.api.facts.forum_enum]
    assert values == list(range(len(values)))


def libmpi(mpi, tmp_path: Path) -> Path:
    """The libmpi.so a program built with this driver loads (from ldd, not guessed)."""
    source = tmp_path / "tiny.c"
    source.write_text("#include <mpi.h>\nint main(int c, char **v) { return MPI_Init(&c, &v); }\n")
    exe = mpi.compile([source], tmp_path / "tiny")
    out = subprocess.run(["ldd", str(exe)], capture_output=True, text=True, env=mpi.env()).stdout
    match = re.search(r"^\s*libmpi(?:ch)?\.so[.\d]*\s+=>\s+(\S+)", out, re.M)  # Debian: libmpich.so
    assert match, out
    return Path(match.group(1))


@pytest.mark.skipif(not (shutil.which("nm") and shutil.which("ldd")), reason="needs nm and ldd")
def test_intercepted_functions_are_exported_by_libmpi(mpi, model, tmp_path):
    """The core defines MPI_X and calls PMPI_X: both must be dynamic symbols of libmpi."""
    library = libmpi(mpi, tmp_path)
    nm = subprocess.run(["nm", "-D", "--defined-only", str(library)], capture_output=True, text=True, check=True)
    symbols = {line.split()[-1] for line in nm.stdout.splitlines() if line.strip()}
    missing = [name for f in model.everything if not f.is_macro for name in (f.name, f.pmpi) if name not in symbols]
    # quirks.OPTIONAL_PMPI: declared by some MPIs (MPICH 4.0) but not defined; the core
    # references them weakly. Exactly those may be missing, in pairs.
    optional = {name for f in model.everything if f.pmpi_optional for name in (f.name, f.pmpi)}
    assert [n for n in missing if n not in optional] == [], f"not exported by {library}: {missing[:20]}"


def test_cli_manifest_is_the_in_process_model(mpi, model):
    """`qmpigen functions --json` in another process (another hash seed) prints exactly
    the manifest of the model built here: the output does not depend on the run. Its
    Fortran part (MPIs with Fortran bindings) is the same with a third hash seed."""
    command = ("functions", "--mpi-header", "auto", "--mpicc", mpi.mpicc, "--mpix", "--json")
    proc = qmpigen(*command, env=mpi.env(PYTHONHASHSEED="12345"))
    assert proc.returncode == 0, proc.stderr
    printed = json.loads(proc.stdout)
    fortran = printed.pop("fortran")
    assert json.dumps(printed, indent=1) == json.dumps(manifest(model.everything), indent=1)
    if fortran is not None:
        again = qmpigen(*command, env=mpi.env(PYTHONHASHSEED="54321"))
        assert again.returncode == 0 and again.stdout == proc.stdout


@pytest.mark.skipif(not shutil.which("cc"), reason="needs cc")
def test_header_path_with_plain_cc_gives_the_same_model(model):
    """--mpi-header PATH --mpicc cc (no MPI driver) must model the same functions as
    asking the driver: the header's sibling includes come from its own directory."""
    by_path = load(model.pre.header_path, "cc")
    assert by_path.everything.hash == model.everything.hash
    assert [f.signature for f in by_path.everything] == [f.signature for f in model.everything]
    assert by_path.api.facts == model.api.facts


# -- other installed MPIs (skipped when absent) --------------------------------------------

INTEL_ROOT = os.environ.get("I_MPI_ROOT", "/opt/intel/oneapi/mpi/latest")
OTHER_HEADERS = [
    ("debian-mpich", "/usr/include/x86_64-linux-gnu/mpich/mpi.h", "MPICH"),
    ("debian-openmpi", "/usr/lib/x86_64-linux-gnu/openmpi/include/mpi.h", "Open MPI"),
    ("intel-mpi", os.path.join(INTEL_ROOT, "include", "mpi.h"), "Intel MPI"),
]


@pytest.mark.parametrize("header, implementation", [h[1:] for h in OTHER_HEADERS], ids=[h[0] for h in OTHER_HEADERS])
def test_other_installed_headers(header, implementation, tmp_path):
    """Distribution and vendor headers, read by path with plain cc, pass the same
    signature check (only where they are installed: the tests never install them)."""
    if not os.path.isfile(header):
        pytest.skip(f"{header} is not installed")
    if not shutil.which("cc"):
        pytest.skip("needs cc")
    m = load(header, "cc")
    assert m.api.facts.implementation == implementation
    assert len(m.default) > 300
    assert m.default.get("MPI_Send").params[0].declaration == "const void *buf"
    check_signatures(["cc", f"-I{os.path.dirname(header)}"], m, tmp_path)
