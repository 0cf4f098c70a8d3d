/* MPI_THREAD_MULTIPLE stress for stacked tools, on exactly 2 ranks. THREADS threads per
 * rank first race each other into MPI before MPI_Init_thread (MPI_Initialized: the
 * core builds the chain, tools create their contexts), then, once the main thread has
 * initialised MPI, each does `iterations` rounds of RANK_CALLS MPI_Comm_rank (cheap
 * calls, so that tools' wrappers really run at the same time), MPI_Pcontrol(1) and a
 * Send/Recv pair with the other rank (tag = thread). The main thread then calls
 * MPI_Comm_rank and MPI_Pcontrol(2) once more. Every tool must count exactly.
 *
 * QMPIGEN: qmpigen build-core --mpi-header auto -o core && make -C core
 * COMPILE: mpicc thread_stress.c -o thread_stress -pthread -Lcore -lqmpi -Wl,-rpath,core
 * RUN:     TOOLS=libcounter.so:libprofiler.so:libcounter.so mpiexec -n 2 ./thread_stress [iterations]
 *          (tests/test_threads.py) */
#include <mpi.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#define THREADS 4
#define RANK_CALLS 8

static pthread_barrier_t start_line;
static pthread_mutex_t mpi_up_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t mpi_up_signal = PTHREAD_COND_INITIALIZER;
static int mpi_up;
static int iterations = 5000;

struct worker {
    pthread_t thread;
    int tag;
    int errors;
};

static void *work(void *arg)
{
    struct worker *self = arg;
    int rank = -1, flag = 1, i, k;

    pthread_barrier_wait(&start_line);
    MPI_Initialized(&flag); /* the first MPI call of the process, from THREADS threads at once */
    if (flag)
        self->errors++;
    pthread_mutex_lock(&mpi_up_lock);
    while (!mpi_up)
        pthread_cond_wait(&mpi_up_signal, &mpi_up_lock);
    pthread_mutex_unlock(&mpi_up_lock);

    for (i = 0; i < iterations; i++) {
        int value = i, peer;
        for (k = 0; k < RANK_CALLS; k++)
            MPI_Comm_rank(MPI_COMM_WORLD, &rank);
        MPI_Pcontrol(1);
        peer = 1 - rank;
        if (rank == 0) {
            MPI_Send(&value, 1, MPI_INT, peer, self->tag, MPI_COMM_WORLD);
            MPI_Recv(&value, 1, MPI_INT, peer, self->tag, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        } else {
            MPI_Recv(&value, 1, MPI_INT, peer, self->tag, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            MPI_Send(&value, 1, MPI_INT, peer, self->tag, MPI_COMM_WORLD);
        }
        if (value != i)
            self->errors++;
    }
    return NULL;
}

int main(int argc, char **argv)
{
    struct worker workers[THREADS];
    int provided = 0, rank = -1, size = 0, errors = 0, k;

    if (argc > 1)
        iterations = atoi(argv[1]);
    pthread_barrier_init(&start_line, NULL, THREADS);
    for (k = 0; k < THREADS; k++) {
        workers[k].tag = k;
        workers[k].errors = 0;
        pthread_create(&workers[k].thread, NULL, work, &workers[k]);
    }
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (provided < MPI_THREAD_MULTIPLE || size != 2) {
        fprintf(stderr, "thread_stress: needs MPI_THREAD_MULTIPLE (got %d) and 2 ranks (got %d)\n", provided, size);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    pthread_mutex_lock(&mpi_up_lock);
    mpi_up = 1;
    pthread_cond_broadcast(&mpi_up_signal);
    pthread_mutex_unlock(&mpi_up_lock);
    for (k = 0; k < THREADS; k++) {
        pthread_join(workers[k].thread, NULL);
        errors += workers[k].errors;
    }
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Pcontrol(2);
    printf("app rank %d: threads %d iterations %d rank_calls %d errors %d\n", rank, THREADS, iterations, RANK_CALLS,
           errors);
    fflush(stdout);
    MPI_Finalize();
    return errors != 0;
}
