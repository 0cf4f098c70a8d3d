"""The Fortran planning stage (qmpigen.mpi.fortran) on a fixture header, without an MPI:
which routines get core entries, the conversion of every parameter, why the others pass
through, coverage, and the rendered qmpi_fortran.c as a golden file. The Fortran
"libraries" are a symbol set made here, as fortran_libs would read it from an MPI's
libraries. Compile-and-run proof is tests/test_fortran.py on Debian's MPIs."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from qmpigen.mpi.fortran import Conv, plan_fortran
from qmpigen.mpi.fortran_libs import FortranLibraries
from qmpigen.output.render import GeneratorInfo, render_core

from conftest import FIXTURES, fixture_api, fixture_enumeration, fixture_source

HEADER = FIXTURES / "fortran_mpi.h"
GOLDEN = Path(__file__).resolve().parent / "golden" / "fortran" / "qmpi_fortran.c"
GOLDEN_COMMAND = "qmpigen build-core --mpi-header fortran_mpi.h --mpicc cc -o core"
# What an Open MPI 4.1 Fortran library exports for the fixture's functions: every
# mangling for most, some without an mpi_f08 routine, MPI_Comm_size without any
# Fortran routine at all (so it has no entry), nor the handle conversions (C only),
# _cptr overloads for MPI_Alloc_mem.
UNBOUND = {"MPI_Comm_size"}
NO_F08 = {"MPI_Waitany"}


def symbols():
    names = set()
    for function in fixture_enumeration(HEADER):
        if function.name in UNBOUND or function.name.endswith(("_f2c", "_c2f")):
            continue
        lower = function.name.lower()
        names |= {lower + "_", lower + "__", lower, function.name.upper()}
        if function.name not in NO_F08:
            names.add(lower + "_f08_")
    return names | {"mpi_alloc_mem_cptr_", "pmpi_send_", "ompi_send_f"}


@pytest.fixture(scope="module")
def plan():
    libraries = FortranLibraries(
        ("mpif90",), "GNU Fortran (test) 12", ("libmpi_mpifh.so.40",), ("-lmpi_mpifh",), frozenset(symbols())
    )
    return plan_fortran(
        fixture_enumeration(HEADER), fixture_api(HEADER), libraries, fixture_source(HEADER).function_macros
    )


def entry(plan, name):
    return next(e for e in plan if e.function.name == name)


def convs(plan, name):
    return {p.name: p.conv for p in entry(plan, name).params}


def test_only_functions_with_a_fortran_routine_get_entries(plan):
    names = {e.function.name for e in plan}
    assert "MPI_Comm_size" not in names and "MPI_Send" in names
    send = entry(plan, "MPI_Send")
    assert send.routed and send.f77_names == ("mpi_send_", "mpi_send__", "mpi_send", "MPI_SEND")
    # Open MPI's mpi_f08 routines call PMPI_: the core defines them too.
    assert send.defined_f08 == ("mpi_send_f08_",)
    assert entry(plan, "MPI_Waitany").f08_names == ()
    assert "mpi_alloc_mem_cptr_" in entry(plan, "MPI_Alloc_mem").f77_names


def test_each_parameter_gets_its_conversion(plan):
    assert convs(plan, "MPI_Send") == {
        "buf": Conv.BUFFER,
        "count": Conv.VALUE,
        "datatype": Conv.HANDLE,
        "dest": Conv.VALUE,
        "tag": Conv.VALUE,
        "comm": Conv.HANDLE,
    }
    assert convs(plan, "MPI_Recv")["status"] is Conv.STATUS
    assert convs(plan, "MPI_Init") == {"argc": Conv.ABSENT, "argv": Conv.ABSENT}
    assert convs(plan, "MPI_Iprobe")["flag"] is Conv.LOGICAL_REF
    assert convs(plan, "MPI_Comm_split")["newcomm"] is Conv.HANDLE_REF
    assert convs(plan, "MPI_Comm_set_name")["comm_name"] is Conv.STRING_IN
    assert convs(plan, "MPI_Comm_get_name")["comm_name"] is Conv.STRING_OUT
    waitall = {p.name: p for p in entry(plan, "MPI_Waitall").params}
    assert waitall["array_of_requests"].conv is Conv.HANDLE_ARRAY and waitall["array_of_requests"].count == "*count"
    assert waitall["array_of_statuses"].conv is Conv.STATUS_ARRAY
    assert convs(plan, "MPI_Waitany")["index"] is Conv.INDEX_REF
    assert convs(plan, "MPI_Alloc_mem")["baseptr"] is Conv.DIRECT
    assert convs(plan, "MPI_Buffer_detach")["buffer"] is Conv.DROPPED_ADDRESS


def test_an_array_whose_length_the_call_implies(plan):
    sendtypes = next(p for p in entry(plan, "MPI_Alltoallw").params if p.name == "sendtypes")
    assert sendtypes.conv is Conv.HANDLE_ARRAY and not sendtypes.length
    assert sendtypes.count == "qmpi_f_peers(PMPI_Comm_f2c(*comm))"


def test_fortran_error_handlers_go_through_a_c_handler(plan):
    create = entry(plan, "MPI_Comm_create_errhandler")
    function = create.params[0]
    assert create.routed and function.conv is Conv.ERRHANDLER_FN
    assert (function.handle_type, function.partner) == ("MPI_Comm", "errhandler")
    assert plan.errhandler_kinds == (("MPI_Comm", "PMPI_Comm_get_errhandler", "PMPI_Comm_c2f"),)


@pytest.mark.parametrize(
    "name, why",
    [
        ("MPI_Op_create", "function: a user callback"),
        ("MPI_Comm_get_attr", "attribute_val: an attribute set from Fortran is a pointer to its value in C"),
    ],
)
def test_what_passes_through_says_why(plan, name, why):
    assert not entry(plan, name).routed
    assert entry(plan, name).reason.startswith(why)


def test_pcontrol_has_no_ierror_and_wtime_returns_its_value(plan):
    assert entry(plan, "MPI_Pcontrol").routed and not entry(plan, "MPI_Pcontrol").ierror
    assert entry(plan, "MPI_Wtime").params_c == "void"


def test_coverage_counts_routed_functions(plan):
    total, routed, seen = plan.f77_coverage()
    passing = [e.function.name for e in plan if not e.routed]
    assert sorted(passing) == ["MPI_Comm_get_attr", "MPI_Op_create"]
    # Open MPI's own routines call PMPI_: what passes through is not seen by tools.
    assert (total, routed, seen) == (len(plan.entries), total - 2, total - 2)


def test_rendered_entries_match_the_golden_file(plan):
    """Regenerate with: QMPIGEN_REGEN_GOLDEN=1 make test-fast (then review the diff)."""
    enumeration = fixture_enumeration(HEADER)
    text = render_core(enumeration, GeneratorInfo.for_enumeration(enumeration, GOLDEN_COMMAND), plan)["qmpi_fortran.c"]
    if os.environ.get("QMPIGEN_REGEN_GOLDEN"):
        GOLDEN.parent.mkdir(parents=True, exist_ok=True)
        GOLDEN.write_text(text)
    assert text == GOLDEN.read_text()
    assert "static void qmpi_f_MPI_Comm_errhandler(MPI_Comm *handle, int *error_code, ...)" in text
    assert "int c_sendtypes_n = qmpi_f_peers(PMPI_Comm_f2c(*comm));" in text
    assert "int c_recvtypes_n = c_sendtypes_n;" in text  # the size asked once a call


def test_a_family_the_core_may_not_define_stays_with_the_binding(monkeypatch):
    """Intel MPI's quirks: its *_f08_ routines bypass C but are not defined (ifort's
    module; nothing here can test them), its *_f08ts_ ones reach C. Neither family gets
    a symbol, each says its route, and build-core's line counts only entries with symbols."""
    from qmpigen.cli.listing import fortran_line, fortran_routes
    from qmpigen.mpi import quirks_fortran as quirks

    enumeration = fixture_enumeration(HEADER)
    monkeypatch.setitem(quirks.FORTRAN, enumeration.facts.implementation, quirks.FORTRAN["Intel MPI"])
    f08_only = "MPI_Waitany"  # no mpif.h routine below: only mpi_f08 ones
    names = {n for n in symbols() if not (n.startswith("mpi_waitany") or n == "MPI_WAITANY")}
    names |= {"mpi_send_f08ts_", "mpi_waitany_f08_"}
    libraries = FortranLibraries(
        ("mpif90",), "GNU Fortran (test) 12", ("libmpifort.so.12",), ("-lmpifort",), frozenset(names)
    )
    plan = plan_fortran(enumeration, fixture_api(HEADER), libraries, fixture_source(HEADER).function_macros)
    send, waitany = entry(plan, "MPI_Send"), entry(plan, f08_only)
    assert send.f08_names == (("mpi_send_f08_", False), ("mpi_send_f08ts_", False)) and send.defined_f08 == ()
    routes = {r["symbol"]: r["route"] for r in fortran_routes(plan, send)["f08"]}
    assert routes == {"mpi_send_f08_": "bypasses the chain", "mpi_send_f08ts_": "binding reaches C"}
    assert waitany.routed and not waitany.f77_names and waitany.defined_f08 == ()
    assert waitany not in plan.defining and send in plan.defining
    assert f"Fortran entries for {len(plan.defining)} of {len(plan.entries)} functions" in fortran_line(plan, "auto")
    assert len(plan.defining) == len(plan.routed) - 1
