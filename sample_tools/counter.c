/* counter: counts the calls it intercepts, per tool instance (thesis section 2.5.5:
 * context separation), and prints one report per instance and rank at MPI_Finalize.
 * Listed twice in TOOLS, each instance counts only what reaches its own level.
 *
 * Build: mpicc -shared -fPIC -Wall -Wextra -Werror -I<core> counter.c -o libcounter.so
 * Run:   TOOLS=./libcounter.so:./libtbcast.so:./libcounter.so mpiexec -n 3 ./app */
#define _POSIX_C_SOURCE 200809L /* open_memstream */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include "qmpi.h"

struct counter_context {
    unsigned long long calls[NUM_MPI_FUNCS];
};

static struct counter_context *counts(int i, vector *v)
{
    if (QMPI_GET_CONTEXT(v, i) == NULL) {
        static const struct counter_context zero;
        QMPI_SET_CONTEXT(v, i, (void *)&zero, sizeof zero);
    }
    return (struct counter_context *)QMPI_GET_CONTEXT(v, i);
}

#define COUNT(name) (counts(i, v)->calls[_MPI_##name]++)

_EXTERN_C_ int C_Init(int *argc, char ***argv, int i, vector *v)
{
    COUNT(Init);
    return QMPI_Next_Init(argc, argv, i, v);
}

_EXTERN_C_ int C_Init_thread(int *argc, char ***argv, int required, int *provided, int i, vector *v)
{
    COUNT(Init_thread);
    return QMPI_Next_Init_thread(argc, argv, required, provided, i, v);
}

_EXTERN_C_ int C_Comm_rank(MPI_Comm comm, int *rank, int i, vector *v)
{
    COUNT(Comm_rank);
    return QMPI_Next_Comm_rank(comm, rank, i, v);
}

_EXTERN_C_ int C_Comm_size(MPI_Comm comm, int *size, int i, vector *v)
{
    COUNT(Comm_size);
    return QMPI_Next_Comm_size(comm, size, i, v);
}

_EXTERN_C_ int C_Send(const void *buf, int count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm, int i,
                      vector *v)
{
    COUNT(Send);
    return QMPI_Next_Send(buf, count, datatype, dest, tag, comm, i, v);
}

_EXTERN_C_ int C_Recv(void *buf, int count, MPI_Datatype datatype, int source, int tag, MPI_Comm comm,
                      MPI_Status *status, int i, vector *v)
{
    COUNT(Recv);
    return QMPI_Next_Recv(buf, count, datatype, source, tag, comm, status, i, v);
}

_EXTERN_C_ int C_Bcast(void *buffer, int count, MPI_Datatype datatype, int root, MPI_Comm comm, int i, vector *v)
{
    COUNT(Bcast);
    return QMPI_Next_Bcast(buffer, count, datatype, root, comm, i, v);
}

_EXTERN_C_ int C_Barrier(MPI_Comm comm, int i, vector *v)
{
    COUNT(Barrier);
    return QMPI_Next_Barrier(comm, i, v);
}

_EXTERN_C_ int C_Allreduce(const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype, MPI_Op op,
                           MPI_Comm comm, int i, vector *v)
{
    COUNT(Allreduce);
    return QMPI_Next_Allreduce(sendbuf, recvbuf, count, datatype, op, comm, i, v);
}

_EXTERN_C_ int C_Finalize(int i, vector *v)
{
    struct counter_context *c = counts(i, v);
    char *line = NULL;
    size_t length = 0;
    FILE *report;
    int rank = 0, k;

    c->calls[_MPI_Finalize]++;
    /* Ask below this level, through the table, so the report itself is not counted here. */
    QMPI_Next_Comm_rank(MPI_COMM_WORLD, &rank, i, v);
    /* One write per report, so the lines of different ranks do not interleave. */
    report = open_memstream(&line, &length);
    if (report != NULL) {
        fprintf(report, "counter@%d rank %d:", i, rank);
        for (k = 0; k < NUM_MPI_FUNCS; k++)
            if (c->calls[k] != 0)
                fprintf(report, " %s=%llu", QMPI_Function_name(k), c->calls[k]);
        fputc('\n', report);
        fclose(report);
        fputs(line, stdout);
        fflush(stdout);
        free(line);
    }
    return QMPI_Next_Finalize(i, v);
}

_EXTERN_C_ char *get_interceptions(int i)
{
    switch (i) {
    case _MPI_Init: return "C_Init";
    case _MPI_Init_thread: return "C_Init_thread";
    case _MPI_Comm_rank: return "C_Comm_rank";
    case _MPI_Comm_size: return "C_Comm_size";
    case _MPI_Send: return "C_Send";
    case _MPI_Recv: return "C_Recv";
    case _MPI_Bcast: return "C_Bcast";
    case _MPI_Barrier: return "C_Barrier";
    case _MPI_Allreduce: return "C_Allreduce";
    case _MPI_Finalize: return "C_Finalize";
    default: return NULL;
    }
}
