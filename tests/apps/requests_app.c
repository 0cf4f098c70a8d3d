/* The application of tests/test_services.py (2 ranks): valid requests from MPI_Isend,
 * MPI_Irecv and MPI_Ibarrier completed by MPI_Wait and MPI_Waitall, one MPI_Wait on
 * MPI_REQUEST_NULL, and — deliberately — one MPI_Wait on a request made with PMPI_Isend,
 * behind every tool's back: the one sample_tools/reqcheck.qmpi must report. Prints
 * "RANK <r> hidden at <address of that request>" and "RANK <r> ok" when every
 * transfer arrived.
 * COMPILE: mpicc requests_app.c -o requests_app -lqmpi   RUN: mpiexec -n 2 ./requests_app */
#include <mpi.h>
#include <stdio.h>

int main(int argc, char **argv)
{
    int rank, size, peer, out[3], in[3] = {-1, -1, -1};
    MPI_Request requests[2], barrier, hidden, none = MPI_REQUEST_NULL;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    peer = (rank + 1) % size;
    out[0] = 10 + rank, out[1] = 20 + rank, out[2] = 30 + rank;

    MPI_Irecv(&in[0], 1, MPI_INT, MPI_ANY_SOURCE, 1, MPI_COMM_WORLD, &requests[0]);
    MPI_Isend(&out[0], 1, MPI_INT, peer, 1, MPI_COMM_WORLD, &requests[1]);
    MPI_Waitall(2, requests, MPI_STATUSES_IGNORE);

    MPI_Irecv(&in[1], 1, MPI_INT, MPI_ANY_SOURCE, 2, MPI_COMM_WORLD, &requests[0]);
    MPI_Isend(&out[1], 1, MPI_INT, peer, 2, MPI_COMM_WORLD, &requests[1]);
    MPI_Wait(&requests[1], MPI_STATUS_IGNORE);
    MPI_Wait(&requests[0], MPI_STATUS_IGNORE);

    MPI_Ibarrier(MPI_COMM_WORLD, &barrier);
    MPI_Wait(&barrier, MPI_STATUS_IGNORE);
    MPI_Wait(&none, MPI_STATUS_IGNORE);

    /* Behind the tools' back: no tool sees this request created. */
    MPI_Irecv(&in[2], 1, MPI_INT, MPI_ANY_SOURCE, 3, MPI_COMM_WORLD, &requests[0]);
    PMPI_Isend(&out[2], 1, MPI_INT, peer, 3, MPI_COMM_WORLD, &hidden);
    printf("RANK %d hidden at %p\n", rank, (void *)&hidden);
    MPI_Wait(&hidden, MPI_STATUS_IGNORE);
    MPI_Wait(&requests[0], MPI_STATUS_IGNORE);

    if (in[0] == 10 + (rank + size - 1) % size && in[1] == 20 + (rank + size - 1) % size && in[2] == 30 + (rank + size - 1) % size)
        printf("RANK %d ok\n", rank);
    fflush(stdout);
    MPI_Finalize();
    return 0;
}
