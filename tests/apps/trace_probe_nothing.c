/* tests/test_trace.py: MPI_Iprobe that matches nothing leaves its status as it was, so the
 * tracer must not read it as a received message. Rank 0 probes for a tag nobody sends,
 * with a status holding stale values (source 1, tag 12345) and with MPI_STATUS_IGNORE. */
#include <mpi.h>
#include <stdio.h>

int main(int argc, char **argv)
{
    MPI_Status status;
    int rank, flag = 1, flag_ignored = 1;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (rank == 0) {
        status.MPI_SOURCE = 1;
        status.MPI_TAG = 12345;
        MPI_Iprobe(MPI_ANY_SOURCE, 99, MPI_COMM_WORLD, &flag, &status);
        MPI_Iprobe(MPI_ANY_SOURCE, 99, MPI_COMM_WORLD, &flag_ignored, MPI_STATUS_IGNORE);
        printf("matched %d %d\n", flag, flag_ignored);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Finalize();
    return 0;
}
