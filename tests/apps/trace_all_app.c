/* QMPI_TRACE_FUNCTIONS=all (tests/test_trace.py): MPI functions outside the trace tool's
 * own table, called a known number of times, from THREADS threads per rank
 * (MPI_THREAD_MULTIPLE: each thread writes its own trace file) and from the main thread:
 * datatypes, groups, MPI_Wtime, MPI_Sendrecv and MPI_Get_count; MPI_Error_class called
 * inside MPI_Comm_call_errhandler (by the error handler: a nested call, depth 1); one
 * MPI_Type_size that fails (MPI_DATATYPE_NULL, errors returned). Every MPI call after
 * MPI_Init_thread and before MPI_Finalize is counted; prints
 * "calls <rank> <function> <n>", the truth the traces are checked against, and
 * "failed <rank> <1 if the failing call failed>".
 * COMPILE: mpicc trace_all_app.c -o trace_all_app -lqmpi -lpthread   RUN: mpiexec -n 2 */
#include <mpi.h>
#include <pthread.h>
#include <stdio.h>

#define THREADS 3
#define HANDLED 3 /* MPI_Comm_call_errhandler calls */

enum {
    COMM_RANK, COMM_SIZE, WTIME, TYPE_CONTIGUOUS, TYPE_COMMIT, TYPE_SIZE, TYPE_FREE, COMM_GROUP, GROUP_SIZE,
    GROUP_FREE, SENDRECV, GET_COUNT, CREATE_ERRHANDLER, SET_ERRHANDLER, CALL_ERRHANDLER, ERROR_CLASS,
    ERRHANDLER_FREE, N
};
static const char *const names[N] = {
    "MPI_Comm_rank", "MPI_Comm_size", "MPI_Wtime", "MPI_Type_contiguous", "MPI_Type_commit", "MPI_Type_size",
    "MPI_Type_free", "MPI_Comm_group", "MPI_Group_size", "MPI_Group_free", "MPI_Sendrecv", "MPI_Get_count",
    "MPI_Comm_create_errhandler", "MPI_Comm_set_errhandler", "MPI_Comm_call_errhandler", "MPI_Error_class",
    "MPI_Errhandler_free"};
static _Atomic int calls[N];
static int rounds; /* per thread: differs per rank */

static void *work(void *arg)
{
    MPI_Datatype type;
    MPI_Group group;
    int i, size, members;
    double t = 0;
    (void)arg;
    for (i = 0; i < rounds; i++) {
        t += MPI_Wtime(), calls[WTIME]++;
        MPI_Type_contiguous(2, MPI_INT, &type), calls[TYPE_CONTIGUOUS]++;
        MPI_Type_commit(&type), calls[TYPE_COMMIT]++;
        MPI_Type_size(type, &size), calls[TYPE_SIZE]++;
        MPI_Type_free(&type), calls[TYPE_FREE]++;
        MPI_Comm_group(MPI_COMM_WORLD, &group), calls[COMM_GROUP]++;
        MPI_Group_size(group, &members), calls[GROUP_SIZE]++;
        MPI_Group_free(&group), calls[GROUP_FREE]++;
    }
    return t > 0 && size == 2 * (int)sizeof(int) ? NULL : arg;
}

static void on_error(MPI_Comm *comm, int *code, ...)
{
    int error_class;
    (void)comm;
    MPI_Error_class(*code, &error_class), calls[ERROR_CLASS]++;
}

int main(int argc, char **argv)
{
    pthread_t threads[THREADS];
    MPI_Errhandler handler;
    MPI_Status status;
    int provided, rank, size, i, out, in, count, failed;

    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    if (provided < MPI_THREAD_MULTIPLE) {
        fprintf(stderr, "trace_all_app: MPI_THREAD_MULTIPLE not provided\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    MPI_Comm_rank(MPI_COMM_WORLD, &rank), calls[COMM_RANK]++;
    MPI_Comm_size(MPI_COMM_WORLD, &size), calls[COMM_SIZE]++;
    rounds = 20 + 7 * rank;

    for (i = 0; i < THREADS; i++)
        pthread_create(&threads[i], NULL, work, NULL);
    for (i = 0; i < THREADS; i++)
        pthread_join(threads[i], NULL);

    /* a ring exchange, and the size of what arrived */
    for (i = 0; i < 3; i++) {
        out = rank;
        MPI_Sendrecv(&out, 1, MPI_INT, (rank + 1) % size, 5, &in, 1, MPI_INT, (rank + size - 1) % size, 5,
                     MPI_COMM_WORLD, &status), calls[SENDRECV]++;
        MPI_Get_count(&status, MPI_INT, &count), calls[GET_COUNT]++;
    }
    /* calls made inside a call: the handler runs within MPI_Comm_call_errhandler */
    MPI_Comm_create_errhandler(on_error, &handler), calls[CREATE_ERRHANDLER]++;
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, handler), calls[SET_ERRHANDLER]++;
    for (i = 0; i < HANDLED; i++)
        MPI_Comm_call_errhandler(MPI_COMM_WORLD, MPI_ERR_OTHER), calls[CALL_ERRHANDLER]++;
    /* a call that fails, its error returned (raised on MPI_COMM_WORLD or, MPI 4, MPI_COMM_SELF) */
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN), calls[SET_ERRHANDLER]++;
    MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN), calls[SET_ERRHANDLER]++;
    MPI_Errhandler_free(&handler), calls[ERRHANDLER_FREE]++;
    failed = MPI_Type_size(MPI_DATATYPE_NULL, &size) != MPI_SUCCESS, calls[TYPE_SIZE]++;

    for (i = 0; i < N; i++)
        printf("calls %d %s %d\n", rank, names[i], calls[i]);
    printf("failed %d %d\n", rank, failed);
    fflush(stdout);
    MPI_Finalize();
    return 0;
}
