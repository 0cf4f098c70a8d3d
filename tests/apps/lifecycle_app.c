/* MPI_Initialized before MPI_Init, Pcontrol with a variadic tail, MPI_Wtime printed
 * exactly, MPI_Finalized after MPI_Finalize. */
#include <mpi.h>
#include <stdio.h>

int main(int argc, char **argv)
{
    int flag = -1, rank = 0, size = 0;
    double t;

    MPI_Initialized(&flag);
    printf("initialized before init %d\n", flag);
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Pcontrol(5, 42, "hello");
    MPI_Pcontrol(0);
    t = MPI_Wtime();
    printf("rank %d of %d wtime %a\n", rank, size, t);
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Finalize();
    flag = -1;
    MPI_Finalized(&flag);
    printf("finalized after finalize %d\n", flag);
    return 0;
}
