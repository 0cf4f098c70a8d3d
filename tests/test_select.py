"""Stage 3 (qmpigen/select.py): which functions are intercepted, and their numbers.

The enumeration is the ABI between the core and every tool built for it, so its order
and its identity (Enumeration.hash) are tested exactly.
"""

from __future__ import annotations

import hashlib
import re
import shutil

import pytest

from qmpigen.errors import QmpigenError
from qmpigen.mpi.select import Selection, enumerate_functions, is_candidate

pytestmark = pytest.mark.skipif(shutil.which("cc") is None, reason="needs a C compiler (cc)")

# The fixture's interceptable MPI_ functions in code-point order, written out by hand.
# Not selected: MPI_Type_get_value_index (no PMPI twin), MPIX_Comm_revoke (needs --mpix).
ENUMERATED = [
    "MPI_Abort",
    "MPI_Aint_add",
    "MPI_Attr_get",
    "MPI_Comm_c2f",
    "MPI_Comm_f2c",
    "MPI_Comm_rank",
    "MPI_Comm_set_handler",
    "MPI_Fixture_scalars",
    "MPI_Group_range_incl",
    "MPI_Info_dup",
    "MPI_Op_create",
    "MPI_Pcontrol",
    "MPI_Pready_list",
    "MPI_Send",
    "MPI_Send_c",
    "MPI_Session_init",
    "MPI_T_event_handle_free",
    "MPI_Test",
    "MPI_Wtick",
    "MPI_Wtime",
]


@pytest.fixture(scope="module")
def api(quirks_api):
    return quirks_api  # read and parsed once per session (conftest)


def names(api, **selection):
    return list(enumerate_functions(api, Selection(**selection)).names)


def test_default_enumeration(api):
    """Every MPI_ function with a PMPI twin, in code-point order, indices 0..n-1."""
    enumeration = enumerate_functions(api)
    assert list(enumeration.names) == ENUMERATED
    assert [enumeration.index(n) for n in ENUMERATED] == list(range(len(ENUMERATED)))
    assert enumeration.get("MPI_Wtime").return_type == "double"
    assert enumeration.get("MPI_Type_get_value_index") is None
    assert enumeration.facts == api.facts


def test_order_is_code_point_not_case_insensitive(api):
    """'X' (0x58) sorts before '_' (0x5f): MPIX_ comes first, unlike a case-folding sort
    that would put it last. Tools and core must agree on this byte order."""
    with_mpix = names(api, mpix=True)
    assert with_mpix == ["MPIX_Comm_revoke"] + ENUMERATED
    assert with_mpix != sorted(with_mpix, key=str.casefold)


def test_mpix_only_with_the_flag(api):
    """Extensions change between MPI releases: intercepting them is opt-in."""
    assert "MPIX_Comm_revoke" not in names(api)
    assert "MPIX_Comm_revoke" in names(api, mpix=True)


def test_function_without_pmpi_is_never_a_candidate(api):
    """The end of the chain calls PMPI_X: without one there is nothing to call."""
    no_twin = api.get("MPI_Type_get_value_index")
    assert not is_candidate(no_twin, mpix=True)
    assert is_candidate(api.get("MPI_Send"), mpix=False)
    assert not is_candidate(api.get("MPIX_Comm_revoke"), mpix=False)
    with pytest.raises(QmpigenError, match="matches no interceptable function"):
        enumerate_functions(api, Selection(include=("MPI_Type_get_value_index",)))


@pytest.mark.parametrize(
    "selection, expected",
    [
        (dict(include=("MPI_Send*",)), ["MPI_Send", "MPI_Send_c"]),
        (dict(include=("MPI_Wtime", "MPI_Abort")), ["MPI_Abort", "MPI_Wtime"]),
        (dict(include=("MPI_W*", "MPI_Wtime")), ["MPI_Wtick", "MPI_Wtime"]),  # overlaps counted once
        (dict(include=("MPI_Comm_*",), exclude=("*2*",)), ["MPI_Comm_rank", "MPI_Comm_set_handler"]),
        (dict(include=("MPI_?time",)), ["MPI_Wtime"]),
        (dict(include=("MPI_Send[_]c",)), ["MPI_Send_c"]),
        (dict(include=("MPI*_Comm_revoke",), mpix=True), ["MPIX_Comm_revoke"]),
    ],
)
def test_include_and_exclude_globs(api, selection, expected):
    """fnmatch globs (*, ?, [..]) select by name; the result stays in code-point order."""
    assert names(api, **selection) == expected


def test_exclude_alone_removes_from_everything(api):
    """Without --include, --exclude starts from every candidate."""
    assert names(api, exclude=("MPI_T_*", "MPI_Send_c")) == [
        n for n in ENUMERATED if n not in ("MPI_T_event_handle_free", "MPI_Send_c")
    ]


def test_globs_are_case_sensitive(api):
    """MPI names are case-sensitive C identifiers; so are the globs."""
    with pytest.raises(QmpigenError):
        enumerate_functions(api, Selection(include=("mpi_send",)))


@pytest.mark.parametrize(
    "selection, message",
    [
        (dict(include=("MPI_Nothing*",)), "--include 'MPI_Nothing*' matches no interceptable function of MPICH 9.9.9"),
        (dict(include=("MPI_Send", "MPI_Nope")), "--include 'MPI_Nope' matches no"),
        (dict(exclude=("MPI_Nope",)), "--exclude 'MPI_Nope' matches no"),
        # exclude is checked against what include chose, not against every function
        (dict(include=("MPI_Send",), exclude=("MPI_Wtime",)), "--exclude 'MPI_Wtime' matches no"),
        (
            dict(include=("MPIX_*",)),
            "matches no interceptable function of MPICH 9.9.9 (it matches MPIX_ functions: add --mpix)",
        ),
        (dict(exclude=("MPI_*",)), "the selection leaves no MPI function to intercept"),
    ],
)
def test_selection_errors(api, selection, message):
    """A glob that matches nothing is a typo until proven otherwise: refuse it."""
    with pytest.raises(QmpigenError) as info:
        enumerate_functions(api, Selection(**selection))
    assert message in info.value.one_line()


def test_hash_identifies_the_set_of_names(api):
    """Same set -> same hash however it was selected; another set -> another hash."""
    everything = enumerate_functions(api)
    spelled_out = enumerate_functions(api, Selection(include=tuple(reversed(ENUMERATED))))
    fewer = enumerate_functions(api, Selection(exclude=("MPI_Wtick",)))
    more = enumerate_functions(api, Selection(mpix=True))
    assert re.fullmatch(r"20-[0-9a-f]{16}", everything.hash)
    assert spelled_out.hash == everything.hash
    assert fewer.hash != everything.hash and fewer.hash.startswith("19-")
    assert more.hash != everything.hash and more.hash.startswith("21-")
    assert everything.hash == "20-" + hashlib.sha256("\n".join(ENUMERATED).encode()).hexdigest()[:16]


def test_hash_depends_on_names_not_only_count(api):
    """Swapping one function for another keeps the count but must change the hash."""
    a = enumerate_functions(api, Selection(exclude=("MPI_Wtick",)))
    b = enumerate_functions(api, Selection(exclude=("MPI_Wtime",)))
    assert len(a) == len(b)
    assert a.hash != b.hash
