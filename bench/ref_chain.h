/* ref_chain.h: the reference chain of `make bench` (bench/ref_chain.c, libqbref.so). */
#ifndef QB_REF_CHAIN_H
#define QB_REF_CHAIN_H
#include <mpi.h>

/* 0 "compact": level k's link is cells[k] (16-byte cells, one function): the floor.
 * 1 "core-layout": cells[k * NUM_MPI_FUNCS + _MPI_Comm_rank], the core's geometry
 *   (one table of NUM_MPI_FUNCS cells per level, all in one block).
 * 2 "frames": compact, but each layer keeps its frame (no tail call), as a tool that
 *   does work after the next call.
 * 3 "core-layout-hugepages": layout 1 in memory aligned to 2 MiB and advised
 *   MADV_HUGEPAGE (transparent huge pages), to measure what that would give the core. */
#define QREF_LAYOUTS 4

/* Builds a chain of `levels` layers in `layout`; 0 on success. */
int qref_setup(int levels, int layout);
const char *qref_layout_name(int layout);
/* Enters the chain: level 0 -> 1 -> ... -> levels -> PMPI_Comm_rank. */
int qref_call(MPI_Comm comm, int *rank);
#endif
