/* A thesis-style tool written by hand for MPI_THREAD_MULTIPLE: per-instance counts in
 * a context created at first use (QMPI_Init_context: once, even when threads race to
 * it) and updated with atomic adds, so no call is lost. MPI_Send goes on through
 * exec_func, the others through the typed QMPI_Next_<Name>. At MPI_Finalize:
 *
 *   tally@<level> rank <rank>: initialized=4 comm_rank=20001 send=20000 recv=20000 pcontrol=20001
 *
 * Build: mpicc -shared -fPIC -Wall -Wextra -Werror -I<core> tally.c -o libtally.so
 * Run:   TOOLS=./libtally.so mpiexec -n 2 ./thread_stress (tests/test_threads.py) */
#include <stdio.h>

#include "qmpi.h"

struct tally {
    unsigned long initialized, comm_rank, send, recv, pcontrol;
};

static struct tally *tally_of(int i, vector *v)
{
    static const struct tally zero;
    return QMPI_Init_context(v, i, &zero, sizeof zero);
}

#define TALLY(i, v, field) __atomic_fetch_add(&tally_of(i, v)->field, 1, __ATOMIC_RELAXED)

_EXTERN_C_ int TA_Initialized(int *flag, int i, vector *v)
{
    TALLY(i, v, initialized);
    return QMPI_Next_Initialized(flag, i, v);
}

_EXTERN_C_ int TA_Comm_rank(MPI_Comm comm, int *rank, int i, vector *v)
{
    TALLY(i, v, comm_rank);
    return QMPI_Next_Comm_rank(comm, rank, i, v);
}

_EXTERN_C_ int TA_Send(const void *buf, int count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm, int i,
                       vector *v)
{
    void *next = NULL;
    TALLY(i, v, send);
    QMPI_Table_query(_MPI_Send, &next, v->items[i]->table);
    return exec_func(next, i, _MPI_Send, v, buf, count, datatype, dest, tag, comm);
}

_EXTERN_C_ int TA_Recv(void *buf, int count, MPI_Datatype datatype, int source, int tag, MPI_Comm comm,
                       MPI_Status *status, int i, vector *v)
{
    TALLY(i, v, recv);
    return QMPI_Next_Recv(buf, count, datatype, source, tag, comm, status, i, v);
}

/* The core calls every tool's Pcontrol itself: no next call. */
_EXTERN_C_ int TA_Pcontrol(const int level, int i, vector *v, va_list *args)
{
    (void)level;
    (void)args;
    TALLY(i, v, pcontrol);
    return MPI_SUCCESS;
}

_EXTERN_C_ int TA_Finalize(int i, vector *v)
{
    struct tally *t = tally_of(i, v);
    int rank = -1;

    PMPI_Comm_rank(MPI_COMM_WORLD, &rank);
    printf("tally@%d rank %d: initialized=%lu comm_rank=%lu send=%lu recv=%lu pcontrol=%lu\n", i, rank,
           __atomic_load_n(&t->initialized, __ATOMIC_RELAXED), __atomic_load_n(&t->comm_rank, __ATOMIC_RELAXED),
           __atomic_load_n(&t->send, __ATOMIC_RELAXED), __atomic_load_n(&t->recv, __ATOMIC_RELAXED),
           __atomic_load_n(&t->pcontrol, __ATOMIC_RELAXED));
    fflush(stdout);
    return QMPI_Next_Finalize(i, v);
}

_EXTERN_C_ char *get_interceptions(int i)
{
    switch (i) {
    case _MPI_Initialized: return "TA_Initialized";
    case _MPI_Comm_rank: return "TA_Comm_rank";
    case _MPI_Send: return "TA_Send";
    case _MPI_Recv: return "TA_Recv";
    case _MPI_Pcontrol: return "TA_Pcontrol";
    case _MPI_Finalize: return "TA_Finalize";
    default: return NULL;
    }
}
