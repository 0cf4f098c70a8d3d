/* clocks.h: the clocks of a rank, and its run's identity. */
#ifndef QMPI_TRACE_CLOCKS_H
#define QMPI_TRACE_CLOCKS_H
#include "state.h"

/* A CLOCK record: this rank's clock offset to world rank 0's, by PMPI ping-pong on a
 * duplicate of MPI_COMM_WORLD (our own context: the application's tags are safe); phase
 * 0 at MPI_Init, 1 at MPI_Finalize. */
HIDDEN void trace_measure_clock(struct instance *in, uint32_t phase);
/* A second timer record CALIBRATION_NS after the thread's first: the merge converts ticks
 * to ns by the line through a rank's first and last timer records, and a rank that dies
 * early may have no other. */
HIDDEN void trace_calibrate(struct instance *in);
/* The run's identity in every rank file's header: world rank 0 draws it, every rank gets
 * it (a collective on MPI_COMM_WORLD right after MPI_Init, the same on every rank). */
HIDDEN uint64_t trace_run_identity(int rank);
/* A Sessions-model run's identity, with no communication: from the launcher's name for
 * the job where it gives one (PMIx's namespace, Slurm's job and step), else 0. */
HIDDEN uint64_t trace_launcher_identity(void);

#endif
