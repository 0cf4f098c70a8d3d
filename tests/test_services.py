"""Services between tools and the current call (PnMPI's services): the
request tracker (sample_tools/reqtrack.qmpi) offers "reqtrack.creator"; the checker
(sample_tools/reqcheck.qmpi) looks it up by name and reports MPI_Wait on the one request
tests/apps/requests_app.c makes behind the tools' back (PMPI_Isend), not on the valid
ones, naming the application's call and its argument through QMPI_Call_function and
QMPI_Call_argument. Missing names give an error code; a signature mismatch stops the
job with one line."""

from __future__ import annotations

import re

import pytest

from conftest import APPS, Mpi, qmpi_errors

pytestmark = pytest.mark.mpi

RANKS = 2


@pytest.fixture(scope="session")
def requests_app(mpi: Mpi, core, tmp_path_factory):
    out = tmp_path_factory.mktemp(f"requests-{mpi.name}")
    return mpi.build_app(APPS / "requests_app.c", core, out / "requests_app")


def chain(tools, *names):
    return ":".join(str(tools / f"lib{n}.so") for n in names)


@pytest.mark.parametrize("order", [("reqcheck", "reqtrack"), ("reqtrack", "reqcheck")])
def test_the_checker_reports_only_the_request_made_behind_the_stack(mpi, requests_app, sample_tools, order):
    """Either order: the checker looks the service up at its first MPI_Wait, when the
    tracker has registered it (at its init), wherever it sits in the chain."""
    proc = mpi.run(RANKS, [requests_app], env={"TOOLS": chain(sample_tools, *order)})
    assert proc.returncode == 0, f"{proc.stdout}\n{proc.stderr}"
    assert sorted(re.findall(r"^RANK (\d+) ok$", proc.stdout, re.M)) == ["0", "1"], proc.stdout
    level = order.index("reqcheck") + 1
    hidden = dict(re.findall(r"^RANK (\d+) hidden at (0x[0-9a-f]+)$", proc.stdout, re.M))
    reports = re.findall(
        rf"^reqcheck@{level} rank (\d+): MPI_Wait on a request no tool saw created "
        rf"\(the application's (\w+), argument 0 at (0x[0-9a-f]+)\)$",
        proc.stdout,
        re.M,
    )
    # One report per rank, for the hidden request only: the argument is the address of
    # the application's `hidden` variable, so QMPI_Call_argument saw the real call.
    assert sorted(reports) == sorted((rank, "MPI_Wait", address) for rank, address in hidden.items()), proc.stdout
    totals = re.findall(rf"^reqcheck@{level} rank (\d+): 1 unknown request waited on$", proc.stdout, re.M)
    assert sorted(totals) == ["0", "1"], proc.stdout


def test_without_a_tracker_the_checker_says_so_once_and_checks_nothing(mpi, requests_app, sample_tools):
    proc = mpi.run(RANKS, [requests_app], env={"TOOLS": chain(sample_tools, "reqcheck")})
    assert proc.returncode == 0, f"{proc.stdout}\n{proc.stderr}"
    lines = re.findall(
        r"^reqcheck@1 rank (\d+): no request tracker in the stack \(service reqtrack.creator\): "
        r"checking nothing$",
        proc.stderr,
        re.M,
    )
    assert sorted(lines) == ["0", "1"], proc.stderr
    assert "no tool saw created" not in proc.stdout


def test_missing_names_return_an_error_code(mpi, requests_app, sample_tools, test_tools):
    proc = mpi.run(
        RANKS,
        [requests_app],
        env={"TOOLS": f"{test_tools / 'libsvcmisuse.so'}:{chain(sample_tools, 'reqtrack')}", "SVCMISUSE": "missing"},
    )
    assert proc.returncode == 0, f"{proc.stdout}\n{proc.stderr}"
    assert proc.stdout.count("svcmisuse: missing service 1 1, missing global 1 1") == RANKS, proc.stdout


def test_a_signature_mismatch_stops_the_job_with_one_line(mpi, requests_app, sample_tools, test_tools):
    proc = mpi.run(
        RANKS, [requests_app], env={"TOOLS": f"{test_tools / 'libsvcmisuse.so'}:{chain(sample_tools, 'reqtrack')}"}
    )
    assert proc.returncode != 0
    errors = set(qmpi_errors(proc.stderr))
    assert errors == {
        "qmpi: error: service 'reqtrack.creator' of level 2 has the signature "
        "'int(void *, MPI_Request, int *)', asked for as 'int(void)'"
    }, proc.stderr
    assert "RANK" not in proc.stdout
