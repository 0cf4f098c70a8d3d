/* ref_chain.c: the floor per layer for `make bench` — N non-inlined functions that
 * call each other through a table of function pointers, exactly as a chain of empty
 * thesis-style tools does through the core's tables, minus everything QMPI-specific.
 *
 * It is honest: the layers live in this shared library (built like the core, -O2
 * -fPIC -fno-plt), are reached only through pointers written at run time (nothing
 * can be inlined or collapsed), and each one receives the MPI arguments plus a level
 * and a chain pointer, loads its own link (function, next level) from the table and
 * calls it: the same loads and the same indirect call as QMPI_Next_Comm_rank. The
 * last link calls PMPI_Comm_rank. Layout 1 uses the core's geometry (qmpi.h's
 * NUM_MPI_FUNCS and _MPI_Comm_rank), so the effect of the table layout alone shows.
 *
 * Build: mpicc -O2 -fPIC -fno-plt -shared -I<core> ref_chain.c -o libqbref.so */
#define _GNU_SOURCE
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "qmpi.h" /* for NUM_MPI_FUNCS and _MPI_Comm_rank only */
#include "ref_chain.h"

struct qref_cell {
    void *fn;
    int level;
};

struct qref_chain {
    struct qref_cell *cells;
    const struct qref_cell *entry; /* level 0's link */
};

typedef int (*qref_fn)(MPI_Comm comm, int *rank, int level, struct qref_chain *v);

static struct qref_chain chain;

__attribute__((noinline)) static int qref_end(MPI_Comm comm, int *rank, int level, struct qref_chain *v)
{
    (void)level;
    (void)v;
    return PMPI_Comm_rank(comm, rank);
}

__attribute__((noinline)) static int qref_layer_compact(MPI_Comm comm, int *rank, int level, struct qref_chain *v)
{
    const struct qref_cell *c = v->cells + level;
    return ((qref_fn)c->fn)(comm, rank, c->level, v);
}

__attribute__((noinline)) static int qref_layer_core(MPI_Comm comm, int *rank, int level, struct qref_chain *v)
{
    const struct qref_cell *c = v->cells + (size_t)level * NUM_MPI_FUNCS + _MPI_Comm_rank;
    return ((qref_fn)c->fn)(comm, rank, c->level, v);
}

__attribute__((noinline)) static int qref_layer_frames(MPI_Comm comm, int *rank, int level, struct qref_chain *v)
{
    const struct qref_cell *c = v->cells + level;
    int rc = ((qref_fn)c->fn)(comm, rank, c->level, v);
    __asm__ volatile("" : "+r"(rc)); /* work after the call: no tail call */
    return rc;
}

const char *qref_layout_name(int layout)
{
    static const char *const names[QREF_LAYOUTS] = { "compact", "core-layout", "frames", "core-layout-hugepages" };
    return layout >= 0 && layout < QREF_LAYOUTS ? names[layout] : "?";
}

int qref_setup(int levels, int layout)
{
    int core = layout == 1 || layout == 3;
    size_t stride = core ? NUM_MPI_FUNCS : 1, offset = core ? _MPI_Comm_rank : 0;
    size_t bytes = ((size_t)levels + 1) * stride * sizeof(struct qref_cell);
    void *layer = core ? (void *)qref_layer_core : layout == 2 ? (void *)qref_layer_frames : (void *)qref_layer_compact;
    struct qref_cell *cells;

    if (levels < 0 || layout < 0 || layout >= QREF_LAYOUTS)
        return -1;
    if (layout == 3) {
        const size_t huge = (size_t)2 << 20;
        void *memory = NULL;
        bytes = (bytes + huge - 1) / huge * huge;
        if (posix_memalign(&memory, huge, bytes) != 0)
            return -1;
        madvise(memory, bytes, MADV_HUGEPAGE); /* advice only: may be ignored */
        memset(memory, 0, bytes);
        cells = memory;
    } else {
        cells = calloc(1, bytes);
    }
    if (cells == NULL)
        return -1;
    for (int k = 0; k <= levels; k++) {
        struct qref_cell *c = cells + (size_t)k * stride + offset;
        c->fn = k < levels ? layer : (void *)qref_end;
        c->level = k + 1;
    }
    free(chain.cells);
    chain.cells = cells;
    chain.entry = cells + offset;
    return 0;
}

int qref_call(MPI_Comm comm, int *rank)
{
    const struct qref_cell *c = chain.entry;
    return ((qref_fn)c->fn)(comm, rank, c->level, &chain);
}
