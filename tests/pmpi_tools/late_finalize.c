/* A PMPI tool that finalizes MPI from an exit handler, as IPM does: its MPI_Finalize
 * returns at once, and an atexit handler registered at MPI_Init calls PMPI_Finalize
 * while the process exits. The levels below it (TOOLS=liblate_finalize.so:libtrace.so)
 * then finalize at exit, where on the MPICH wheel a rank may never return from
 * PMPI_Finalize (tests/test_trace_death.py).
 *
 * COMPILE: mpicc -shared -fPIC -O2 late_finalize.c -o liblate_finalize.so
 * RUN:     TOOLS=./liblate_finalize.so:./libtrace.so mpiexec -n 2 ./trace_death finish 100 */
#include <mpi.h>
#include <stdlib.h>

static void finalize_at_exit(void)
{
    PMPI_Finalize();
}

int MPI_Init(int *argc, char ***argv)
{
    int rc = PMPI_Init(argc, argv);
    atexit(finalize_at_exit);
    return rc;
}

int MPI_Init_thread(int *argc, char ***argv, int required, int *provided)
{
    int rc = PMPI_Init_thread(argc, argv, required, provided);
    atexit(finalize_at_exit);
    return rc;
}

int MPI_Finalize(void)
{
    return MPI_SUCCESS;
}
