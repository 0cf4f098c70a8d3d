"""Stage 2 (qmpigen/parse.py, qmpigen/model.py): the function model of the fixture header.

tests/fixtures/quirks_mpi.h holds one declaration per quirk real MPIs have; each test
states the C text or flag the generated wrappers will rely on.
"""

from __future__ import annotations

import re
import shutil

import pytest

from qmpigen.errors import QmpigenError
from qmpigen.mpi.header import HeaderRequest, read_header
from qmpigen.mpi.parse import parse_header, preprocessed_line

from conftest import FIXTURES

QUIRKS = FIXTURES / "quirks_mpi.h"
BROKEN = FIXTURES / "broken_mpi.h"

pytestmark = pytest.mark.skipif(shutil.which("cc") is None, reason="needs a C compiler (cc)")

# Every MPI_/MPIX_ function the fixture declares, in declaration order.
DECLARED = [
    "MPI_Abort",
    "MPI_Send",
    "MPI_Send_c",
    "MPI_Wtime",
    "MPI_Wtick",
    "MPI_Aint_add",
    "MPI_Comm_f2c",
    "MPI_Comm_c2f",
    "MPI_Pcontrol",
    "MPI_Group_range_incl",
    "MPI_Pready_list",
    "MPI_Op_create",
    "MPI_T_event_handle_free",
    "MPI_Comm_set_handler",
    "MPI_Session_init",
    "MPI_Comm_rank",
    "MPI_Fixture_scalars",
    "MPI_Attr_get",
    "MPI_Info_dup",
    "MPI_Test",
    "MPI_Type_get_value_index",
    "MPIX_Comm_revoke",
]


def parse_text(tmp_path, text: str, name: str = "mpi.h"):
    header = tmp_path / name
    header.write_text(text)
    return parse_header(read_header(HeaderRequest(str(header), "cc")))


@pytest.fixture(scope="module")
def api(quirks_api):
    return quirks_api  # read and parsed once per session (conftest)


def fn(api, name):
    function = api.get(name)
    assert function is not None, f"{name} not in the model"
    return function


def param(api, function, name):
    return next(p for p in fn(api, function).params if p.name == name)


# -- what is in the model ------------------------------------------------------------


def test_model_holds_exactly_the_declared_mpi_functions_in_order(api):
    """PMPI_/QMPI_ functions, variables, function-pointer variables, other functions and
    the macro-only removed MPI_Address are not MPI procedures of the model."""
    assert [f.name for f in api] == DECLARED


def test_removed_function_defined_only_as_macro_is_absent(api):
    """Open MPI #defines removed MPI-1 names to a compile error: nothing to intercept."""
    assert api.get("MPI_Address") is None


def test_locations_point_at_the_declarations(api):
    """-d and error messages cite header:line; check against the fixture's own text."""
    lines = QUIRKS.read_text().splitlines()
    for function in api:
        assert function.location.file == str(QUIRKS)
        declared = lines[function.location.line - 1]
        assert re.search(rf"\b{function.name}\(", declared), (function.name, declared)


# -- return types and simple signatures ----------------------------------------------


@pytest.mark.parametrize(
    "name, return_type",
    [
        ("MPI_Send", "int"),
        ("MPI_Wtime", "double"),
        ("MPI_Wtick", "double"),
        ("MPI_Aint_add", "MPI_Aint"),
        ("MPI_Comm_f2c", "MPI_Comm"),
        ("MPI_Comm_c2f", "MPI_Fint"),
    ],
)
def test_return_types(api, name, return_type):
    """Non-int returns must survive: a wrapper returning int from MPI_Wtime is wrong."""
    function = fn(api, name)
    assert function.return_type == return_type
    assert function.returns_int == (return_type == "int")


def test_send_signature_and_const_buffer(api):
    """The wrapper must be declared exactly as mpi.h declares it (const included)."""
    send = fn(api, "MPI_Send")
    assert send.signature == (
        "int MPI_Send(const void *buf, int count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm)"
    )
    assert send.args == "buf, count, datatype, dest, tag, comm"
    buf = send.params[0]
    assert (buf.type, buf.base_type, buf.is_pointer, buf.is_const) == ("const void *", "void", True, True)
    assert not any(p.is_const for p in send.params[1:])
    assert (send.params[2].base_type, send.params[2].is_pointer) == ("MPI_Datatype", False)


def test_void_parameter_list_is_empty(api):
    """f(void) has no parameters; '(void)' is printed back only for the prototype."""
    wtime = fn(api, "MPI_Wtime")
    assert wtime.params == ()
    assert (wtime.params_c, wtime.args, wtime.fixed_params) == ("void", "", "")
    assert wtime.signature == "double MPI_Wtime(void)"


def test_unnamed_parameters_get_synthesised_names(api):
    """A wrapper must pass every argument on, so each needs a name."""
    rank = fn(api, "MPI_Comm_rank")
    assert rank.params_c == "MPI_Comm arg0, int *arg1"
    assert rank.args == "arg0, arg1"


# -- variadic, arrays, function types --------------------------------------------------


def test_pcontrol_is_variadic_with_a_const_by_value_level(api):
    pcontrol = fn(api, "MPI_Pcontrol")
    assert pcontrol.variadic
    assert pcontrol.params_c == "const int level, ..."
    assert pcontrol.fixed_params == "const int level"
    assert pcontrol.quirk == "fan_out"
    level = pcontrol.params[0]
    assert level.type == "const int"
    assert not level.is_const and not level.is_pointer  # is_const is about pointed-to data
    assert not any(f.variadic for f in api if f.name != "MPI_Pcontrol")


def test_array_of_arrays_decays_to_pointer_to_array(api):
    """int ranges[][3] is passed as int (*)[3]; va_arg with 'int *' would be wrong."""
    ranges = param(api, "MPI_Group_range_incl", "ranges")
    assert ranges.declaration == "int ranges[][3]"
    assert ranges.type == "int [][3]"
    assert ranges.va_type == "int (*)[3]"
    assert ranges.va_declaration == "int (*ranges)[3]"
    assert (ranges.is_array, ranges.is_pointer, ranges.is_const, ranges.base_type) == (True, True, False, "int")


def test_const_array_stays_const_when_decayed(api):
    partitions = param(api, "MPI_Pready_list", "array_of_partitions")
    assert partitions.declaration == "const int array_of_partitions[]"
    assert partitions.va_type == "const int *"
    assert (partitions.is_array, partitions.is_pointer, partitions.is_const) == (True, True, True)


def test_pointer_to_function_type_typedef(api):
    user_fn = param(api, "MPI_Op_create", "user_fn")
    assert user_fn.declaration == "MPI_User_function *user_fn"
    assert user_fn.va_type == "MPI_User_function *"
    assert user_fn.is_function_pointer and user_fn.is_pointer
    assert not param(api, "MPI_Op_create", "op").is_function_pointer


def test_parameter_of_function_type_decays_to_pointer(api):
    """MPI_T_event_free_cb_function cb (no '*') is a pointer parameter (C11 6.7.6.3p8)."""
    cb = param(api, "MPI_T_event_handle_free", "free_cb_function")
    assert cb.declaration == "MPI_T_event_free_cb_function free_cb_function"
    assert cb.type == "MPI_T_event_free_cb_function"
    assert cb.va_type == "MPI_T_event_free_cb_function *"
    assert cb.va_declaration == "MPI_T_event_free_cb_function *free_cb_function"
    assert cb.is_function_pointer and cb.is_pointer and not cb.is_array
    assert not param(api, "MPI_T_event_handle_free", "user_data").is_function_pointer


def test_function_pointer_typedef_is_a_function_pointer_but_not_decayed(api):
    handler = param(api, "MPI_Comm_set_handler", "handler")
    assert handler.va_type == handler.type == "MPI_Fixture_handler_ptr"
    assert handler.is_function_pointer
    assert not handler.is_pointer  # the pointer is inside the typedef, like a handle


def test_struct_pointer_handles_are_handles_not_pointers(api):
    """Open MPI's handles are struct pointers behind a typedef: still handles, not pointers."""
    request = param(api, "MPI_Pready_list", "request")
    assert request.type == "MPI_Request"
    assert request.base_type == "MPI_Request" and not request.is_pointer
    assert param(api, "MPI_Test", "request").is_pointer  # MPI_Request * is a pointer


@pytest.mark.parametrize(
    "name, promoted",
    [
        ("c", "int"),
        ("uc", "int"),
        ("s", "int"),
        ("f", "double"),
        ("fs", "int"),
        ("d", None),
        ("i", None),
        ("name", None),
    ],
)
def test_vararg_promotions(api, name, promoted):
    """va_arg must name the promoted type of char/short/float (C11 6.5.2.2p6), also
    through a typedef; pointers and int/double are passed as they are."""
    assert param(api, "MPI_Fixture_scalars", name).promoted_type == promoted


# -- flags and categories ------------------------------------------------------------


def test_has_pmpi(api):
    """Only a function with a PMPI_ twin (declared or #defined) can end a chain."""
    without = {f.name for f in api if not f.has_pmpi}
    assert without == {"MPI_Type_get_value_index"}
    assert fn(api, "MPI_Info_dup").has_pmpi  # PMPI_Info_dup is only a macro
    assert fn(api, "MPIX_Comm_revoke").has_pmpi  # PMPIX_ twin


def test_is_macro_marks_functions_also_defined_as_macros(api):
    """MPICH #defines MPI_Comm_c2f after its prototype: generated C must not define it."""
    assert {f.name for f in api if f.is_macro} == {"MPI_Comm_c2f", "MPI_Comm_f2c"}


@pytest.mark.parametrize(
    "name, categories",
    [
        ("MPI_Send", ()),
        ("MPI_Send_c", ("large_count",)),
        ("MPI_T_event_handle_free", ("mpi_t",)),
        ("MPI_Session_init", ("sessions",)),
        ("MPIX_Comm_revoke", ("mpix",)),
        ("MPI_Attr_get", ("deprecated",)),
        ("MPI_Comm_c2f", ("conversion", "macro")),
        ("MPI_Comm_f2c", ("conversion", "macro")),
    ],
)
def test_categories(api, name, categories):
    function = fn(api, name)
    assert function.categories == categories
    for category in categories:
        assert function.has_category(category)


def test_derived_names(api):
    """Names the templates use: thesis enum (_MPI_Send), forum enum (MPI_SEND_T), PMPI twin."""
    send, revoke = fn(api, "MPI_Send"), fn(api, "MPIX_Comm_revoke")
    assert (send.prefix, send.short, send.pmpi, send.enum, send.forum_enum) == (
        "MPI",
        "Send",
        "PMPI_Send",
        "_MPI_Send",
        "MPI_SEND_T",
    )
    assert (revoke.prefix, revoke.short, revoke.pmpi, revoke.forum_enum) == (
        "MPIX",
        "Comm_revoke",
        "PMPIX_Comm_revoke",
        "MPIX_COMM_REVOKE_T",
    )


def test_extra_parameters(api):
    """The wrapper signatures: the fixed parameters plus the QMPI context/link arguments."""
    send_c = fn(api, "MPI_Send_c")
    assert send_c.with_extra("int i").endswith("MPI_Comm comm, int i")
    assert send_c.with_extra("QMPI_Context c", leading=True).startswith("QMPI_Context c, const void *buf")
    assert fn(api, "MPI_Wtime").with_extra("int i") == "int i"


# -- header facts ----------------------------------------------------------------------


def test_facts_of_the_fixture(api):
    """Version macros, parenthesised or not, and QMPI_Context => declares_qmpi."""
    facts = api.facts
    assert (facts.implementation, facts.version) == ("MPICH", "9.9.9")
    assert (facts.mpi_version, facts.mpi_subversion) == (4, 1)
    assert facts.declares_qmpi
    assert facts.as_dict() == {
        "implementation": "MPICH",
        "version": "9.9.9",
        "mpi_version": "4.1",
        "declares_qmpi": True,
    }


def test_forum_enum_values_follow_c_rules(api):
    """Implicit values count on from the last explicit one (MPI_WTICK_T = 10)."""
    assert api.facts.forum_enum == (
        ("MPI_ABORT_T", 0),
        ("MPI_SEND_T", 1),
        ("MPI_WTICK_T", 10),
        ("MPI_WTIME_T", 11),
        ("MPI_LAST_FUNC_T", 12),
    )
    members = dict(api.facts.forum_enum)
    for name in ("MPI_Abort", "MPI_Send", "MPI_Wtick", "MPI_Wtime"):
        assert fn(api, name).forum_enum in members


@pytest.mark.parametrize(
    "macros, implementation, version",
    [
        (
            "#define OMPI_MAJOR_VERSION 5\n#define OMPI_MINOR_VERSION 0\n#define OMPI_RELEASE_VERSION 11\n",
            "Open MPI",
            "5.0.11",
        ),
        ('#define I_MPI_VERSION "2021.13"\n#define MPICH_VERSION "3.4a2"\n', "Intel MPI", "2021.13"),
        ("", "unknown", ""),
    ],
)
def test_implementation_markers(tmp_path, macros, implementation, version):
    """Intel MPI also defines MPICH_VERSION: the Intel marker must win."""
    api = parse_text(
        tmp_path,
        f"#define MPI_VERSION 3\n#define MPI_SUBVERSION 1\n{macros}"
        "typedef int MPI_Comm;\nint MPI_Barrier(MPI_Comm c);\n",
    )
    assert (api.facts.implementation, api.facts.version) == (implementation, version)
    assert (api.facts.mpi_version, api.facts.mpi_subversion) == (3, 1)
    assert not api.facts.declares_qmpi and api.facts.forum_enum == ()


def test_forum_enum_with_a_non_constant_value_is_an_error(tmp_path):
    """Numbering must not be guessed: an expression value is refused with a location."""
    with pytest.raises(QmpigenError, match="MPI_SEND_T is not a plain integer constant") as info:
        parse_text(tmp_path, "enum QMPI_Functions_enum { MPI_ABORT_T, MPI_SEND_T = 1 + 1, MPI_LAST_FUNC_T };\n")
    assert info.value.location is not None and info.value.location.line == 1


# -- parse errors and purity -------------------------------------------------------------


def test_parse_error_names_header_line_and_preprocessed_line():
    """A broken header is reported at its own file:line and at the line of the
    preprocessed text (which is what pycparser actually read)."""
    pre = read_header(HeaderRequest(str(BROKEN), "cc"))
    expected = 1 + next(
        i for i, line in enumerate(pre.text.splitlines()) if "MPI_Comm_size(MPI_Comm comm int *size)" in line
    )
    with pytest.raises(QmpigenError) as info:
        parse_header(pre)
    message = info.value.one_line()
    assert message.startswith(f"{BROKEN}:5:")
    assert f"(preprocessed output line {expected})" in message


def test_preprocessed_line_follows_linemarkers():
    """Lines count on from each marker; a file re-entered later is found again."""
    text = '# 1 "a.h"\nint a;\n# 10 "b.h"\nint b;\nint c;\n# 3 "a.h"\nint d;\n'
    assert preprocessed_line(text, "b.h", 11) == 5
    assert preprocessed_line(text, "a.h", 1) == 2
    assert preprocessed_line(text, "a.h", 3) == 7
    assert preprocessed_line(text, "c.h", 1) == 0


def test_parsing_is_repeatable():
    """The model is a value: the same header text always gives an equal model."""
    pre = read_header(HeaderRequest(str(QUIRKS), "cc"))
    assert parse_header(pre) == parse_header(pre)
