/* abort_or_wait: a job that leaves its MPI's shared-memory files behind, or holds them
 * for a while (tests/test_shm_sweep.py).
 *   abort_or_wait abort     rank 0 calls MPI_Abort after a barrier (the others wait in
 *                           a second one, and are killed)
 *   abort_or_wait wait N    every rank sleeps N seconds between two barriers, then
 *                           finalizes */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int main(int argc, char **argv)
{
    int rank;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Barrier(MPI_COMM_WORLD);
    if (argc > 1 && strcmp(argv[1], "abort") == 0 && rank == 0)
        MPI_Abort(MPI_COMM_WORLD, 3);
    if (argc > 2 && strcmp(argv[1], "wait") == 0) {
        printf("rank %d waiting\n", rank);
        fflush(stdout);
        sleep((unsigned)atoi(argv[2]));
    }
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Finalize();
    return 0;
}
