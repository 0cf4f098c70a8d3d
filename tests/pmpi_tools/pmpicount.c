/* A classic PMPI tool, written the way PMPI tools are written: it defines MPI_X and
 * calls PMPI_X, keeps its counts in globals, asks MPI_Comm_rank itself once MPI is up
 * (a call of its own, which enters the chain at the top, as under PMPI), and prints one
 * line at MPI_Finalize. It knows nothing of QMPI: no qmpi.h, no get_interceptions.
 *
 *   pmpicount rank <rank>: MPI_Barrier=1 MPI_Bcast=1 ... pcontrol_level=2
 *
 * Counts are atomic: exact under MPI_THREAD_MULTIPLE. MPI_Wtime returns a double, and
 * MPI_Pcontrol is variadic: both reach a PMPI tool in the stack as they would alone.
 *
 * COMPILE: mpicc -shared -fPIC -O2 pmpicount.c -o libpmpicount.so
 * RUN:     TOOLS=./libpmpicount.so:./libcounter.so:./libpmpicount.so mpiexec -n 3 ./app
 *          (tests/test_pmpi_tools.py) */
#include <mpi.h>
#include <stdio.h>

enum { INIT, INIT_THREAD, COMM_RANK, COMM_SIZE, SEND, RECV, BCAST, BARRIER, ALLREDUCE, WTIME, PCONTROL, FINALIZE, N };
static const char *const names[N] = {"MPI_Init", "MPI_Init_thread", "MPI_Comm_rank", "MPI_Comm_size", "MPI_Send",
                                     "MPI_Recv", "MPI_Bcast", "MPI_Barrier", "MPI_Allreduce", "MPI_Wtime",
                                     "MPI_Pcontrol", "MPI_Finalize"};
static long counts[N];
static int my_rank = -1;
static int pcontrol_level = -1;

static void count(int which)
{
    __atomic_fetch_add(&counts[which], 1, __ATOMIC_RELAXED);
}

int MPI_Init(int *argc, char ***argv)
{
    int rc = PMPI_Init(argc, argv);
    count(INIT);
    MPI_Comm_rank(MPI_COMM_WORLD, &my_rank);
    return rc;
}

int MPI_Init_thread(int *argc, char ***argv, int required, int *provided)
{
    int rc = PMPI_Init_thread(argc, argv, required, provided);
    count(INIT_THREAD);
    MPI_Comm_rank(MPI_COMM_WORLD, &my_rank);
    return rc;
}

int MPI_Comm_rank(MPI_Comm comm, int *rank)
{
    count(COMM_RANK);
    return PMPI_Comm_rank(comm, rank);
}

int MPI_Comm_size(MPI_Comm comm, int *size)
{
    count(COMM_SIZE);
    return PMPI_Comm_size(comm, size);
}

int MPI_Send(const void *buf, int n, MPI_Datatype type, int dest, int tag, MPI_Comm comm)
{
    count(SEND);
    return PMPI_Send(buf, n, type, dest, tag, comm);
}

int MPI_Recv(void *buf, int n, MPI_Datatype type, int source, int tag, MPI_Comm comm, MPI_Status *status)
{
    count(RECV);
    return PMPI_Recv(buf, n, type, source, tag, comm, status);
}

int MPI_Bcast(void *buf, int n, MPI_Datatype type, int root, MPI_Comm comm)
{
    count(BCAST);
    return PMPI_Bcast(buf, n, type, root, comm);
}

int MPI_Barrier(MPI_Comm comm)
{
    count(BARRIER);
    return PMPI_Barrier(comm);
}

int MPI_Allreduce(const void *in, void *out, int n, MPI_Datatype type, MPI_Op op, MPI_Comm comm)
{
    count(ALLREDUCE);
    return PMPI_Allreduce(in, out, n, type, op, comm);
}

double MPI_Wtime(void)
{
    count(WTIME);
    return PMPI_Wtime();
}

int MPI_Pcontrol(const int level, ...)
{
    count(PCONTROL);
    __atomic_store_n(&pcontrol_level, level, __ATOMIC_RELAXED);
    return PMPI_Pcontrol(level);
}

int MPI_Finalize(void)
{
    char line[1024];
    int used, k;

    count(FINALIZE);
    used = snprintf(line, sizeof line, "pmpicount rank %d:", my_rank);
    for (k = 0; k < N; k++)
        if (counts[k] != 0)
            used += snprintf(line + used, sizeof line - (size_t)used, " %s=%ld", names[k], counts[k]);
    printf("%s pcontrol_level=%d\n", line, pcontrol_level);
    fflush(stdout);
    return PMPI_Finalize();
}
