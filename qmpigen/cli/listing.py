"""What the CLI prints about an MPI: the manifest, the -d dump, the line naming the MPI
that was read, and the built-in function groups. Text only: no I/O here."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Dict, List, Optional, Sequence, Set

from qmpigen.errors import QmpigenError
from qmpigen.escape import printable
from qmpigen.mpi.groups import BY_NAME, GROUPS, Group
from qmpigen.mpi.header import PreprocessedHeader
from qmpigen.mpi.model import Enumeration, MpiApi
from qmpigen.mpi.roles import roles_of

if TYPE_CHECKING:
    from qmpigen.mpi.fortran import FortranEntry, FortranPlan


def source_line(source: PreprocessedHeader, enumeration: Enumeration) -> str:
    """Which MPI was read, and from where: with several MPIs installed (environment
    modules), the first mpicc on PATH is not always the one meant. One line for a terminal
    (the version text comes from mpi.h, the paths from the file system)."""
    command = " ".join(source.driver_found)
    return printable(
        f"qmpigen: read {enumeration.facts.title} from {source.header_path} (driver {command}): "
        f"{len(enumeration)} functions, enumeration {enumeration.hash}"
    )


def manifest(enumeration: Enumeration) -> dict:
    return {
        "mpi": dict(enumeration.facts.as_dict(), count=len(enumeration), enumeration=enumeration.hash),
        "functions": [
            {
                "index": index,
                "name": f.name,
                "enum": f.enum,
                "forum_enum": f.forum_enum,
                "return_type": f.return_type,
                "signature": f.signature,
                "params": [
                    {
                        "name": p.name,
                        "type": p.type,
                        "declaration": p.declaration,
                        "pointer": p.is_pointer,
                        "array": p.is_array,
                        "const": p.is_const,
                        "function_pointer": p.is_function_pointer,
                    }
                    for p in f.params
                ],
                "variadic": f.variadic,
                "categories": list(f.categories),
            }
            for index, f in enumerate(enumeration)
        ],
    }


def dump_api(api: MpiApi) -> str:
    facts = api.facts
    lines = [
        f"header: {facts.implementation} {facts.version}, MPI {facts.mpi_version}.{facts.mpi_subversion}, "
        f"declares QMPI: {'yes' if facts.declares_qmpi else 'no'}, "
        f"forum enum members: {len(facts.forum_enum)}",
        f"functions declared (MPI_/MPIX_): {len(api)}",
    ]
    for f in api:
        flags = [k for k, v in (("pmpi", f.has_pmpi), ("macro", f.is_macro), ("variadic", f.variadic)) if v]
        lines.append(f"{f.location}: {f.signature}")
        lines.append(f"    flags: {' '.join(flags) or '-'}; categories: {' '.join(f.categories) or '-'}")
        for p in f.params:
            traits = [
                k
                for k, v in (
                    ("pointer", p.is_pointer),
                    ("array", p.is_array),
                    ("const", p.is_const),
                    ("function-pointer", p.is_function_pointer),
                )
                if v
            ]
            promoted = f", promoted to {p.promoted_type}" if p.promoted_type else ""
            lines.append(
                f"    {p.name}: type '{p.type}', passed as '{p.va_type}', base '{p.base_type}'"
                f"{', ' + ' '.join(traits) if traits else ''}{promoted}"
            )
    return "\n".join(lines) + "\n"


# -- built-in groups -----------------------------------------------------------------------


def group_members(group: Group, enumeration: Enumeration) -> List[str]:
    return [f.name for f in enumeration if group.matches(f)]


def groups_table(enumeration: Enumeration) -> str:
    """Every built-in group with its number of members in this enumeration."""
    width = max(len(g.name) for g in GROUPS)
    lines = [f"# {enumeration.facts.title}: {len(GROUPS)} groups; 'qmpigen groups NAME' lists the members"]
    for group in GROUPS:
        lines.append(f"{group.name:<{width}}  {len(group_members(group, enumeration)):4d}  {group.description}")
    return "\n".join(lines) + "\n"


def named_groups(names: Sequence[str]) -> List[Group]:
    unknown = [n for n in names if n not in BY_NAME]
    if unknown:
        raise QmpigenError(f"no built-in group named '{unknown[0]}' (groups: {', '.join(g.name for g in GROUPS)})")
    return [BY_NAME[n] for n in names]


def groups_listing(names: Sequence[str], enumeration: Enumeration) -> str:
    """The members of the named groups, one per line, under a heading per group."""
    lines: List[str] = []
    for group in named_groups(names):
        members = group_members(group, enumeration)
        lines.append(f"# {group.name}: {len(members)} functions of {enumeration.facts.title}: {group.description}")
        lines.extend(members)
    return "\n".join(lines) + "\n"


# -- Fortran entries -------------------------------------------------------------------------


def fortran_line(plan: Optional[FortranPlan], request_mode: str) -> str:
    """build-core's line on stderr about the Fortran entries."""
    if plan is None:
        why = (
            "turned off (--fortran none)"
            if request_mode == "none"
            else "this MPI has no Fortran bindings qmpigen can use"
        )
        return f"qmpigen: Fortran entries: none, {why}"
    total, routed, seen = plan.f77_coverage()
    return (
        f"qmpigen: Fortran entries for {len(plan.defining)} of {len(plan.entries)} functions with Fortran routines "
        f"({', '.join(plan.libraries.libraries)}; {plan.libraries.compiler}): mpif.h/use mpi "
        f"{_share(routed, total)} through core entries, {_share(seen, total)} seen by tools"
    )


def _share(part: int, whole: int) -> str:
    return f"{part}/{whole} ({100.0 * part / whole:.1f} %)" if whole else "0/0"


def fortran_routes(plan: FortranPlan, entry: FortranEntry) -> Dict[str, Any]:
    """One function's Fortran routes: per entry family, through the chain or not, and why."""
    if entry.routed:
        f77 = "chain" if entry.f77_names else None
    else:
        f77 = ("binding reaches C" if plan.quirks.f77_reaches_c else "bypasses the chain") if entry.f77_names else None
    return {
        "f77": {"route": f77, "symbols": list(entry.f77_names)} if entry.f77_names else None,
        "f08": [{"symbol": name, "route": plan.f08_route(entry, name, defined)} for name, defined in entry.f08_names],
        "reason": entry.reason or None,
    }


def fortran_manifest(plan: Optional[FortranPlan]) -> Optional[dict]:
    if plan is None:
        return None
    total, routed, seen = plan.f77_coverage()
    f08_total, f08_routed, f08_seen = plan.f08_coverage()
    return {
        "libraries": list(plan.libraries.libraries),
        "compiler": plan.libraries.compiler,
        "coverage": {
            "f77": {"functions": total, "core_entries": routed, "seen_by_tools": seen},
            "f08": {"functions": f08_total, "core_entries": f08_routed, "seen_by_tools": f08_seen},
        },
        "functions": {e.function.name: fortran_routes(plan, e) for e in plan.entries},
    }


def fortran_listing(plan: FortranPlan, names: Optional[Set[str]] = None) -> str:
    """The text form: coverage, then every function with a Fortran routine."""
    total, routed, seen = plan.f77_coverage()
    f08_total, f08_routed, f08_seen = plan.f08_coverage()
    lines = [
        f"# Fortran ({', '.join(plan.libraries.libraries)}; {plan.libraries.compiler})",
        f"# mpif.h / use mpi: {_share(routed, total)} through core entries, {_share(seen, total)} seen by tools",
        f"# use mpi_f08: {_share(f08_routed, f08_total)} through core entries, {_share(f08_seen, f08_total)} seen by tools",
    ]
    width = max((len(e.function.name) for e in plan.entries), default=0)
    for entry in plan.entries:
        if names is not None and entry.function.name not in names:
            continue
        routes = fortran_routes(plan, entry)
        f77 = routes["f77"]["route"] if routes["f77"] else "-"
        f08 = ", ".join(f"{r['symbol']}: {r['route']}" for r in routes["f08"]) or "-"
        why = f"  # {entry.reason}" if entry.reason else ""
        lines.append(f"{entry.function.name:<{width}}  f77: {f77}; f08: {f08}{why}")
    return "\n".join(lines) + "\n"


def roles_listing(enumeration: Enumeration, names: Optional[Set[str]] = None) -> str:
    """Per function: its kind, then each parameter with a role as `name=role`."""
    lines = []
    width = max(len(f.name) for f in enumeration)
    for function in enumeration:
        if names is None or function.name in names:
            found = roles_of(function)
            params = " ".join(f"{p.name}={r}" for p, r in zip(function.params, found.params) if r)
            lines.append(f"{function.name:<{width}}  {found.kind:<16} {params}".rstrip())
    return "\n".join(lines) + "\n"
