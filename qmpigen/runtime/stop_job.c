/* stop_job.c: stopping the whole job after the core's error line (errors.c). */
#define _GNU_SOURCE
#include "qmpi_internal.h"

#include <stdio.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* Under a launcher, stderr is a pipe to its forwarding daemon. MPI_Abort makes the
 * launcher kill the daemons, and one that handles the abort before reading the pipe
 * drops the error line (seen with Debian's MPICH 4.0.2 hydra in CI): wait, at most
 * 2 s, until the pipe is empty, i.e. the daemon has taken the line. */
static void qmpi_wait_stderr_taken(void)
{
    const struct timespec millisecond = {0, 1000000};
    struct stat stderr_stat;
    int waited, unread;

    if (fstat(STDERR_FILENO, &stderr_stat) != 0 || !S_ISFIFO(stderr_stat.st_mode))
        return;
    for (waited = 0; waited < 2000; waited++) {
        if (ioctl(STDERR_FILENO, FIONREAD, &unread) != 0 || unread <= 0)
            return;
        nanosleep(&millisecond, NULL);
    }
}

QMPI_HIDDEN void qmpi_stop_job(void)
{
    int initialized = 0, finalized = 0;

    fflush(NULL);
    qmpi_wait_stderr_taken();
    if (PMPI_Initialized(&initialized) == MPI_SUCCESS && initialized)
        PMPI_Finalized(&finalized);
    /* Ranks that are fine wait for this one inside MPI_Init or a collective, and a
     * launcher does not always end the job when a rank exits before MPI_Init (MPICH's
     * hydra waits forever). So initialize if need be, then MPI_Abort: every launcher
     * ends the whole job on that. */
    if (!initialized && PMPI_Init(NULL, NULL) == MPI_SUCCESS)
        initialized = 1;
    if (initialized && !finalized)
        PMPI_Abort(MPI_COMM_WORLD, 1);
    _exit(1);
}
