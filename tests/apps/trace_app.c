/* The traced application of tests/test_trace.py (4 ranks): Send/Recv, Isend/Irecv with
 * Waitall and Wait, Bcast, Allreduce, Comm_split with work on the sub-communicator, and
 * MPI-IO on argv[1]. It counts its own calls and prints "calls <rank> <function> <n>",
 * the truth the merged traces are checked against.
 * COMPILE: mpicc trace_app.c -o trace_app -lqmpi   RUN: mpiexec -n 4 ./trace_app FILE */
#include <mpi.h>
#include <stdio.h>
#include <string.h>

enum { SEND, RECV, ISEND, IRECV, WAIT, WAITALL, BCAST, ALLREDUCE, SPLIT, FREE, OPEN, WRITE_AT, READ_AT, CLOSE, N };
static const char *const names[N] = {"MPI_Send", "MPI_Recv", "MPI_Isend", "MPI_Irecv", "MPI_Wait",
                                     "MPI_Waitall", "MPI_Bcast", "MPI_Allreduce", "MPI_Comm_split",
                                     "MPI_Comm_free", "MPI_File_open", "MPI_File_write_at",
                                     "MPI_File_read_at", "MPI_File_close"};
static int calls[N];

int main(int argc, char **argv)
{
    int rank, size, right, left, sub_rank, sub_size, i, value[4] = {0}, sum = 0, halo[2] = {0, 0};
    double out[8] = {0}, in[2][8];
    char block[64], back[64];
    MPI_Request requests[4], single[2];
    MPI_Comm sub;
    MPI_File fh;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    right = (rank + 1) % size;
    left = (rank + size - 1) % size;

    /* a ring of blocking messages, even ranks sending first */
    value[0] = rank;
    for (i = 0; i < 2; i++) {
        if ((rank % 2) == i) {
            MPI_Send(value, 4, MPI_INT, right, 10, MPI_COMM_WORLD), calls[SEND]++;
        } else {
            MPI_Recv(value, 4, MPI_INT, left, 10, MPI_COMM_WORLD, MPI_STATUS_IGNORE), calls[RECV]++;
        }
    }
    /* halo exchange, nonblocking */
    MPI_Irecv(in[0], 8, MPI_DOUBLE, left, 20, MPI_COMM_WORLD, &requests[0]), calls[IRECV]++;
    MPI_Irecv(in[1], 8, MPI_DOUBLE, right, 21, MPI_COMM_WORLD, &requests[1]), calls[IRECV]++;
    MPI_Isend(out, 8, MPI_DOUBLE, right, 20, MPI_COMM_WORLD, &requests[2]), calls[ISEND]++;
    MPI_Isend(out, 8, MPI_DOUBLE, left, 21, MPI_COMM_WORLD, &requests[3]), calls[ISEND]++;
    MPI_Waitall(4, requests, MPI_STATUSES_IGNORE), calls[WAITALL]++;
    /* one more pair completed one by one, from any source */
    MPI_Irecv(&halo[0], 1, MPI_INT, MPI_ANY_SOURCE, 40, MPI_COMM_WORLD, &single[0]), calls[IRECV]++;
    MPI_Isend(&rank, 1, MPI_INT, right, 40, MPI_COMM_WORLD, &single[1]), calls[ISEND]++;
    MPI_Wait(&single[1], MPI_STATUS_IGNORE), calls[WAIT]++;
    MPI_Wait(&single[0], MPI_STATUS_IGNORE), calls[WAIT]++;

    if (rank == 0)
        value[1] = 42;
    MPI_Bcast(value, 4, MPI_INT, 0, MPI_COMM_WORLD), calls[BCAST]++;
    MPI_Allreduce(&rank, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD), calls[ALLREDUCE]++;

    /* even and odd ranks: a message, a reduction and a broadcast on each half */
    MPI_Comm_split(MPI_COMM_WORLD, rank % 2, rank, &sub), calls[SPLIT]++;
    MPI_Comm_rank(sub, &sub_rank);
    MPI_Comm_size(sub, &sub_size);
    if (sub_size > 1 && sub_rank == 0)
        MPI_Send(value, 2, MPI_INT, 1, 30, sub), calls[SEND]++;
    else if (sub_size > 1 && sub_rank == 1)
        MPI_Recv(value, 2, MPI_INT, 0, 30, sub, MPI_STATUS_IGNORE), calls[RECV]++;
    MPI_Allreduce(&rank, &sum, 1, MPI_INT, MPI_MAX, sub), calls[ALLREDUCE]++;
    MPI_Bcast(value, 1, MPI_INT, sub_size - 1, sub), calls[BCAST]++;
    MPI_Comm_free(&sub), calls[FREE]++;

    /* MPI-IO: each rank its own 64-byte block */
    memset(block, 'a' + rank, sizeof block);
    MPI_File_open(MPI_COMM_WORLD, argv[1], MPI_MODE_CREATE | MPI_MODE_RDWR, MPI_INFO_NULL, &fh), calls[OPEN]++;
    MPI_File_write_at(fh, (MPI_Offset)rank * 64, block, 64, MPI_CHAR, MPI_STATUS_IGNORE), calls[WRITE_AT]++;
    MPI_File_read_at(fh, (MPI_Offset)rank * 64, back, 64, MPI_CHAR, MPI_STATUS_IGNORE), calls[READ_AT]++;
    MPI_File_close(&fh), calls[CLOSE]++;

    for (i = 0; i < N; i++)
        printf("calls %d %s %d\n", rank, names[i], calls[i]);
    printf("check %d %d %d\n", rank, memcmp(block, back, sizeof block) == 0, value[1] == 42);
    fflush(stdout);
    MPI_Finalize();
    return 0;
}
