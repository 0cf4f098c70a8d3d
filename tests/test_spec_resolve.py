"""Tool specs, stage 2 (qmpigen/spec_resolve.py): a ToolSpec checked against the
enumeration of one MPI, giving the wrappers to generate.

Two small headers stand for the two kinds of MPI we meet: an MPICH-like MPI 4.1 one
with large-count `_c` functions and sessions, and an Open-MPI-like MPI 3.1 one without
(tests/fixtures/mpich_like_mpi.h, ompi_like_mpi.h). They go through the real header
reader (`cc -E`) and model, so names, parameters and facts are exactly what qmpigen
would see.
"""

from __future__ import annotations

import shutil

import pytest

from qmpigen.errors import QmpigenError
from qmpigen.mpi.select import Selection, enumerate_functions
from qmpigen.spec.parse import parse_spec
from qmpigen.spec.resolve import resolve

from conftest import TOOLS_MPI, fixture_enumeration

pytestmark = pytest.mark.skipif(shutil.which("cc") is None, reason="needs a C compiler (cc)")


# Read and parsed once per session (conftest): tests/fixtures/mpich_like_mpi.h and
# ompi_like_mpi.h.
@pytest.fixture(scope="module")
def mpich_api(mpich_like_api):
    return mpich_like_api


@pytest.fixture(scope="module")
def ompi_api(ompi_like_api):
    return ompi_like_api


@pytest.fixture(scope="module")
def mpich(mpich_like):
    return mpich_like


@pytest.fixture(scope="module")
def ompi(ompi_like):
    return ompi_like


@pytest.fixture(scope="module")
def tools_header():
    return fixture_enumeration(TOOLS_MPI)


def tool_of(text, enumeration, api=None):
    return resolve(parse_spec(text, "t.qmpi"), enumeration, api)


def wrapped(text, enumeration, api=None):
    return [w.function.name for w in tool_of(text, enumeration, api).wrappers]


def error_of(text, enumeration, api=None):
    with pytest.raises(QmpigenError) as info:
        tool_of(text, enumeration, api)
    return info.value.one_line()


def test_the_fixture_headers(mpich, ompi):
    assert (mpich.facts.implementation, mpich.facts.version) == ("MPICH", "9.9.9")
    assert (ompi.facts.implementation, ompi.facts.version, ompi.facts.mpi_version) == ("Open MPI", "5.0.11", 3)
    assert "MPI_Send_c" in mpich.names and "MPI_Send_c" not in ompi.names


# -- selections ----------------------------------------------------------------------------


def test_exact_names_in_enumeration_order(mpich):
    assert wrapped("tool t; intercept MPI_Recv, MPI_Send;", mpich) == ["MPI_Recv", "MPI_Send"]


def test_globs_groups_and_except(mpich):
    assert wrapped("tool t; intercept MPI_File_*;", mpich) == ["MPI_File_c2f", "MPI_File_close", "MPI_File_open"]
    assert wrapped("tool t; intercept io;", mpich) == ["MPI_File_close", "MPI_File_open"]  # no conversions
    assert wrapped("tool t; intercept collectives except MPI_*arrier;", mpich) == ["MPI_Allreduce", "MPI_Bcast"]
    assert wrapped("tool t; intercept collectives except MPI_Barrier;", mpich) == [
        "MPI_Allreduce",
        "MPI_Bcast",
        "MPI_Ibarrier",
    ]
    assert wrapped("tool t; intercept point-to-point;", mpich) == ["MPI_Isend", "MPI_Recv", "MPI_Send", "MPI_Send_c"]
    assert wrapped("tool t; intercept point-to-point;", ompi_enumeration_of(mpich)) == [
        "MPI_Isend",
        "MPI_Recv",
        "MPI_Send",
    ]
    assert wrapped("tool t; intercept MPI_[IS]send;", mpich) == ["MPI_Isend"]  # case-sensitive: not MPI_Send


def ompi_enumeration_of(enumeration):
    """The same MPI without its _c functions: groups follow what the header has."""
    from qmpigen.mpi.model import Enumeration

    return Enumeration(enumeration.facts, tuple(f for f in enumeration if not f.name.endswith("_c")))


def test_user_groups_nest_and_every_function_is_in_all(mpich):
    text = "tool t; group a = MPI_Send, MPI_Recv; group b = a, MPI_Bcast except MPI_Recv; intercept b;"
    assert wrapped(text, mpich) == ["MPI_Bcast", "MPI_Send"]
    assert len(wrapped("tool t; intercept all;", mpich)) == len(mpich)


def test_every_built_in_group_is_well_formed():
    from qmpigen.mpi.groups import BY_NAME, GROUPS

    assert len(BY_NAME) == len(GROUPS)
    for group in GROUPS:
        assert group.name == group.name.lower() and " " not in group.name
        assert group.include or group.categories or group.kinds or group.roles


@pytest.mark.parametrize(
    "text, message",
    [
        (
            "tool t;\nintercept MPI_Sendd;",
            "t.qmpi:2:11: unknown MPI function MPI_Sendd; did you mean MPI_Send or MPI_Send_c or MPI_Isend?",
        ),
        (
            "tool t;\nintercept MPI_Fnord;",
            "t.qmpi:2:11: unknown MPI function MPI_Fnord (MPICH 9.9.9 (MPI 4.1) declares no such function)",
        ),
        ("tool t; intercept MPI_Foo_*;", "t.qmpi:1:19: 'MPI_Foo_*' matches no function of MPICH 9.9.9 (MPI 4.1)"),
        ("tool t; intercept colectives;", "t.qmpi:1:19: unknown group 'colectives'; did you mean collectives?"),
        (
            "tool t; intercept one-sided;",
            "t.qmpi:1:19: group 'one-sided' (remote memory access: windows, put/get/accumulate, synchronisation) "
            "matches no function of MPICH 9.9.9 (MPI 4.1)",
        ),
        (
            "tool t; intercept MPI_Send;\nintercept point-to-point;",
            "t.qmpi:2:11: MPI_Send is already intercepted ('MPI_Send' at t.qmpi:1:19)",
        ),
        (
            "tool t; intercept point-to-point, MPI_Send;",
            "t.qmpi:1:35: MPI_Send is listed twice: 'point-to-point' at t.qmpi:1:19 already selects it",
        ),
        (
            "tool t; intercept collectives except MPI_Send;",
            "t.qmpi:1:38: 'MPI_Send' excludes nothing: it matches none of the functions of 'collectives'",
        ),
        (
            "tool t; intercept PMPI_Send;",
            "t.qmpi:1:19: intercept MPI_Send, not PMPI_Send: the core calls PMPI_Send at the end of the chain",
        ),
        ("tool t; group a = b; group b = a; intercept MPI_Send;", "t.qmpi:1:32: group 'a' refers to itself"),
        (
            "tool t; group unused = MPI_Nope; intercept MPI_Send;",
            "t.qmpi:1:24: unknown MPI function MPI_Nope (MPICH 9.9.9 (MPI 4.1) declares no such function)",
        ),
        ("tool t;", "t.qmpi:1:1: the tool intercepts no function: add an intercept statement"),
    ],
)
def test_selection_errors(mpich, text, message):
    assert error_of(text, mpich) == message


def test_functions_this_mpi_lacks_are_named_as_such(ompi, ompi_api):
    assert error_of("tool t; intercept MPI_Send_c;", ompi, ompi_api) == (
        "t.qmpi:1:19: Open MPI 5.0.11 (MPI 3.1) lacks MPI_Send_c: its mpi.h does not declare it "
        "(it declares no large-count _c functions)"
    )
    assert error_of("tool t;\n  intercept MPI_Session_init;", ompi, ompi_api) == (
        "t.qmpi:2:13: Open MPI 5.0.11 (MPI 3.1) lacks MPI_Session_init: its mpi.h does not declare it"
    )
    assert error_of("tool t; intercept MPI_Isend_c, MPI_Send;", ompi, ompi_api).startswith(
        "t.qmpi:1:19: Open MPI 5.0.11 (MPI 3.1) lacks MPI_Isend_c"
    )
    message = error_of("tool t; intercept MPI_Send_*;", ompi, ompi_api)
    assert message.startswith(
        "t.qmpi:1:19: 'MPI_Send_*' matches no function of Open MPI 5.0.11 (MPI 3.1): this MPI lacks MPI_Send_c"
    )
    assert error_of("tool t; intercept sessions;", ompi, ompi_api).startswith(
        "t.qmpi:1:19: group 'sessions' (the MPI 4.0 sessions model) matches no function of Open MPI 5.0.11 (MPI 3.1)"
    )


def test_functions_outside_the_enumeration_say_why(mpich_api):
    enumeration = enumerate_functions(mpich_api)
    assert error_of("tool t; intercept MPI_Type_get_value_index;", enumeration, mpich_api) == (
        "t.qmpi:1:19: MPICH 9.9.9 (MPI 4.1) declares MPI_Type_get_value_index without a PMPI_ twin: "
        "QMPI cannot intercept it"
    )
    assert error_of("tool t; intercept MPIX_Comm_revoke;", enumeration, mpich_api) == (
        "t.qmpi:1:19: MPIX_Comm_revoke is an MPIX_ extension, which the enumeration leaves out: "
        "add --mpix (to the core too)"
    )
    assert error_of("tool t; intercept MPIX_*;", enumeration, mpich_api) == (
        "t.qmpi:1:19: 'MPIX_*' matches only MPIX_ functions, which the enumeration leaves out (add --mpix)"
    )
    with_mpix = enumerate_functions(mpich_api, Selection(mpix=True))
    assert wrapped("tool t; intercept MPIX_Comm_revoke;", with_mpix, mpich_api) == ["MPIX_Comm_revoke"]
    narrowed = enumerate_functions(mpich_api, Selection(exclude=("MPI_Bcast",)))
    assert error_of("tool t; intercept MPI_Bcast;", narrowed, mpich_api) == (
        "t.qmpi:1:19: MPI_Bcast is left out of this enumeration by --include/--exclude (build the core the same way)"
    )


# -- wrappers --------------------------------------------------------------------------------


def test_wrapper_modes_symbols_and_code(mpich):
    tool = tool_of(
        "tool t prefix T;\n"
        "context { int n; }\n"
        'intercept MPI_Send, MPI_Wtime { before %{ $ctx->n++; %} after %{ use($ret, "$name", $index, $args); %} }\n'
        "intercept MPI_Recv { call exec_func; }\n"
        "intercept MPI_Barrier { instead %{ $ret = 0; %} }\n"
        "intercept MPI_Pcontrol;\n",
        mpich,
    )
    by_name = {w.function.name: w for w in tool.wrappers}
    assert [w.function.name for w in tool.wrappers] == [
        "MPI_Barrier",
        "MPI_Pcontrol",
        "MPI_Recv",
        "MPI_Send",
        "MPI_Wtime",
    ]
    assert {n: w.mode for n, w in by_name.items()} == {
        "MPI_Barrier": "instead",
        "MPI_Pcontrol": "fan_out",
        "MPI_Recv": "exec_func",
        "MPI_Send": "typed",
        "MPI_Wtime": "typed",
    }
    send = by_name["MPI_Send"]
    assert send.symbol == "T_Send" and send.uses_ctx and not send.implicit
    assert [b.text for b in send.before] == ["qmpi_ctx->n++;"]
    assert [b.text for b in send.after] == [
        'use(qmpi_ret, "MPI_Send", _MPI_Send, buf, count, datatype, dest, tag, comm);'
    ]
    assert [b.text for b in by_name["MPI_Wtime"].after] == ['use(qmpi_ret, "MPI_Wtime", _MPI_Wtime, );']
    assert not by_name["MPI_Recv"].uses_ctx
    assert by_name["MPI_Barrier"].instead.text == "qmpi_ret = 0;"
    assert tool.fields[0].name == "n" and tool.has_context and not tool.has_hooks


def test_each_runs_per_argument_of_the_type(mpich):
    tool = tool_of(
        "tool t;\n"
        "intercept MPI_Intercomm_merge, MPI_Send, MPI_Waitall {\n"
        '    before each MPI_Comm %{ f($arg, "$argtype", $pos); %}\n'
        "    after each MPI_Comm * %{ g(*$arg, $ret); %}\n"
        "    before each MPI_Request[] %{ h($arg); %}\n"
        "}\n",
        mpich,
    )
    by_name = {w.function.name: w for w in tool.wrappers}
    assert [b.text for b in by_name["MPI_Intercomm_merge"].before] == ['f(intercomm, "MPI_Comm", 0);']
    assert [b.text for b in by_name["MPI_Intercomm_merge"].after] == ["g(*newintracomm, qmpi_ret);"]
    assert [b.text for b in by_name["MPI_Send"].before] == ['f(comm, "MPI_Comm", 5);']
    assert [b.text for b in by_name["MPI_Waitall"].before] == ["h(array_of_requests);"]
    assert all(b.scoped for w in tool.wrappers for b in w.before + w.after)


def test_plain_and_each_blocks_run_in_the_order_written(mpich):
    tool = tool_of(
        "tool t;\n"
        "intercept MPI_Send {\n"
        "    before %{ first(); %}\n"
        "    before each MPI_Comm %{ second($arg); %}\n"
        "    before %{ third(); %}\n"
        "    after %{ fourth(); %}\n"
        "    after role count %{ fifth($arg); %}\n"
        "    after %{ sixth(); %}\n"
        "}\n",
        mpich,
    )
    send = {w.function.name: w for w in tool.wrappers}["MPI_Send"]
    assert [(b.text, b.scoped) for b in send.before] == [
        ("first();", False),
        ("second(comm);", True),
        ("third();", False),
    ]
    assert [(b.text, b.scoped) for b in send.after] == [
        ("fourth();", False),
        ("fifth(count);", True),
        ("sixth();", False),
    ]


def test_code_blocks_are_dedented_and_keep_their_spec_line(mpich):
    tool = tool_of(
        "tool t;\n"
        "intercept MPI_Send {\n"
        "    after %{\n"
        "\n"
        "        if ($ret)\n"
        "            fail();\n"
        "    %}\n"
        "    before %{ a();\n"
        "              b(); %}\n"
        "}\n",
        mpich,
    )
    (send,) = tool.wrappers
    assert (send.after[0].text, send.after[0].line) == ("if (qmpi_ret)\n    fail();", 5)
    assert (send.before[0].text, send.before[0].line) == ("a();\nb();", 8)


def test_hooks_intercept_the_lifecycle_functions(mpich, ompi):
    tool = tool_of("tool t; intercept MPI_Send; on init %{ x(); %} on finalize %{ y($ctx); %}", mpich)
    stages = {w.function.name: (w.lifecycle, w.implicit, w.uses_ctx) for w in tool.wrappers}
    assert stages == {
        "MPI_Finalize": ("finalize", True, True),
        "MPI_Init": ("world_init", True, True),
        "MPI_Init_thread": ("world_init", True, True),
        "MPI_Send": (None, False, False),
        "MPI_Session_finalize": ("session_finalize", True, True),
        "MPI_Session_init": ("session_init", True, True),
    }
    assert tool.has_context and tool.has_hooks and tool.fields == ()
    assert tool.on_finalize.text == "y(qmpi_ctx);"
    # Open MPI 3.1-like: no sessions, so only the world model's functions.
    names = [w.function.name for w in tool_of("tool t; on init %{ %}", ompi).wrappers]
    assert names == ["MPI_Finalize", "MPI_Init", "MPI_Init_thread"]


def test_rank_needs_the_lifecycle_functions_like_the_hooks(mpich, ompi):
    """$rank is recorded at init, so using it anywhere intercepts the init functions
    (and gives the tool a context) even without on init / on finalize."""
    tool = tool_of('tool t; intercept MPI_Send { before %{ log($rank, "$$rank"); %} }', mpich)
    stages = {w.function.name: w.lifecycle for w in tool.wrappers}
    assert stages["MPI_Init"] == "world_init" and stages["MPI_Session_init"] == "session_init"
    (send,) = [w for w in tool.wrappers if w.function.name == "MPI_Send"]
    assert send.before[0].text == 'log(qmpi_ctx->qmpi_rank, "$rank");' and send.uses_ctx
    assert tool.has_context and tool.has_hooks
    # Without MPI_Group_from_session_pset (these headers) sessions leave $rank at -1.
    assert not tool.session_rank
    assert not tool_of('tool t; intercept MPI_Send { before %{ f("$$rank"); %} }', ompi).has_hooks


def test_pcontrol_handler(mpich):
    tool = tool_of('tool t; on pcontrol %{ set($0, $va, "$name"); %}', mpich)
    (pcontrol,) = tool.wrappers
    assert pcontrol.mode == "fan_out" and pcontrol.instead.text == 'set(level, qmpi_args, "MPI_Pcontrol");'
    # all + a handler: the handler is the Pcontrol wrapper's body, the rule's code around it.
    tool = tool_of("tool t; intercept all { before %{ b(); %} } on pcontrol %{ h(); %}", mpich)
    pcontrol = next(w for w in tool.wrappers if w.function.name == "MPI_Pcontrol")
    assert [b.text for b in pcontrol.before] == ["b();"] and pcontrol.instead.text == "h();"


@pytest.mark.parametrize(
    "text, message",
    [
        (
            "tool t; intercept MPI_Barrier { before %{ f($3); %} }",
            "t.qmpi:1:45: $3: MPI_Barrier has 1 argument ($0..$0)",
        ),
        ("tool t; intercept MPI_Wtime { before %{ f($0); %} }", "t.qmpi:1:43: $0: MPI_Wtime has 0 arguments ($0..$0)"),
        ("tool t; intercept MPI_Send { before %{ f($va); %} }", "t.qmpi:1:42: $va: MPI_Send is not variadic"),
        (
            "tool t; intercept MPI_Send { before %{ $ctx->n++; %} }",
            "t.qmpi:1:40: $ctx needs per-instance state: declare a context { ... } block with at least one field",
        ),
        (
            "tool t; intercept MPI_Send, MPI_Recv { before each MPI_Win %{ f($arg); %} }",
            "t.qmpi:1:52: no function of this intercept has an argument of type 'MPI_Win' on MPICH 9.9.9 (MPI 4.1) "
            "(types are written as in mpi.h, e.g. 'MPI_Comm', 'MPI_Request *', 'const int []')",
        ),
        (
            "tool t; intercept MPI_Pcontrol { instead %{ %} }\non pcontrol %{ %}",
            "t.qmpi:2:15: MPI_Pcontrol has both an 'on pcontrol' handler and an instead block (at t.qmpi:1:44)",
        ),
    ],
)
def test_code_errors_against_the_enumeration(mpich, text, message):
    assert error_of(text, mpich) == message


def test_resolution_is_deterministic(mpich):
    text = "tool t; context { int n; } intercept all except io { before %{ $ctx->n += $nargs; %} } on init %{ %}"
    assert tool_of(text, mpich) == tool_of(text, mpich)


def _traced_lines(action) -> int:
    """Line events in qmpigen's own code while `action` runs: a deterministic measure
    of its work (the parser library's share is linear and would hide ours)."""
    import sys

    count = 0

    def tracer(frame, event, arg):
        nonlocal count
        if "qmpigen" not in frame.f_code.co_filename:
            return None
        if event == "line":
            count += 1
        return tracer

    sys.settrace(tracer)
    try:
        action()
    finally:
        sys.settrace(None)
    return count


@pytest.mark.slow  # seconds: `make test`, not `make test-fast`
def test_spec_work_grows_linearly_with_groups(mpich):
    # Review finding: 25,000 `group` lines took 13 s, 50,000 took 85 s (a duplicate
    # check over all earlier groups, an order table rebuilt per group). Work, counted
    # in line events rather than seconds, must double when the groups double.
    def spec_with(n):
        lines = ["tool many prefix M;"] + [f"group g{k} = MPI_Send, MPI_Recv;" for k in range(n)]
        return "\n".join(lines + ["intercept g0 { }"])

    # 150 and 600 groups tell them apart (an O(n^2) scan of earlier groups gives 10.6)
    # in half the time 300 and 1200 take.
    small, large = (_traced_lines(lambda n=n: tool_of(spec_with(n), mpich)) for n in (150, 600))
    assert large / small < 4.6  # 4x the groups: linear gives ~4, quadratic ~10 or more


@pytest.mark.parametrize("which", ["mpich", "ompi", "tools_header"])
def test_the_requests_group_is_every_function_that_hands_out_a_request(which, request):
    """By role, not by name: the functions outside the completion group with an
    MPI_Request * parameter, whatever they are called (MPI_Comm_idup, MPI_Grequest_start).
    tools_mpi.h has MPI_Test, whose request has the role too: the group leaves the
    completion functions out by name."""
    enumeration = request.getfixturevalue(which)
    completion = set(wrapped("tool t; intercept completion;", enumeration))
    handing_out = sorted(
        f.name
        for f in enumeration
        if f.name not in completion and any(p.type.replace(" ", "") == "MPI_Request*" for p in f.params)
    )
    assert wrapped("tool t; intercept requests;", enumeration) == handing_out
    assert {"MPI_Isend", "MPI_Ibarrier"} & set(handing_out) and completion & {"MPI_Waitall", "MPI_Test"}
