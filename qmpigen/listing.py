"""What the CLI prints about an MPI: the manifest, the -d dump, the line naming the MPI
that was read, and the built-in function groups. Text only: no I/O here."""

from __future__ import annotations

import os
import shutil
from typing import List, Sequence

from .errors import QmpigenError
from .groups import BY_NAME, GROUPS, Group
from .header import PreprocessedHeader
from .model import Enumeration, MpiApi


def source_line(source: PreprocessedHeader, enumeration: Enumeration) -> str:
    """Which MPI was read, and from where: with several MPIs installed (environment
    modules), the first mpicc on PATH is not always the one meant."""
    driver = shutil.which(source.driver[0]) or source.driver[0]
    command = " ".join([os.path.abspath(driver), *source.driver[1:]])
    return (
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
