/* tool_typed.c: an empty thesis-style tool on the fast path: every wrapper passes
 * straight on with the typed next call QMPI_Next_<Name> (one load of the next link
 * from the chain's tables, one indirect call; -O2 makes it a tail call). Intercepts
 * MPI_Comm_rank (the timed call), MPI_Send/MPI_Recv (the ping-pong), and MPI_Iprobe,
 * MPI_Allreduce, MPI_File_write_at and MPI_File_seek (the floor of the trace tool's
 * per-call rows).
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

_EXTERN_C_ int QB_Iprobe(int source, int tag, MPI_Comm comm, int *flag, MPI_Status *status, int i, vector *v)
{
    return QMPI_Next_Iprobe(source, tag, comm, flag, status, i, v);
}

_EXTERN_C_ int QB_Allreduce(const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype, MPI_Op op,
                            MPI_Comm comm, int i, vector *v)
{
    return QMPI_Next_Allreduce(sendbuf, recvbuf, count, datatype, op, comm, i, v);
}

_EXTERN_C_ int QB_File_write_at(MPI_File fh, MPI_Offset offset, const void *buf, int count, MPI_Datatype datatype,
                                MPI_Status *status, int i, vector *v)
{
    return QMPI_Next_File_write_at(fh, offset, buf, count, datatype, status, i, v);
}

_EXTERN_C_ int QB_File_seek(MPI_File fh, MPI_Offset offset, int whence, int i, vector *v)
{
    return QMPI_Next_File_seek(fh, offset, whence, i, v);
}

_EXTERN_C_ char *get_interceptions(int i)
{
    switch (i) {
    case _MPI_Comm_rank: return "QB_Comm_rank";
    case _MPI_Send: return "QB_Send";
    case _MPI_Recv: return "QB_Recv";
    case _MPI_Iprobe: return "QB_Iprobe";
    case _MPI_Allreduce: return "QB_Allreduce";
    case _MPI_File_write_at: return "QB_File_write_at";
    case _MPI_File_seek: return "QB_File_seek";
    default: return NULL;
    }
}
