/* threads.c: the thread level the stack of tools supports. */
#define _GNU_SOURCE
#include "qmpi_internal.h"

#include <pthread.h>
#include <stdio.h>

/* Tools that are not thread-safe say which level they support (PnMPI's
 * PNMPI_SupportedThreadingLevel): a thesis-style tool by exporting qmpi_thread_level
 * (QMPI_THREAD_LEVEL in qmpi.h), read when it is loaded; any tool by calling
 * QMPI_Set_thread_level, a callback tool from its init function. MPI_Init_thread's end
 * link then asks MPI for at most the lowest level and returns at most that as
 * `provided`; tools that say nothing support every level. */
static int qmpi_thread_cap = MPI_THREAD_MULTIPLE;
static int qmpi_thread_cap_level;  /* the level that declared it, 0 for none */
static int qmpi_thread_asked = -1; /* what the application asked for, for QMPI_VERBOSE */

static const char *qmpi_thread_level_name(int thread_level)
{
    switch (thread_level) {
    case MPI_THREAD_SINGLE:
        return "MPI_THREAD_SINGLE";
    case MPI_THREAD_FUNNELED:
        return "MPI_THREAD_FUNNELED";
    case MPI_THREAD_SERIALIZED:
        return "MPI_THREAD_SERIALIZED";
    case MPI_THREAD_MULTIPLE:
        return "MPI_THREAD_MULTIPLE";
    default:
        return NULL;
    }
}

int QMPI_Set_thread_level(int level, int thread_level)
{
    if (qmpi_thread_level_name(thread_level) == NULL)
        qmpi_fatalf("level %d declared thread level %d, which is none of MPI_THREAD_SINGLE, _FUNNELED, _SERIALIZED, "
                    "_MULTIPLE",
                    level, thread_level);
    pthread_mutex_lock(&qmpi_registry_lock);
    if (thread_level < qmpi_thread_cap) {
        qmpi_thread_cap = thread_level;
        qmpi_thread_cap_level = level;
    }
    pthread_mutex_unlock(&qmpi_registry_lock);
    return MPI_SUCCESS;
}

/* The level MPI is asked for: the application's, at most the stack's. */
QMPI_HIDDEN int qmpi_capped_thread_level(int required)
{
    qmpi_thread_asked = required;
    return required > qmpi_thread_cap ? qmpi_thread_cap : required;
}

QMPI_HIDDEN void qmpi_cap_provided(int *provided)
{
    if (provided != NULL && *provided > qmpi_thread_cap)
        *provided = qmpi_thread_cap;
}

/* With QMPI_VERBOSE, world rank 0 says once when the stack lowered the level. */
QMPI_HIDDEN void qmpi_report_thread_cap(int rank)
{
    static int reported;

    if (rank != 0 || qmpi_thread_asked <= qmpi_thread_cap || __atomic_exchange_n(&reported, 1, __ATOMIC_ACQ_REL))
        return;
    fprintf(stderr,
            "qmpi: thread level: MPI_Init_thread asked for %s; level %d (%s%s) supports %s, so MPI was asked "
            "for that\n",
            qmpi_thread_level_name(qmpi_thread_asked) ? qmpi_thread_level_name(qmpi_thread_asked) : "?",
            qmpi_thread_cap_level, qmpi_levels[qmpi_thread_cap_level].kind == QMPI_CALLBACK_LEVEL ? "@" : "",
            qmpi_chain.items[qmpi_thread_cap_level]->path, qmpi_thread_level_name(qmpi_thread_cap));
}
