/* A PMPI tool that does MPI work in its MPI_Finalize before it finalizes, as Darshan does
 * when it writes its log: a communicator of its own, a reduction on it. Its calls by MPI_
 * names come back through the chain's top, so a trace tool above it
 * (TOOLS=libtrace.so:libfinalize_work.so) sees them while its own MPI_Finalize is under
 * way (tests/test_trace_death.py).
 *
 * COMPILE: mpicc -shared -fPIC -O2 finalize_work.c -o libfinalize_work.so */
#include <mpi.h>

int MPI_Finalize(void)
{
    MPI_Comm own;
    int one = 1, sum = 0;
    if (MPI_Comm_dup(MPI_COMM_WORLD, &own) == MPI_SUCCESS) {
        MPI_Allreduce(&one, &sum, 1, MPI_INT, MPI_SUM, own);
        MPI_Comm_free(&own);
    }
    return PMPI_Finalize();
}
