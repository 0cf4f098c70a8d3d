/* A tool as qmpi.h built them before the links rows (tool ABI 1): its next calls read
 * the per-level tables, and its stamp is the enumeration hash alone. STAMP_SUFFIX makes
 * it claim a tool ABI this core does not have. Prints "old_abi@<level> rank_calls N". */
#define qmpi_tool_enum_hash qmpi_tool_enum_hash_of_this_header /* the stamp is set below, as before */
#include "qmpi.h"
#undef qmpi_tool_enum_hash

#include <stdio.h>

#ifndef STAMP_SUFFIX
#define STAMP_SUFFIX ""
#endif
const char qmpi_tool_enum_hash[] = QMPI_ENUM_HASH STAMP_SUFFIX;

static int calls[16]; /* per level: a tool named twice in TOOLS is one library */

_EXTERN_C_ int O_Comm_rank(MPI_Comm comm, int *rank, int i, vector *v)
{
    const cell *next = v->cells + (size_t)i * NUM_MPI_FUNCS + _MPI_Comm_rank;
    __atomic_fetch_add(&calls[i & 15], 1, __ATOMIC_RELAXED);
    return ((QMPI_Comm_rank_wrapper_t)next->func_ptr)(comm, rank, next->level, v);
}

_EXTERN_C_ int O_Finalize(int i, vector *v)
{
    const cell *next = v->cells + (size_t)i * NUM_MPI_FUNCS + _MPI_Finalize;
    fprintf(stderr, "old_abi@%d rank_calls %d\n", i, calls[i & 15]);
    return ((QMPI_Finalize_wrapper_t)next->func_ptr)(next->level, v);
}

_EXTERN_C_ char *get_interceptions(int i)
{
    switch (i) {
    case _MPI_Comm_rank:
        return "O_Comm_rank";
    case _MPI_Finalize:
        return "O_Finalize";
    default:
        return NULL;
    }
}
