"""Stage 2: preprocessed mpi.h -> MpiApi, with pycparser.

Every C type text in the model is printed by pycparser's CGenerator from the parsed
declaration, so arrays of arrays (`int ranges[][3]`), function-pointer typedefs and
const placement come out exactly as the MPI declares them.
"""

from __future__ import annotations

import dataclasses
from typing import Dict, Iterable, List, Optional, Tuple

from pycparser import c_ast, c_generator, c_parser

from qmpigen.errors import Location, QmpigenError
from qmpigen.mpi import quirks
from qmpigen.mpi.header import PreprocessedHeader, linemarker
from qmpigen.mpi.model import FORUM_TOOL_API, HeaderFacts, MpiApi, MpiFunction, Param

FUNCTION_PREFIXES = ("MPI_", "MPIX_")
FORUM_ENUM_NAME = "QMPI_Functions_enum"
FORUM_CONTEXT_TYPE = "QMPI_Context"
# The seed's (MPI Forum draft's) MPI_-named spellings of the callback interface.
SEED_TOOL_NAMES = frozenset(
    {
        "MPI_Context",
        "MPI_Tool_init_function",
        "MPI_Register_tool_name",
        "MPI_Register_tool_storage",
        "MPI_Register_tool_function",
        "MPI_Get_next_tool_function",
        "MPI_Get_tool_storage",
        "MPI_Get_calling_address",
        "MPI_Functions_enum",
    }
)

_generator = c_generator.CGenerator()


def parse_header(source: PreprocessedHeader) -> MpiApi:
    ast = _parse(source)
    typedefs: Dict[str, c_ast.Typedef] = {}
    decls: Dict[str, c_ast.Decl] = {}
    forum_enum: Tuple[Tuple[str, int], ...] = ()
    for node in ast.ext:
        if isinstance(node, c_ast.Typedef):
            typedefs.setdefault(node.name, node)
        elif isinstance(node, c_ast.Decl) and isinstance(node.type, c_ast.FuncDecl):
            decls.setdefault(node.name, node)
        enum = _find_enum(node, FORUM_ENUM_NAME)
        if enum is not None and not forum_enum:
            forum_enum = _enum_values(enum)

    macro_names = source.macro_names
    functions: List[MpiFunction] = []
    for name, decl in decls.items():
        if not name.startswith(FUNCTION_PREFIXES):
            continue
        functions.append(_function(name, decl, decls, macro_names, typedefs))

    declared = set(typedefs) | set(decls) | set(source.macro_names)
    if forum_enum:
        declared.add(FORUM_ENUM_NAME)
    tool_names = tuple(sorted(n for n in declared if n.startswith("QMPI_") or n in SEED_TOOL_NAMES))
    facts = _facts(source, declares_qmpi=FORUM_CONTEXT_TYPE in typedefs, forum_enum=forum_enum)
    letters = tuple(sorted({n[0] for n in declared if len(n) > 4 and n[1:5] == "MPI_" and n[0].isalpha()}))
    facts = dataclasses.replace(
        facts, tool_names=tool_names, tool_signatures=_tool_signatures(decls), mpi_name_letters=letters
    )
    return MpiApi(facts, tuple(functions))


def _parse(source: PreprocessedHeader) -> c_ast.FileAST:
    try:
        return c_parser.CParser().parse(source.text, source.header_path)
    except c_parser.ParseError as exc:
        raise QmpigenError(_parse_error_text(str(exc), source.text)) from None


def _parse_error_text(message: str, text: str) -> str:
    """'file:line:col: msg' from pycparser, plus the line in the preprocessed output."""
    parts = message.split(":", 3)
    if len(parts) == 4 and parts[1].strip().isdigit():
        file, line, col, msg = parts[0], int(parts[1]), parts[2].strip(), parts[3].strip()
        pre = preprocessed_line(text, file, line)
        where = f" (preprocessed output line {pre})" if pre else ""
        return f"{file}:{line}:{col}: cannot parse the MPI header{where}: {msg}"
    return f"cannot parse the MPI header: {message}"


def preprocessed_line(text: str, file: str, line: int) -> int:
    """The line of the preprocessed text that came from `file:line` (0 if not found)."""
    current_file, current_line = "", 0
    for number, raw in enumerate(text.splitlines(), start=1):
        marker = linemarker(raw)
        if marker:
            current_line, current_file = marker
            continue
        if current_file == file and current_line == line:
            return number
        current_line += 1
    return 0


# -- functions ---------------------------------------------------------------------


def _function(
    name: str,
    decl: c_ast.Decl,
    decls: Dict[str, c_ast.Decl],
    macro_names: Iterable[str],
    typedefs: Dict[str, c_ast.Typedef],
) -> MpiFunction:
    func: c_ast.FuncDecl = decl.type
    params: List[Param] = []
    variadic = False
    for index, node in enumerate(func.args.params if func.args else []):
        if isinstance(node, c_ast.EllipsisParam):
            variadic = True
            continue
        if _is_void(node):
            continue
        params.append(_param(node, index, typedefs))
    macros = set(macro_names)
    is_macro = name in macros
    categories = set(quirks.name_categories(name))
    if is_macro:
        categories.add("macro")
    location = Location(decl.coord.file, decl.coord.line, decl.coord.column or 0) if decl.coord else Location("")
    return MpiFunction(
        name=name,
        return_type=_type_text(func.type),
        params=tuple(params),
        variadic=variadic,
        has_pmpi=("P" + name) in decls or ("P" + name) in macros,
        is_macro=is_macro,
        categories=tuple(sorted(categories)),
        location=location,
        quirk=quirks.DISPATCH.get(name),
        pmpi_optional=name in quirks.OPTIONAL_PMPI,
    )


def _is_void(node: c_ast.Node) -> bool:
    """The `void` of an empty parameter list `f(void)`."""
    type_node = getattr(node, "type", None)
    return (
        isinstance(type_node, c_ast.TypeDecl)
        and isinstance(type_node.type, c_ast.IdentifierType)
        and type_node.type.names == ["void"]
        and getattr(node, "name", None) is None
    )


def _param(node: c_ast.Node, index: int, typedefs: Dict[str, c_ast.Typedef]) -> Param:
    name = getattr(node, "name", None) or f"arg{index}"
    declared = node.type
    decayed = _decay(declared, typedefs)
    innermost = _innermost(declared)
    base = _base_name(innermost)
    top_is_pointer = isinstance(decayed, c_ast.PtrDecl)
    pointee = declared.type if top_is_pointer else None
    is_const = isinstance(pointee, c_ast.TypeDecl) and "const" in (pointee.quals or [])
    promoted = None
    if not top_is_pointer:
        promoted = quirks.VARARG_PROMOTIONS.get(_resolve_scalar(base, typedefs))
    return Param(
        name=name,
        declaration=_decl_text(declared, name),
        type=_type_text(declared),
        va_type=_type_text(decayed),
        va_declaration=_decl_text(decayed, name),
        base_type=base,
        is_pointer=top_is_pointer,
        is_array=isinstance(declared, c_ast.ArrayDecl),
        is_const=is_const,
        is_function_pointer=_is_function_pointer(decayed, typedefs),
        promoted_type=promoted,
    )


def _innermost(node: c_ast.Node) -> c_ast.TypeDecl:
    while not isinstance(node, c_ast.TypeDecl):
        node = node.type
    return node


def _base_name(type_decl: c_ast.TypeDecl) -> str:
    inner = type_decl.type
    if isinstance(inner, c_ast.IdentifierType):
        return " ".join(inner.names)
    kind = type(inner).__name__.lower()  # struct / union / enum
    return f"{kind} {inner.name}" if getattr(inner, "name", None) else kind


def _decay(node: c_ast.Node, typedefs: Dict[str, c_ast.Typedef]) -> c_ast.Node:
    """Array and function parameters are passed as pointers (C11 6.7.6.3p7-8), also
    when the function type comes from a typedef (MPI_T_event_cb_function cb)."""
    if isinstance(node, c_ast.ArrayDecl):
        return c_ast.PtrDecl(list(node.dim_quals or []), node.type)
    if isinstance(node, c_ast.FuncDecl):
        return c_ast.PtrDecl([], node)
    if isinstance(node, c_ast.TypeDecl) and isinstance(_resolve(_base_name(node), typedefs), c_ast.FuncDecl):
        return c_ast.PtrDecl([], node)
    return node


def _printed(node: c_ast.Node, name: Optional[str], wrap) -> str:
    """Print `node` declaring `name` (None: abstract). The declname is swapped in
    place and restored, which is much cheaper than deep-copying every parameter."""
    inner = _innermost(node)
    saved = inner.declname
    inner.declname = name
    try:
        return _generator.visit(wrap(node)).strip()
    finally:
        inner.declname = saved


def _type_text(node: c_ast.Node) -> str:
    return _printed(node, None, lambda n: c_ast.Typename(None, [], None, n))


def _decl_text(node: c_ast.Node, name: str) -> str:
    return _printed(node, name, lambda n: c_ast.Decl(name, [], [], [], [], n, None, None))


def _resolve(name: str, typedefs: Dict[str, c_ast.Typedef]) -> Optional[c_ast.Node]:
    """Follow typedef names to the first type that is not just another name."""
    seen = set()
    node: Optional[c_ast.Node] = None
    while name in typedefs and name not in seen:
        seen.add(name)
        node = typedefs[name].type
        if isinstance(node, c_ast.TypeDecl) and isinstance(node.type, c_ast.IdentifierType):
            name = " ".join(node.type.names)
            continue
        break
    return node


def _resolve_scalar(name: str, typedefs: Dict[str, c_ast.Typedef]) -> str:
    node = _resolve(name, typedefs)
    if isinstance(node, c_ast.TypeDecl) and isinstance(node.type, c_ast.IdentifierType):
        return " ".join(node.type.names)
    return name


def _is_function_pointer(node: c_ast.Node, typedefs: Dict[str, c_ast.Typedef]) -> bool:
    if isinstance(node, c_ast.PtrDecl):
        target = node.type
        if isinstance(target, c_ast.FuncDecl):
            return True
        if isinstance(target, c_ast.TypeDecl):
            return isinstance(_resolve(_base_name(target), typedefs), c_ast.FuncDecl)
        return False
    if isinstance(node, c_ast.TypeDecl):
        resolved = _resolve(_base_name(node), typedefs)
        return isinstance(resolved, c_ast.PtrDecl) and isinstance(resolved.type, c_ast.FuncDecl)
    return False


# -- the forum enum and the header facts ------------------------------------------


def _tool_signatures(decls: Dict[str, c_ast.Decl]) -> Tuple[Tuple[str, str], ...]:
    """The callback interface's functions as this header declares them, with the
    parameter names of FORUM_TOOL_API (the core's definitions use those names)."""
    found = []
    for name, (names, _) in FORUM_TOOL_API.items():
        decl = decls.get(name)
        if decl is None:
            continue
        params = [p for p in (decl.type.args.params if decl.type.args else []) if not _is_void(p)]
        if len(params) != len(names):
            where = Location(decl.coord.file, decl.coord.line) if decl.coord else None
            raise QmpigenError(f"{name} has {len(params)} parameters here, the MPI Forum interface {len(names)}", where)
        found.append((name, ", ".join(_decl_text(p.type, n) for p, n in zip(params, names))))
    return tuple(found)


# -- the forum enum and the header facts ------------------------------------------


def _find_enum(node: c_ast.Node, name: str) -> Optional[c_ast.Enum]:
    """An `enum name {...}` definition at file scope, however it is declared."""
    while node is not None and not isinstance(node, c_ast.Enum):
        node = getattr(node, "type", None)
        if not isinstance(node, (c_ast.Node,)):
            return None
    if isinstance(node, c_ast.Enum) and node.name == name and node.values is not None:
        return node
    return None


def _enum_values(enum: c_ast.Enum) -> Tuple[Tuple[str, int], ...]:
    values = []
    nxt = 0
    for item in enum.values.enumerators:
        if item.value is not None:
            if not isinstance(item.value, c_ast.Constant):
                raise QmpigenError(
                    f"enum {enum.name}: value of {item.name} is not a plain integer constant",
                    Location(item.coord.file, item.coord.line) if item.coord else None,
                )
            nxt = int(item.value.value.rstrip("uUlL"), 0)
        values.append((item.name, nxt))
        nxt += 1
    return tuple(values)


def _facts(source: PreprocessedHeader, declares_qmpi: bool, forum_enum: Tuple[Tuple[str, int], ...]) -> HeaderFacts:
    macros = source.object_macros
    implementation, version = quirks.implementation(macros)
    identity = tuple(
        (macro, quirks.macro_number(macros, macro))
        for macro in quirks.IDENTITY_MACROS
        if macros.get(macro, "").strip("()").isdigit()
    )
    absent = tuple(markers[0] for _, markers in quirks.IMPLEMENTATION_MARKERS if markers[0] not in macros)
    return HeaderFacts(
        implementation=implementation,
        version=version,
        mpi_version=quirks.macro_number(macros, "MPI_VERSION"),
        mpi_subversion=quirks.macro_number(macros, "MPI_SUBVERSION"),
        declares_qmpi=declares_qmpi,
        forum_enum=forum_enum,
        identity=identity,
        absent_markers=absent,
    )
