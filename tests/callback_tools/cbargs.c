/* A callback-interface tool (like cbcount.c) that checks the C arguments tools receive
 * from the call sequence of tests/apps/fortran (use_mpi.F90 as use mpi and as mpif.h,
 * use_mpi_f08.f90 and calls_in_c.c): a Fortran entry point must hand tools real C
 * handles, C sentinels (MPI_IN_PLACE, MPI_STATUS_IGNORE) and C strings, not Fortran
 * values. It intercepts every function of tests/apps/fortran/expected_calls.txt (and
 * MPI_Init_thread), counts calls per function and instance atomically, and checks
 * each argument against what those programs pass; where it can, it also checks the
 * results after the call. Each failed check counts in `bad` and prints one line on
 * stderr. At MPI_Finalize, before calling the next tool, each instance prints
 *   cbargs@<tool_id> rank <r>: bad=<n> MPI_Allreduce=2 MPI_Barrier=1 ...
 * (functions with nonzero counts, by name).
 *
 * The checks use PMPI_ calls, never the chain: a call through the chain would be
 * counted by the tools below (QMPI_TOOL_LIST=cbargs:cbargs must count the app's
 * calls only). An invalid handle may abort in PMPI under MPI_ERRORS_ARE_FATAL: that
 * fails the test as loudly as a `bad` line.
 *
 * Build: mpicc -shared -fPIC -Wall -Wextra -Werror [-include core/qmpi.h] cbargs.c -o libcbargs.so
 * Run:   QMPI_TOOL_LIST=cbargs mpiexec -n 2 ./app   (app linked with -lqmpi, and
 *        LD_PRELOAD=libcbargs.so or linked with -Wl,--no-as-needed -lcbargs) */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Sorted by name: the Finalize line lists them in this order. */
#define FUNCS(X) \
    X(Allreduce, ALLREDUCE) X(Barrier, BARRIER) X(Bcast, BCAST) X(Comm_dup, COMM_DUP) \
    X(Comm_free, COMM_FREE) X(Comm_get_name, COMM_GET_NAME) X(Comm_rank, COMM_RANK) \
    X(Comm_set_name, COMM_SET_NAME) X(Comm_size, COMM_SIZE) X(Comm_split, COMM_SPLIT) \
    X(Finalize, FINALIZE) X(Get_count, GET_COUNT) X(Init, INIT) X(Init_thread, INIT_THREAD) \
    X(Initialized, INITIALIZED) X(Iprobe, IPROBE) X(Irecv, IRECV) X(Isend, ISEND) \
    X(Pcontrol, PCONTROL) X(Probe, PROBE) X(Recv, RECV) X(Send, SEND) X(Test, TEST) X(Type_commit, TYPE_COMMIT) \
    X(Type_contiguous, TYPE_CONTIGUOUS) X(Type_free, TYPE_FREE) X(Waitall, WAITALL) X(Wtime, WTIME)

#define X_INDEX(name, NAME) F_##name,
enum { FUNCS(X_INDEX) NFUNCS };
#define X_NAME(name, NAME) "MPI_" #name,
static const char *const names[NFUNCS] = {FUNCS(X_NAME)};

struct cbargs {
    int id;
    long calls[NFUNCS];
    long bad;
};

/* Opens every handler: s (this instance), fn (its name), next/next_id (the next tool). */
#define ENTER(name, NAME) \
    struct cbargs *s = NULL; \
    const char *fn __attribute__((unused)) = "MPI_" #name; \
    QMPI_##name##_t *next; \
    int next_id; \
    QMPI_Get_tool_storage(context, tool_id, (void **)&s); \
    __atomic_fetch_add(&s->calls[F_##name], 1, __ATOMIC_RELAXED); \
    QMPI_Get_function(tool_id, MPI_##NAME##_T, (void (**)(void))&next, &next_id)

#define CHECK(cond) \
    do { \
        if (!(cond)) \
            bad(s, fn, #cond); \
    } while (0)

static int world_rank(void)
{
    int init = 0, fin = 0, rank = -1;
    PMPI_Initialized(&init);
    PMPI_Finalized(&fin);
    if (init && !fin)
        PMPI_Comm_rank(MPI_COMM_WORLD, &rank);
    return rank;
}

static void bad(struct cbargs *s, const char *fn, const char *what)
{
    __atomic_fetch_add(&s->bad, 1, __ATOMIC_RELAXED);
    fprintf(stderr, "cbargs@%d rank %d: bad %s: %s\n", s->id, world_rank(), fn, what);
}

/* Where the apps pass MPI_COMM_WORLD: the very handle, not only an equal group. */
static int is_world(MPI_Comm comm)
{
    int r = MPI_UNEQUAL;
    return comm == MPI_COMM_WORLD && PMPI_Comm_compare(comm, MPI_COMM_WORLD, &r) == MPI_SUCCESS && r == MPI_IDENT;
}

/* A usable communicator; one as large as the world must share its group. */
static int is_comm(MPI_Comm comm)
{
    int r = MPI_UNEQUAL, size = -1, wsize = -2;
    if (comm == MPI_COMM_NULL || PMPI_Comm_compare(comm, MPI_COMM_WORLD, &r) != MPI_SUCCESS ||
        PMPI_Comm_size(comm, &size) != MPI_SUCCESS || PMPI_Comm_size(MPI_COMM_WORLD, &wsize) != MPI_SUCCESS)
        return 0;
    return size != wsize || r != MPI_UNEQUAL;
}

/* The dup of MPI_COMM_WORLD. */
static int is_dup(MPI_Comm comm)
{
    int r = MPI_UNEQUAL;
    return comm != MPI_COMM_WORLD && PMPI_Comm_compare(comm, MPI_COMM_WORLD, &r) == MPI_SUCCESS && r == MPI_CONGRUENT;
}

static int type_size(MPI_Datatype t)
{
    int size = -1;
    if (t == MPI_DATATYPE_NULL || PMPI_Type_size(t, &size) != MPI_SUCCESS)
        return -1;
    return size;
}

/* The apps send integers, or one element of their 3-integer contiguous type. */
static int is_data_type(MPI_Datatype t, int count)
{
    int size = type_size(t);
    return size == (int)sizeof(int) || (size == 3 * (int)sizeof(int) && count == 1);
}

static int is_status(const MPI_Status *status)
{
    return status != NULL && status != MPI_STATUS_IGNORE;
}

static int cb_Initialized(QMPI_Context context, int tool_id, int *flag)
{
    ENTER(Initialized, INITIALIZED);
    CHECK(flag != NULL);
    return next(context, next_id, flag);
}

static int cb_Init(QMPI_Context context, int tool_id, int *argc, char ***argv)
{
    ENTER(Init, INIT);
    CHECK((argc == NULL) == (argv == NULL)); /* a Fortran entry point has none to pass */
    return next(context, next_id, argc, argv);
}

static int cb_Init_thread(QMPI_Context context, int tool_id, int *argc, char ***argv, int required, int *provided)
{
    int rc;
    ENTER(Init_thread, INIT_THREAD);
    CHECK((argc == NULL) == (argv == NULL));
    CHECK(required == MPI_THREAD_FUNNELED);
    CHECK(provided != NULL);
    rc = next(context, next_id, argc, argv, required, provided);
    CHECK(rc != MPI_SUCCESS || (*provided >= MPI_THREAD_SINGLE && *provided <= MPI_THREAD_MULTIPLE));
    return rc;
}

static int cb_Comm_rank(QMPI_Context context, int tool_id, MPI_Comm comm, int *rank)
{
    ENTER(Comm_rank, COMM_RANK);
    CHECK(is_comm(comm));
    CHECK(rank != NULL);
    return next(context, next_id, comm, rank);
}

static int cb_Comm_size(QMPI_Context context, int tool_id, MPI_Comm comm, int *size)
{
    int rc;
    ENTER(Comm_size, COMM_SIZE);
    CHECK(is_comm(comm));
    CHECK(size != NULL);
    rc = next(context, next_id, comm, size);
    CHECK(rc != MPI_SUCCESS || (*size >= 1 && *size <= 4));
    return rc;
}

static int cb_Bcast(QMPI_Context context, int tool_id, void *buffer, int count, MPI_Datatype datatype, int root,
                    MPI_Comm comm)
{
    ENTER(Bcast, BCAST);
    CHECK(is_world(comm));
    CHECK(buffer != NULL);
    CHECK(count == 10);
    CHECK(type_size(datatype) == (int)sizeof(int));
    CHECK(root == 0);
    return next(context, next_id, buffer, count, datatype, root, comm);
}

static int cb_Send(QMPI_Context context, int tool_id, const void *buf, int count, MPI_Datatype datatype, int dest,
                   int tag, MPI_Comm comm)
{
    ENTER(Send, SEND);
    CHECK(is_world(comm));
    CHECK(buf != NULL);
    CHECK(count == 5 || count == 1);
    CHECK(is_data_type(datatype, count));
    CHECK(tag == 7 || tag == 8 || tag == 10);
    CHECK(dest >= 0 && dest < 4);
    return next(context, next_id, buf, count, datatype, dest, tag, comm);
}

static int cb_Recv(QMPI_Context context, int tool_id, void *buf, int count, MPI_Datatype datatype, int source,
                   int tag, MPI_Comm comm, MPI_Status *status)
{
    int rc;
    ENTER(Recv, RECV);
    CHECK(is_world(comm));
    CHECK(buf != NULL);
    CHECK(count == 5 || count == 1);
    CHECK(is_data_type(datatype, count));
    CHECK(tag == 7 || tag == 8 || tag == 10 || tag == 11);
    CHECK(source >= 0 && source < 4);
    if (tag == 8)
        CHECK(status == MPI_STATUS_IGNORE);
    else
        CHECK(is_status(status));
    rc = next(context, next_id, buf, count, datatype, source, tag, comm, status);
    if (rc == MPI_SUCCESS && is_status(status))
        CHECK(status->MPI_SOURCE == source && status->MPI_TAG == tag);
    return rc;
}

static int cb_Isend(QMPI_Context context, int tool_id, const void *buf, int count, MPI_Datatype datatype, int dest,
                    int tag, MPI_Comm comm, MPI_Request *request)
{
    ENTER(Isend, ISEND);
    CHECK(is_world(comm));
    CHECK(buf != NULL);
    CHECK((count == 3 && tag == 9) || (count == 1 && tag == 11 && dest == world_rank()));
    CHECK(type_size(datatype) == (int)sizeof(int));
    CHECK(request != NULL);
    return next(context, next_id, buf, count, datatype, dest, tag, comm, request);
}

static int cb_Irecv(QMPI_Context context, int tool_id, void *buf, int count, MPI_Datatype datatype, int source,
                    int tag, MPI_Comm comm, MPI_Request *request)
{
    ENTER(Irecv, IRECV);
    CHECK(is_world(comm));
    CHECK(buf != NULL);
    CHECK(count == 3);
    CHECK(type_size(datatype) == (int)sizeof(int));
    CHECK(tag == 9);
    CHECK(source >= 0 && source < 4);
    CHECK(request != NULL);
    return next(context, next_id, buf, count, datatype, source, tag, comm, request);
}

static int cb_Waitall(QMPI_Context context, int tool_id, int count, MPI_Request array_of_requests[],
                      MPI_Status array_of_statuses[])
{
    int rc;
    ENTER(Waitall, WAITALL);
    CHECK(count == 2);
    CHECK(array_of_requests != NULL);
    CHECK(array_of_statuses != NULL && array_of_statuses != MPI_STATUSES_IGNORE);
    rc = next(context, next_id, count, array_of_requests, array_of_statuses);
    /* The apps' first request is the receive, tag 9. */
    if (rc == MPI_SUCCESS && array_of_statuses != NULL && array_of_statuses != MPI_STATUSES_IGNORE)
        CHECK(array_of_statuses[0].MPI_TAG == 9);
    return rc;
}

static int cb_Allreduce(QMPI_Context context, int tool_id, const void *sendbuf, void *recvbuf, int count,
                        MPI_Datatype datatype, MPI_Op op, MPI_Comm comm)
{
    ENTER(Allreduce, ALLREDUCE);
    /* On the world in place; on the parity split from a separate buffer. */
    if (is_world(comm))
        CHECK(sendbuf == MPI_IN_PLACE);
    else
        CHECK(is_comm(comm) && sendbuf != MPI_IN_PLACE && sendbuf != NULL);
    CHECK(recvbuf != NULL && recvbuf != MPI_IN_PLACE);
    CHECK(count == 4);
    CHECK(type_size(datatype) == (int)sizeof(int));
    CHECK(op == MPI_SUM);
    return next(context, next_id, sendbuf, recvbuf, count, datatype, op, comm);
}

static int cb_Comm_split(QMPI_Context context, int tool_id, MPI_Comm comm, int color, int key, MPI_Comm *newcomm)
{
    int rc;
    ENTER(Comm_split, COMM_SPLIT);
    CHECK(is_world(comm));
    CHECK(color == world_rank() % 2);
    CHECK(key == world_rank());
    CHECK(newcomm != NULL);
    rc = next(context, next_id, comm, color, key, newcomm);
    CHECK(rc != MPI_SUCCESS || is_comm(*newcomm));
    return rc;
}

static int cb_Comm_dup(QMPI_Context context, int tool_id, MPI_Comm comm, MPI_Comm *newcomm)
{
    int rc;
    ENTER(Comm_dup, COMM_DUP);
    CHECK(is_world(comm));
    CHECK(newcomm != NULL);
    rc = next(context, next_id, comm, newcomm);
    CHECK(rc != MPI_SUCCESS || is_dup(*newcomm));
    return rc;
}

static int cb_Comm_set_name(QMPI_Context context, int tool_id, MPI_Comm comm, const char *comm_name)
{
    ENTER(Comm_set_name, COMM_SET_NAME);
    CHECK(is_dup(comm));
    CHECK(comm_name != NULL && strcmp(comm_name, "fortran dup") == 0); /* trimmed, NUL-terminated */
    return next(context, next_id, comm, comm_name);
}

static int cb_Comm_get_name(QMPI_Context context, int tool_id, MPI_Comm comm, char *comm_name, int *resultlen)
{
    int rc;
    ENTER(Comm_get_name, COMM_GET_NAME);
    CHECK(is_dup(comm));
    CHECK(comm_name != NULL && resultlen != NULL);
    rc = next(context, next_id, comm, comm_name, resultlen);
    CHECK(rc != MPI_SUCCESS || (*resultlen == 11 && strcmp(comm_name, "fortran dup") == 0));
    return rc;
}

static int cb_Comm_free(QMPI_Context context, int tool_id, MPI_Comm *comm)
{
    int rc;
    ENTER(Comm_free, COMM_FREE);
    CHECK(comm != NULL && *comm != MPI_COMM_NULL && *comm != MPI_COMM_WORLD && is_comm(*comm));
    rc = next(context, next_id, comm);
    CHECK(rc != MPI_SUCCESS || *comm == MPI_COMM_NULL);
    return rc;
}

static int cb_Iprobe(QMPI_Context context, int tool_id, int source, int tag, MPI_Comm comm, int *flag,
                     MPI_Status *status)
{
    int rc;
    ENTER(Iprobe, IPROBE);
    CHECK(is_world(comm));
    CHECK(source == world_rank() && tag == 11);
    CHECK(flag != NULL);
    CHECK(is_status(status));
    rc = next(context, next_id, source, tag, comm, flag, status);
    if (rc == MPI_SUCCESS && flag != NULL && *flag && is_status(status))
        CHECK(status->MPI_SOURCE == source && status->MPI_TAG == tag);
    return rc;
}

static int cb_Probe(QMPI_Context context, int tool_id, int source, int tag, MPI_Comm comm, MPI_Status *status)
{
    int rc;
    ENTER(Probe, PROBE);
    CHECK(is_world(comm));
    CHECK(source == world_rank() && tag == 11);
    CHECK(is_status(status));
    rc = next(context, next_id, source, tag, comm, status);
    if (rc == MPI_SUCCESS && is_status(status))
        CHECK(status->MPI_SOURCE == source && status->MPI_TAG == tag);
    return rc;
}

static int cb_Test(QMPI_Context context, int tool_id, MPI_Request *request, int *flag, MPI_Status *status)
{
    ENTER(Test, TEST);
    CHECK(request != NULL && flag != NULL);
    CHECK(is_status(status));
    return next(context, next_id, request, flag, status);
}

static int cb_Get_count(QMPI_Context context, int tool_id, const MPI_Status *status, MPI_Datatype datatype,
                        int *count)
{
    int rc;
    ENTER(Get_count, GET_COUNT);
    CHECK(is_status(status));
    CHECK(type_size(datatype) == (int)sizeof(int));
    CHECK(count != NULL);
    rc = next(context, next_id, status, datatype, count);
    CHECK(rc != MPI_SUCCESS || *count == 5);
    return rc;
}

static int cb_Type_contiguous(QMPI_Context context, int tool_id, int count, MPI_Datatype oldtype,
                              MPI_Datatype *newtype)
{
    int rc;
    ENTER(Type_contiguous, TYPE_CONTIGUOUS);
    CHECK(count == 3);
    CHECK(type_size(oldtype) == (int)sizeof(int));
    CHECK(newtype != NULL);
    rc = next(context, next_id, count, oldtype, newtype);
    CHECK(rc != MPI_SUCCESS || type_size(*newtype) == 3 * (int)sizeof(int));
    return rc;
}

static int cb_Type_commit(QMPI_Context context, int tool_id, MPI_Datatype *datatype)
{
    ENTER(Type_commit, TYPE_COMMIT);
    CHECK(datatype != NULL && type_size(*datatype) == 3 * (int)sizeof(int));
    return next(context, next_id, datatype);
}

static int cb_Type_free(QMPI_Context context, int tool_id, MPI_Datatype *datatype)
{
    int rc;
    ENTER(Type_free, TYPE_FREE);
    CHECK(datatype != NULL && type_size(*datatype) == 3 * (int)sizeof(int));
    rc = next(context, next_id, datatype);
    CHECK(rc != MPI_SUCCESS || *datatype == MPI_DATATYPE_NULL);
    return rc;
}

static double cb_Wtime(QMPI_Context context, int tool_id)
{
    ENTER(Wtime, WTIME);
    return next(context, next_id);
}

/* MPI_Pcontrol: the core calls every tool itself; no next call (as in cbcount.c). */
static int cb_Pcontrol(QMPI_Context context, int tool_id, const int level, ...)
{
    ENTER(Pcontrol, PCONTROL);
    (void)next;
    (void)next_id;
    CHECK(level == 1);
    return MPI_SUCCESS;
}

static int cb_Barrier(QMPI_Context context, int tool_id, MPI_Comm comm)
{
    ENTER(Barrier, BARRIER);
    CHECK(is_world(comm));
    return next(context, next_id, comm);
}

static int cb_Finalize(QMPI_Context context, int tool_id)
{
    char line[1024]; /* < PIPE_BUF; 27 functions need about 420 */
    int len, i;
    ENTER(Finalize, FINALIZE);
    len = snprintf(line, sizeof line, "cbargs@%d rank %d: bad=%ld", s->id, world_rank(),
                   __atomic_load_n(&s->bad, __ATOMIC_RELAXED));
    for (i = 0; i < NFUNCS && len < (int)sizeof line - 1; i++) {
        long n = __atomic_load_n(&s->calls[i], __ATOMIC_RELAXED);
        if (n)
            len += snprintf(line + len, sizeof line - 1 - len, " %s=%ld", names[i], n);
    }
    if (len > (int)sizeof line - 2)
        len = (int)sizeof line - 2;
    line[len++] = '\n';
    /* One write(2), below PIPE_BUF: stdio split a long printf into two writes, and
     * mpiexec then mixed other ranks' output into the line. */
    fflush(stdout);
    if (write(STDOUT_FILENO, line, len) != len)
        bad(s, fn, "write");
    return next(context, next_id);
}

static void cbargs_init(int tool_id)
{
    struct cbargs *s = calloc(1, sizeof *s);
#define X_REGISTER(name, NAME) QMPI_Register_function(tool_id, MPI_##NAME##_T, (void (*)(void))cb_##name);
    s->id = tool_id;
    QMPI_Register_tool_storage(tool_id, s);
    FUNCS(X_REGISTER)
}

__attribute__((constructor)) static void cbargs_register(void)
{
    QMPI_Register_tool_name("cbargs", cbargs_init);
}
