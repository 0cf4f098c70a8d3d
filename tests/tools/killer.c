/* A tool that kills its process inside an MPI call: below the trace tool
 * (TOOLS=libtrace.so:libkiller.so), a death inside the MPI as the trace sees it. It
 * counts the calls of MPI_Barrier, MPI_Allreduce and MPI_Iprobe that reach it (those of
 * tests/apps/trace_death.c's loop) and, at the one numbered KILLER_AT (from 1), raises
 * KILLER_SIGNAL (a number, default 9: SIGKILL) instead of passing it on; if the process
 * survives the signal, the call goes on. With KILLER_FINALIZE set, MPI_Finalize raises it
 * too, once every rank is in MPI_Finalize: a rank that never returns from finalizing.
 * With KILLER_SLEEP_MS set, call KILLER_AT sleeps that long instead of raising, and so
 * does MPI_Comm_rank (a function outside the trace's roles): calls longer than a trace
 * record's 32-bit duration.
 *
 * Build: mpicc -shared -fPIC -Wall -Wextra -Werror -I<core> killer.c -o libkiller.so
 * Run:   TOOLS=./libtrace.so:./libkiller.so KILLER_AT=40 mpiexec -n 1 ./trace_death finish 100
 *        (tests/test_trace_death.py) */
#include <signal.h>
#include <stdlib.h>
#include <time.h>

#include "qmpi.h"

static long calls;

/* KILLER_SLEEP_MS's nap; 0 if it is not set. */
static int nap(void)
{
    const char *ms = getenv("KILLER_SLEEP_MS");
    struct timespec length;
    if (ms == NULL)
        return 0;
    length.tv_sec = atol(ms) / 1000;
    length.tv_nsec = atol(ms) % 1000 * 1000000L;
    while (nanosleep(&length, &length) != 0)
        ;
    return 1;
}

static void maybe_die(void)
{
    const char *at = getenv("KILLER_AT"), *sig = getenv("KILLER_SIGNAL");
    if (at != NULL && __atomic_add_fetch(&calls, 1, __ATOMIC_RELAXED) == atol(at) && !nap())
        raise(sig != NULL ? atoi(sig) : SIGKILL);
}

_EXTERN_C_ int KI_Comm_rank(MPI_Comm comm, int *rank, int i, vector *v)
{
    nap();
    return QMPI_Next_Comm_rank(comm, rank, i, v);
}

_EXTERN_C_ int KI_Barrier(MPI_Comm comm, int i, vector *v)
{
    maybe_die();
    return QMPI_Next_Barrier(comm, i, v);
}

_EXTERN_C_ int KI_Allreduce(const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype, MPI_Op op,
                            MPI_Comm comm, int i, vector *v)
{
    maybe_die();
    return QMPI_Next_Allreduce(sendbuf, recvbuf, count, datatype, op, comm, i, v);
}

_EXTERN_C_ int KI_Iprobe(int source, int tag, MPI_Comm comm, int *flag, MPI_Status *status, int i, vector *v)
{
    maybe_die();
    return QMPI_Next_Iprobe(source, tag, comm, flag, status, i, v);
}

_EXTERN_C_ int KI_Finalize(int i, vector *v)
{
    const char *sig = getenv("KILLER_SIGNAL");
    if (getenv("KILLER_FINALIZE") != NULL) {
        /* every rank inside MPI_Finalize before one dies: the first death has the launcher
         * kill the others, and one still on its way to finalizing would never enter it */
        PMPI_Barrier(MPI_COMM_WORLD);
        raise(sig != NULL ? atoi(sig) : SIGKILL);
    }
    return QMPI_Next_Finalize(i, v);
}

_EXTERN_C_ char *get_interceptions(int i)
{
    switch (i) {
    case _MPI_Barrier:
        return "KI_Barrier";
    case _MPI_Allreduce:
        return "KI_Allreduce";
    case _MPI_Iprobe:
        return "KI_Iprobe";
    case _MPI_Finalize:
        return "KI_Finalize";
    case _MPI_Comm_rank:
        return getenv("KILLER_SLEEP_MS") != NULL ? "KI_Comm_rank" : NULL;
    default:
        return NULL;
    }
}
