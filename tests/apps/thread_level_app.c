/* The application of tests/test_thread_limit.py: asks MPI_Init_thread for the level in
 * argv[1] (0-3: single .. multiple) and prints what it got, and what MPI_Query_thread
 * says: "RANK <r> provided <n> query <m>".
 * COMPILE: mpicc thread_level_app.c -o thread_level_app -lqmpi   RUN: mpiexec -n 2 ./thread_level_app 3 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
    static const int levels[] = {MPI_THREAD_SINGLE, MPI_THREAD_FUNNELED, MPI_THREAD_SERIALIZED, MPI_THREAD_MULTIPLE};
    int asked = argc > 1 ? atoi(argv[1]) : 3, provided = -1, query = -1, rank = -1;

    MPI_Init_thread(&argc, &argv, levels[asked < 0 || asked > 3 ? 3 : asked], &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Query_thread(&query);
    printf("RANK %d provided %d query %d\n", rank, provided, query);
    fflush(stdout);
    MPI_Finalize();
    return 0;
}
