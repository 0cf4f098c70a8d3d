/* say.h: the trace tool's lines on stderr. */
#ifndef QMPI_TRACE_SAY_H
#define QMPI_TRACE_SAY_H
#include "state.h"

/* "qmpi trace (level L, rank R): WHAT PATH: strerror(errno); tracing stops for this
 * instance", and the instance stops. */
HIDDEN void trace_complain(struct instance *in, const char *what, const char *path);

#endif
