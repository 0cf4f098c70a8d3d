/* Collectives on MPI_COMM_WORLD and on 2-rank sub-communicators (tests/test_stacks.py):
 * world: 1 MPI_Barrier, 2 MPI_Bcast, 3 MPI_Allreduce; sub: 1 MPI_Bcast, 2 MPI_Allreduce,
 * 1 MPI_Barrier. Prints "ok <rank> <sum>" per rank. */
#include <mpi.h>
#include <stdio.h>

int main(int argc, char **argv)
{
    int rank, size, value, sum = 0, k;
    MPI_Comm pair;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Barrier(MPI_COMM_WORLD);
    value = rank;
    MPI_Bcast(&value, 1, MPI_INT, 0, MPI_COMM_WORLD);
    MPI_Bcast(&value, 1, MPI_INT, 0, MPI_COMM_WORLD);
    for (k = 0; k < 3; k++)
        MPI_Allreduce(&rank, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    MPI_Comm_split(MPI_COMM_WORLD, rank / 2, rank, &pair);
    value = rank;
    MPI_Bcast(&value, 1, MPI_INT, 0, pair);
    for (k = 0; k < 2; k++)
        MPI_Allreduce(&rank, &value, 1, MPI_INT, MPI_SUM, pair);
    MPI_Barrier(pair);
    MPI_Comm_free(&pair);
    printf("ok %d %d %d\n", rank, sum, value);
    fflush(stdout);
    MPI_Finalize();
    return 0;
}
