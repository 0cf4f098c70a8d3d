/* An application that knows nothing of QMPI: broadcast, barrier, Wtime, Pcontrol.
 * Prints one line per rank that the tests check. */
#include <mpi.h>
#include <stdio.h>

int main(int argc, char **argv)
{
    int rank, size, data[4] = {0, 0, 0, 0}, flag = 0;
    double t0, t;

    MPI_Initialized(&flag);
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    t0 = MPI_Wtime(); /* Open MPI 4 counts from the first call: 0.0 is valid */
    if (rank == 0) {
        data[0] = 11;
        data[1] = 22;
        data[2] = 33;
        data[3] = size;
    }
    MPI_Bcast(data, 4, MPI_INT, 0, MPI_COMM_WORLD);
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Pcontrol(2);
    t = MPI_Wtime();
    printf("app rank %d of %d: data %d %d %d %d wtime_ok %d\n", rank, size, data[0], data[1], data[2], data[3],
           t0 >= 0.0 && t >= t0);
    fflush(stdout);
    MPI_Finalize();
    return 0;
}
