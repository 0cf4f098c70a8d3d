/* Every way a request completes, under the trace tool (tests/test_trace_completions.py):
 * each rank posts N receives from its left and N sends to its right neighbour on a ring,
 * N = 10, and completes all 2N requests the way argv[1] says:
 *   wait waitall waitany waitsome test testall testany testsome  - Isend/Irecv
 *   persistent  - Send_init/Recv_init, twice Startall + Waitall, then one Start each + Wait
 *   free        - Irecv + Waitall, the Isends let go with MPI_Request_free (then a Barrier)
 *   cancel      - N Irecvs that nothing matches, cancelled, then Waitall (no sends)
 *   iwrite      - MPI_File_iwrite_at to argv[2] completed by MPI_Wait (no Isend/Irecv at all)
 * COMPILE: mpicc trace_requests.c -o trace_requests   RUN: mpiexec -n 4 ./trace_requests waitall */
#include <mpi.h>
#include <stdio.h>
#include <string.h>

#define N 10

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "waitall";
    MPI_Request req[2 * N];
    int rank, size, i, left, right, done = 0, flag = 0, index, outcount, indices[2 * N];
    int sendbuf[N], recvbuf[N];
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    left = (rank + size - 1) % size;
    right = (rank + 1) % size;
    for (i = 0; i < N; i++)
        sendbuf[i] = rank * 100 + i;
    if (strcmp(mode, "iwrite") == 0) {
        MPI_File fh;
        MPI_Request r;
        MPI_File_open(MPI_COMM_WORLD, argv[2], MPI_MODE_CREATE | MPI_MODE_WRONLY, MPI_INFO_NULL, &fh);
        MPI_File_iwrite_at(fh, (MPI_Offset)rank * sizeof sendbuf, sendbuf, N, MPI_INT, &r);
        MPI_Wait(&r, MPI_STATUS_IGNORE);
        MPI_File_close(&fh);
    } else if (strcmp(mode, "cancel") == 0) {
        for (i = 0; i < N; i++)
            MPI_Irecv(&recvbuf[i], 1, MPI_INT, left, 999, MPI_COMM_WORLD, &req[i]);
        for (i = 0; i < N; i++)
            MPI_Cancel(&req[i]);
        MPI_Waitall(N, req, MPI_STATUSES_IGNORE);
    } else if (strcmp(mode, "persistent") == 0) {
        int round;
        for (i = 0; i < N; i++) {
            MPI_Recv_init(&recvbuf[i], 1, MPI_INT, left, i, MPI_COMM_WORLD, &req[i]);
            MPI_Send_init(&sendbuf[i], 1, MPI_INT, right, i, MPI_COMM_WORLD, &req[N + i]);
        }
        for (round = 0; round < 2; round++) {
            MPI_Startall(2 * N, req);
            MPI_Waitall(2 * N, req, MPI_STATUSES_IGNORE);
        }
        for (i = 0; i < 2 * N; i++)
            MPI_Start(&req[i]);
        for (i = 0; i < 2 * N; i++)
            MPI_Wait(&req[i], MPI_STATUS_IGNORE);
        for (i = 0; i < 2 * N; i++)
            MPI_Request_free(&req[i]);
    } else {
        for (i = 0; i < N; i++)
            MPI_Irecv(&recvbuf[i], 1, MPI_INT, left, i, MPI_COMM_WORLD, &req[i]);
        for (i = 0; i < N; i++)
            MPI_Isend(&sendbuf[i], 1, MPI_INT, right, i, MPI_COMM_WORLD, &req[N + i]);
        if (strcmp(mode, "wait") == 0) {
            for (i = 0; i < 2 * N; i++)
                MPI_Wait(&req[i], MPI_STATUS_IGNORE);
        } else if (strcmp(mode, "waitall") == 0) {
            MPI_Waitall(2 * N, req, MPI_STATUSES_IGNORE);
        } else if (strcmp(mode, "waitany") == 0) {
            for (i = 0; i < 2 * N; i++)
                MPI_Waitany(2 * N, req, &index, MPI_STATUS_IGNORE);
        } else if (strcmp(mode, "waitsome") == 0) {
            while (done < 2 * N) {
                MPI_Waitsome(2 * N, req, &outcount, indices, MPI_STATUSES_IGNORE);
                done += outcount;
            }
        } else if (strcmp(mode, "test") == 0) {
            for (i = 0; i < 2 * N; i++)
                do
                    MPI_Test(&req[i], &flag, MPI_STATUS_IGNORE);
                while (!flag);
        } else if (strcmp(mode, "testall") == 0) {
            do
                MPI_Testall(2 * N, req, &flag, MPI_STATUSES_IGNORE);
            while (!flag);
        } else if (strcmp(mode, "testany") == 0) {
            while (done < 2 * N) {
                MPI_Testany(2 * N, req, &index, &flag, MPI_STATUS_IGNORE);
                done += flag && index != MPI_UNDEFINED;
            }
        } else if (strcmp(mode, "testsome") == 0) {
            while (done < 2 * N) {
                MPI_Testsome(2 * N, req, &outcount, indices, MPI_STATUSES_IGNORE);
                done += outcount;
            }
        } else if (strcmp(mode, "free") == 0) {
            for (i = N; i < 2 * N; i++)
                MPI_Request_free(&req[i]);
            MPI_Waitall(N, req, MPI_STATUSES_IGNORE);
            MPI_Barrier(MPI_COMM_WORLD);
        }
        for (i = 0; i < N; i++)
            if (recvbuf[i] != left * 100 + i)
                printf("rank %d: bad value %d at %d\n", rank, recvbuf[i], i);
    }
    printf("done %d %s\n", rank, mode);
    MPI_Finalize();
    return 0;
}
