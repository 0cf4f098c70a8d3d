/* signals.h: the fatal signals a trace records (signals.c). */
#ifndef QMPI_TRACE_SIGNALS_H
#define QMPI_TRACE_SIGNALS_H
#include "state.h"

/* The tool's handler for the fatal signals whose handling it can chain to (once per
 * process, after MPI_Init, so it runs before the MPI's own handlers). */
HIDDEN void trace_signals_start(void);
/* The handlers as they were, where the tool's is still the one installed (at the last
 * instance's MPI_Finalize). */
HIDDEN void trace_signals_stop(void);

#endif
