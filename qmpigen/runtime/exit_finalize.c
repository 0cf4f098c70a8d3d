/* exit_finalize.c: tools that finalize MPI from an exit handler.
 *
 * IPM (DELAYED_MPI_FINALIZE, its default) returns from MPI_Finalize at once and calls
 * PMPI_Finalize from an atexit handler, after it has reduced its statistics with MPI.
 * Two such tools in one chain, or one above a tool that also finalizes there, then meet
 * at exit in the order the C library runs exit handlers (the last registered first):
 * the lower tool's handler finalizes MPI, and the upper one's, run next, calls MPI after
 * it was finalized. So once the application's MPI_Finalize has returned with MPI still
 * initialised, the core watches the exit: a finalize that reaches the end of the chain
 * from an exit handler is put off until every handler has run (the core's destructor,
 * run after all of them), and every tool's handler finds MPI as it left it. */
#define _GNU_SOURCE
#include "qmpi_internal.h"

#include <stdlib.h>

#ifdef QMPI_HAS_FINALIZE
static int qmpi_exit_watched, qmpi_exiting, qmpi_finalize_put_off;

static void qmpi_exit_begins(void)
{
    __atomic_store_n(&qmpi_exiting, 1, __ATOMIC_RELEASE);
}

/* The application's MPI_Finalize returned (the chained path). Registered now, after
 * every tool registered its handlers in MPI_Init, the core's handler runs before theirs. */
QMPI_HIDDEN void qmpi_finalize_returned(void)
{
    int finalized = 0;

    if (PMPI_Finalized(&finalized) != MPI_SUCCESS || finalized || qmpi_exit_watched++)
        return;
    if (atexit(qmpi_exit_begins) != 0)
        qmpi_warnf("a tool put MPI_Finalize off to an exit handler, and the core cannot watch the exit (atexit "
                   "failed): tools above it may call MPI after it is finalized");
}

QMPI_HIDDEN int qmpi_end_of_finalize(void)
{
    if (!__atomic_load_n(&qmpi_exiting, __ATOMIC_ACQUIRE))
        return PMPI_Finalize();
    qmpi_finalize_put_off = 1;
    return MPI_SUCCESS;
}

__attribute__((destructor)) static void qmpi_finalize_after_exit_handlers(void)
{
    int finalized = 0;

    if (qmpi_finalize_put_off && PMPI_Finalized(&finalized) == MPI_SUCCESS && !finalized)
        PMPI_Finalize();
}
#endif /* QMPI_HAS_FINALIZE */
