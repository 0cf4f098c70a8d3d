"""The names generated C gives its own parameters and locals, spelled once.

Python (wrapper signatures, `$` variables of tool specs) and every template (as the
jinja global `c`: `{{ c.level }}`) read them from here, so a name can never differ
between the code that declares it and the code that uses it. All start with `qmpi_`,
which tool spec authors may not use for their own fields.
"""

from __future__ import annotations

from dataclasses import dataclass

RESERVED_PREFIX = "qmpi_"

# PMPI tools: a private copy of the tool per TOOLS occurrence, its PMPI_X
# imports renamed to <letter>MPI_X, the core's continuation entry of that copy's slot.
# Letters in order of preference; build-core keeps the first PMPI_SLOTS that neither
# quirks.PMPI_SLOT_RESERVED nor the MPI's mpi.h uses.
PMPI_SLOT_CANDIDATES = "YZJKVWGHBCDEFILMRSTU"
PMPI_SLOTS = 8


def continuation(letter: str, name: str) -> str:
    """The slot's continuation entry for MPI function `name`: Y + MPI_Send -> YMPI_Send."""
    return letter + name


@dataclass(frozen=True)
class CNames:
    level: str = "qmpi_level"  # a wrapper's level in the chain (thesis: its `int i`)
    chain: str = "qmpi_v"  # the chain, `vector *` (thesis: its `vector *v`)
    va_args: str = "qmpi_args"  # `va_list *` holding a variadic function's tail
    va_list: str = "qmpi_va_list"  # the `va_list` a callback wrapper starts itself
    ret: str = "qmpi_ret"  # the result a wrapper returns
    ctx: str = "qmpi_ctx"  # a tool instance's context struct (spec tools)
    rank: str = "qmpi_rank"  # the world rank a spec tool records at init
    context: str = "qmpi_context"  # QMPI_Context of the callback interface
    instance: str = "qmpi_self"  # a callback tool's instance
    next_fn: str = "qmpi_f"  # the next link's function, for exec_func

    @property
    def level_param(self) -> str:
        return f"int {self.level}"

    @property
    def chain_param(self) -> str:
        return f"vector *{self.chain}"

    @property
    def va_param(self) -> str:
        return f"va_list *{self.va_args}"

    @property
    def ctx_rank(self) -> str:
        """The recorded rank, as a spec tool's code reads it ($rank)."""
        return f"{self.ctx}->{self.rank}"


C_NAMES = CNames()
