"""Tool specs, stage 2: ToolSpec + the enumeration of one MPI -> Tool.

Selectors become functions (with a hint when they select nothing: qmpigen.mpi.groups),
every intercepted function gets its wrapper, and the `$` variables of the spec's code
are expanded for it (qmpigen.spec.variables). Every error carries the spec's file:line:col.
"""

from __future__ import annotations

import fnmatch
import textwrap
from dataclasses import replace
from typing import Any, Dict, List, Mapping, Optional, Set, Tuple

from qmpigen.errors import Location, QmpigenError
from qmpigen.mpi import groups as group_table
from qmpigen.mpi.model import Enumeration, Lifecycle, MpiApi, MpiFunction
from qmpigen.mpi.roles import roles_of
from qmpigen.output.cnames import C_NAMES
from qmpigen.spec.tool import CBlock, ContextField, Interface, Tool, ToolArgument, Wrapper
from qmpigen.spec.values import CONTEXT, CallMode, Code, EachCode, SelectionSpec, Selector, ToolSpec, normalise_type
from qmpigen.spec.variables import expand


def resolve(
    spec: ToolSpec, enumeration: Enumeration, api: Optional[MpiApi] = None, interface: Interface = Interface.THESIS
) -> Tool:
    """Check the spec against the enumeration and work out every wrapper, for the
    thesis interface (TOOLS=) or the callback interface (QMPI_TOOL_LIST=)."""
    return Resolver(spec, enumeration, api, Interface(interface)).tool()


class Selection:
    """Selectors to function names, in enumeration order; user groups resolved once."""

    def __init__(self, spec: ToolSpec, enumeration: Enumeration, api: Optional[MpiApi]):
        self.enumeration = enumeration
        self.api = api
        self.names = enumeration.names
        self.order = {n: i for i, n in enumerate(self.names)}  # built once: select() runs per group
        self.user_groups = {g.name: g for g in spec.groups}
        self.group_cache: Dict[str, Tuple[str, ...]] = {}
        self.resolving: List[str] = []

    def select(self, selection: SelectionSpec) -> Tuple[Tuple[str, Selector], ...]:
        """(function name, selector that brought it) in enumeration order, exclusions applied."""
        chosen: Dict[str, Selector] = {}
        for selector in selection.include:
            for name in self.match(selector):
                if name in chosen and selector.is_function:
                    first = chosen[name]
                    raise QmpigenError(
                        f"{name} is listed twice: '{first.text}' at {first.location} already selects it",
                        selector.location,
                    )
                chosen.setdefault(name, selector)
        for selector in selection.exclude:
            dropped = [n for n in self.match(selector) if n in chosen]
            if not dropped:
                kept = ", ".join(s.text for s in selection.include)
                raise QmpigenError(
                    f"'{selector.text}' excludes nothing: it matches none of the functions of '{kept}'",
                    selector.location,
                )
            for name in dropped:
                del chosen[name]
        return tuple(sorted(chosen.items(), key=lambda item: self.order[item[0]]))

    def match(self, selector: Selector) -> Tuple[str, ...]:
        text = selector.text
        if selector.is_glob:
            found = tuple(fnmatch.filter(self.names, text))
            if not found:
                raise QmpigenError(group_table.glob_miss(text, self.enumeration, self.api), selector.location)
            return found
        if selector.is_function:
            if self.enumeration.get(text) is not None:
                return (text,)
            raise QmpigenError(group_table.function_miss(text, self.enumeration, self.api), selector.location)
        return self.group(selector)

    def group(self, selector: Selector) -> Tuple[str, ...]:
        name = selector.text
        if name in self.group_cache:
            return self.group_cache[name]
        if name in self.user_groups:
            if name in self.resolving:
                raise QmpigenError(f"group '{name}' refers to itself", selector.location)
            self.resolving.append(name)
            try:
                found = tuple(n for n, _ in self.select(self.user_groups[name].selection))
            finally:
                self.resolving.pop()
        elif name in group_table.BY_NAME:
            definition = group_table.BY_NAME[name]
            found = tuple(f.name for f in self.enumeration if definition.matches(f))
            if not found:
                raise QmpigenError(group_table.empty_group(definition, self.enumeration), selector.location)
        else:
            raise QmpigenError(group_table.unknown_group(name, self.user_groups), selector.location)
        self.group_cache[name] = found
        return found


class Resolver:
    def __init__(self, spec: ToolSpec, enumeration: Enumeration, api: Optional[MpiApi], interface: Interface):
        self.spec = spec
        self.enumeration = enumeration
        self.interface = interface
        self.selection = Selection(spec, enumeration, api)
        # Callback tools register by the MPI's enum QMPI_Functions_enum: only its members.
        self.registrable = {enumeration.functions[i].name for _, _, i in enumeration.forum_members() if i >= 0}
        # $rank is recorded when MPI is initialised, so it needs the lifecycle wrappers too.
        self.has_hooks = spec.on_init is not None or spec.on_finalize is not None or spec.uses("rank")
        self.has_context = spec.has_context and bool(spec.fields) or self.has_hooks

    @property
    def mpi(self) -> str:
        return self.enumeration.facts.title

    # -- the tool ----------------------------------------------------------------
    def tool(self) -> Tool:
        spec = self.spec
        for decl in spec.groups:  # every user group is checked, used or not
            self.selection.group(Selector(decl.name, decl.location))
        rule_of = self.rules_by_function()
        lifecycle = self.lifecycle() if self.has_hooks else {}
        self.check_pcontrol(rule_of)

        wrappers = []
        used_types: Dict[int, Set[str]] = {}
        for function in self.enumeration:
            rule_index = rule_of.get(function.name)
            handler = spec.on_pcontrol if function.is_fan_out else None
            stage = lifecycle.get(function.name)
            if rule_index is None and handler is None and stage is None:
                continue
            wrappers.append(self.wrapper(function, rule_index, handler, stage, used_types))

        for index, rule in enumerate(spec.rules):
            for each in rule.before_each + rule.after_each:
                if (each.role or each.type) not in used_types.get(index, set()):
                    hint = (
                        "(docs/spec-language.md lists which functions have which roles)"
                        if each.role
                        else "(types are written as in mpi.h, e.g. 'MPI_Comm', 'MPI_Request *', 'const int []')"
                    )
                    raise QmpigenError(
                        f"no function of this intercept has {each.what} on {self.mpi} {hint}", each.location
                    )
        if not wrappers:
            raise QmpigenError("the tool intercepts no function: add an intercept statement", spec.location)

        preamble: List[Any] = []  # CBlocks and the CONTEXT marker, in spec order
        for item in spec.preamble:
            if item is CONTEXT:
                if self.has_context:
                    preamble.append(CONTEXT)
            elif isinstance(item, Code):
                block = self.block(item, self.common_vars())
                if block.text:
                    preamble.append(block)
        if self.has_context and CONTEXT not in preamble:
            preamble.append(CONTEXT)
        return Tool(
            name=spec.name,
            prefix=spec.prefix,
            spec_file=_base_name(spec.file),
            core=spec.core,
            fields=tuple(ContextField(f.declaration, f.name, f.initializer) for f in spec.fields),
            has_context=self.has_context,
            has_hooks=self.has_hooks,
            preamble=tuple(preamble),
            on_init=self.block(spec.on_init, self.hook_vars()) if spec.on_init else None,
            on_finalize=self.block(spec.on_finalize, self.hook_vars()) if spec.on_finalize else None,
            wrappers=tuple(wrappers),
            interface=self.interface,
            session_rank=self.enumeration.get("MPI_Group_from_session_pset") is not None,
            arguments=tuple(ToolArgument(a.name, a.default, a.is_integer) for a in spec.arguments),
        )

    def rules_by_function(self) -> Dict[str, int]:
        """Function name -> index of the intercept statement that selects it."""
        rule_of: Dict[str, Tuple[int, Selector]] = {}
        for index, rule in enumerate(self.spec.rules):
            for name, selector in self.selection.select(rule.selection):
                if name in rule_of:
                    _, first = rule_of[name]
                    raise QmpigenError(
                        f"{name} is already intercepted ('{first.text}' at {first.location})", selector.location
                    )
                rule_of[name] = (index, selector)
        if self.interface is Interface.CALLBACK:
            for name in [n for n in rule_of if n not in self.registrable]:
                _, selector = rule_of.pop(name)
                if selector.is_function:
                    raise QmpigenError(
                        f"{name} cannot be intercepted by a callback tool: {self.mpi} has no "
                        f"{getattr(self.enumeration.get(name), 'forum_enum', name)} in its enum QMPI_Functions_enum",
                        selector.location,
                    )
            for index, rule in enumerate(self.spec.rules):
                if rule.call is CallMode.EXEC_FUNC and any(i == index for i, _ in rule_of.values()):
                    raise QmpigenError(
                        "'call exec_func' is the thesis interface's call; a callback tool calls its cached next "
                        "function (drop it, or generate with --interface thesis)",
                        rule.location,
                    )
        return {name: index for name, (index, _) in rule_of.items()}

    def check_pcontrol(self, rule_of: Mapping[str, int]) -> None:
        handler = self.spec.on_pcontrol
        if handler is None:
            return
        fan_out = [f for f in self.enumeration if f.is_fan_out]
        if not fan_out:
            raise QmpigenError(f"{self.mpi} has no MPI_Pcontrol in the enumeration", handler.location)
        for function in fan_out:
            rule = self.spec.rules[rule_of[function.name]] if function.name in rule_of else None
            if rule is not None and rule.instead is not None:
                raise QmpigenError(
                    f"{function.name} has both an 'on pcontrol' handler and an instead block (at {rule.instead.location})",
                    handler.location,
                )

    def lifecycle(self) -> Dict[str, Lifecycle]:
        """The functions the tool intercepts for its init/finalize bookkeeping."""
        stages = {f.name: f.lifecycle for f in self.enumeration if f.lifecycle is not None}
        if not any(stage.starts for stage in stages.values()):
            raise QmpigenError(
                f"on init/on finalize/$rank need MPI_Init or MPI_Session_init in the enumeration of {self.mpi}",
                (self.spec.on_init or self.spec.on_finalize or self.spec).location,
            )
        return stages

    def wrapper(
        self,
        function: MpiFunction,
        rule_index: Optional[int],
        handler: Optional[Code],
        stage: Optional[Lifecycle],
        used_types: Dict[int, Set[str]],
    ) -> Wrapper:
        rule = self.spec.rules[rule_index] if rule_index is not None else None
        if function.is_fan_out:
            mode = CallMode.FAN_OUT
        elif rule is not None and rule.instead is not None:
            mode = CallMode.INSTEAD
        elif rule is not None:
            mode = rule.call
        else:
            mode = CallMode.TYPED
        variables = self.function_vars(function)
        roles = roles_of(function)
        before: List[CBlock] = []
        after: List[CBlock] = []
        instead = None
        if rule is not None and rule_index is not None:
            # plain and `each`/`role` blocks run in the order written
            for plain, each_blocks, target in (
                (rule.before, rule.before_each, before),
                (rule.after, rule.after_each, after),
            ):
                placed: List[Tuple[Tuple[int, int], CBlock]] = [
                    (_position(c.location), self.block(c, variables, function)) for c in plain
                ]
                for each in each_blocks:
                    placed += [
                        (_position(each.code.location), block)
                        for block in self.each_blocks(each, function, roles, variables, rule_index, used_types)
                    ]
                target += [block for _, block in sorted(placed, key=lambda item: item[0]) if block.text]
            if rule.instead is not None:
                instead = self.block(rule.instead, variables, function)
        if handler is not None:
            instead = self.block(handler, variables, function)
        blocks = before + after + ([instead] if instead else [])
        return Wrapper(
            function=function,
            symbol=f"{self.spec.prefix}_{function.short}",
            mode=mode,
            before=tuple(before),
            after=tuple(after),
            instead=instead,
            uses_ctx=stage is not None or any(b.uses_context for b in blocks),
            lifecycle=stage,
            implicit=rule is None and handler is None,
        )

    def each_blocks(self, each: EachCode, function: MpiFunction, roles, variables, rule_index: int, used_types):
        """An `each TYPE` or `role ROLE` block once per matching parameter, each in its own scope."""
        for position, (param, role) in enumerate(zip(function.params, roles.params)):
            if role != each.role if each.role else normalise_type(param.type) != each.type:
                continue
            used_types.setdefault(rule_index, set()).add(each.role or each.type)
            arg_vars = dict(variables, arg=param.name, argtype=param.type, pos=str(position))
            yield replace(self.block(each.code, arg_vars, function), scoped=True)

    # -- variables -----------------------------------------------------------------
    def common_vars(self) -> Dict[str, str]:
        return {"tool": self.spec.name, "prefix": self.spec.prefix, "context": f"struct {self.spec.name}_context"}

    def hook_vars(self) -> Dict[str, str]:
        variables = dict(self.common_vars(), ctx=C_NAMES.ctx, level=C_NAMES.level, rank=C_NAMES.ctx_rank)
        if self.interface is Interface.THESIS:
            variables["v"] = C_NAMES.chain  # the thesis chain; callback tools have none
        instance = f"{C_NAMES.level}, {C_NAMES.chain}" if self.interface is Interface.THESIS else C_NAMES.level
        for argument in self.spec.arguments:  # $argument(NAME): the helper the tool template defines
            variables[f"argument({argument.name})"] = f"{self.spec.name}_argument_{argument.name}({instance})"
        return variables

    def function_vars(self, function: MpiFunction) -> Dict[str, str]:
        variables = dict(
            self.hook_vars(),
            name=function.name,
            short=function.short,
            index=function.enum,
            rtype=function.return_type,
            args=function.args,
            nargs=str(len(function.params)),
            ret=C_NAMES.ret,
            kind=roles_of(function).kind,
        )
        if function.variadic:
            variables["va"] = C_NAMES.va_args
        for position, param in enumerate(function.params):
            variables[str(position)] = param.name
        return variables

    def block(self, code: Code, variables: Mapping[str, str], function: Optional[MpiFunction] = None) -> CBlock:
        def check(word: str, where: Location) -> None:
            if word == "ctx" and not self.has_context:
                raise QmpigenError(
                    "$ctx needs per-instance state: declare a context { ... } block with at least one field", where
                )
            if word == "ret" and function is not None and function.return_type == "void":
                raise QmpigenError(f"{function.name} returns nothing: no $ret", where)

        def refuse(word: str, where: Location) -> QmpigenError:
            if word.isdigit():
                count = len(function.params) if function else 0
                return QmpigenError(
                    f"${word}: {function.name if function else 'this code'} has {count} argument"
                    f"{'' if count == 1 else 's'} ($0..${max(count - 1, 0)})",
                    where,
                )
            if word == "va":
                return QmpigenError(f"$va: {function.name if function else 'this code'} is not variadic", where)
            return QmpigenError(f"${word} is not available here", where)  # pragma: no cover - checked at parse time

        expansion = expand(code, variables, refuse, check)
        return _c_block(expansion.text, code.location.line, expansion.used)


def _position(location) -> Tuple[int, int]:
    return (location.line, location.column)


def _c_block(text: str, line: int, used) -> CBlock:
    """Dedent code and drop blank lines around it; `line` is the spec line of the first line kept."""
    lines = text.split("\n")
    if lines[0].strip():  # the code starts on the line of %{
        body = [lines[0].strip()] + (textwrap.dedent("\n".join(lines[1:])).split("\n") if len(lines) > 1 else [])
    else:
        lines.pop(0)
        line += 1
        while lines and not lines[0].strip():
            lines.pop(0)
            line += 1
        body = textwrap.dedent("\n".join(lines)).split("\n")
    body = [line.rstrip() for line in body]
    while body and not body[-1]:
        body.pop()
    return CBlock("\n".join(body), line, used)


def _base_name(path: str) -> str:
    return path.replace("\\", "/").rsplit("/", 1)[-1]
