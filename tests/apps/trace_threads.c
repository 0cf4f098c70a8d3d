/* MPI_THREAD_MULTIPLE under the trace tool (tests/test_trace.py): THREADS threads per
 * rank each exchange ROUNDS messages with the same thread of the partner rank
 * (rank ^ 1), tag = thread index. Prints "calls <rank> <function> <n>".
 * COMPILE: mpicc trace_threads.c -o trace_threads -lqmpi -lpthread   RUN: mpiexec -n 2 */
#include <mpi.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#define THREADS 4
#define ROUNDS 250

static int rank;

static void *exchange(void *arg)
{
    int tag = (int)(long)arg, round, token = 0;
    for (round = 0; round < ROUNDS; round++) {
        if (rank % 2 == 0) {
            MPI_Send(&round, 1, MPI_INT, rank ^ 1, tag, MPI_COMM_WORLD);
            MPI_Recv(&token, 1, MPI_INT, rank ^ 1, tag, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        } else {
            MPI_Recv(&token, 1, MPI_INT, rank ^ 1, tag, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            MPI_Send(&round, 1, MPI_INT, rank ^ 1, tag, MPI_COMM_WORLD);
        }
    }
    return NULL;
}

int main(int argc, char **argv)
{
    pthread_t threads[THREADS];
    int provided, i;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    if (provided < MPI_THREAD_MULTIPLE) {
        fprintf(stderr, "trace_threads: MPI_THREAD_MULTIPLE not provided\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    for (i = 0; i < THREADS; i++)
        pthread_create(&threads[i], NULL, exchange, (void *)(long)i);
    for (i = 0; i < THREADS; i++)
        pthread_join(threads[i], NULL);
    printf("calls %d MPI_Send %d\ncalls %d MPI_Recv %d\n", rank, THREADS * ROUNDS, rank, THREADS * ROUNDS);
    fflush(stdout);
    MPI_Finalize();
    return 0;
}
