/* tool_typed.c: an empty thesis-style tool on the fast path: every wrapper passes
 * straight on with the typed next call QMPI_Next_<Name> (one load of the next link
 * from the chain's tables, one indirect call; -O2 makes it a tail call). Intercepts
 * MPI_Comm_rank (the timed call) and MPI_Send/MPI_Recv (the ping-pong).
 *
 * Build: mpicc -O2 -shared -fPIC -Wall -Wextra -Werror -I<core> tool_typed.c -o libqbtyped.so
 * Run:   TOOLS=./libqbtyped.so:./libqbtyped.so ./bench_core rank */
#include "qmpi.h"

_EXTERN_C_ int QB_Comm_rank(MPI_Comm comm, int *rank, int i, vector *v)
{
    return QMPI_Next_Comm_rank(comm, rank, i, v);
}

_EXTERN_C_ int QB_Send(const void *buf, int count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm, int i,
                       vector *v)
{
    return QMPI_Next_Send(buf, count, datatype, dest, tag, comm, i, v);
}

_EXTERN_C_ int QB_Recv(void *buf, int count, MPI_Datatype datatype, int source, int tag, MPI_Comm comm,
                       MPI_Status *status, int i, vector *v)
{
    return QMPI_Next_Recv(buf, count, datatype, source, tag, comm, status, i, v);
}

_EXTERN_C_ char *get_interceptions(int i)
{
    switch (i) {
    case _MPI_Comm_rank: return "QB_Comm_rank";
    case _MPI_Send: return "QB_Send";
    case _MPI_Recv: return "QB_Recv";
    default: return NULL;
    }
}
