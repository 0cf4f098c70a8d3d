/* The traced application of `make bench`'s merge rows (bench/trace_bench.py): ranks in
 * pairs (0-1, 2-3, ...) exchange argv[1] messages with MPI_Send/MPI_Recv; every 100th
 * exchange is an MPI_Isend/MPI_Irecv pair completed by MPI_Waitall, every 1000th is
 * followed by an MPI_Allreduce on MPI_COMM_WORLD. An even number of ranks.
 * COMPILE: mpicc trace_pairs.c -o trace_pairs -lqmpi
 * RUN:     TOOLS=libqbtrace.so QMPI_TRACE_DIR=run mpiexec -n 4 ./trace_pairs 100000 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
    long i, n = argc > 1 ? atol(argv[1]) : 100000;
    int rank, size, peer, value = 0, sum;
    MPI_Request requests[2];
    /* Not MPI_STATUSES_IGNORE: MPICH 4.0's is (MPI_Status *)1, which GCC 12 flags
     * (-Wstringop-overflow) against MPI_Waitall's array parameter. */
    MPI_Status statuses[2];
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (size % 2) {
        if (rank == 0)
            fprintf(stderr, "trace_pairs: an even number of ranks\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    peer = rank ^ 1;
    for (i = 0; i < n; i++) {
        if (i % 100 == 99) {
            int in = 0;
            MPI_Irecv(&in, 1, MPI_INT, peer, 2, MPI_COMM_WORLD, &requests[0]);
            MPI_Isend(&value, 1, MPI_INT, peer, 2, MPI_COMM_WORLD, &requests[1]);
            MPI_Waitall(2, requests, statuses);
        } else if (rank % 2 == 0) {
            MPI_Send(&value, 1, MPI_INT, peer, 1, MPI_COMM_WORLD);
            MPI_Recv(&value, 1, MPI_INT, peer, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        } else {
            MPI_Recv(&value, 1, MPI_INT, peer, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            MPI_Send(&value, 1, MPI_INT, peer, 1, MPI_COMM_WORLD);
        }
        if (i % 1000 == 999)
            MPI_Allreduce(&value, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    }
    MPI_Finalize();
    return 0;
}
