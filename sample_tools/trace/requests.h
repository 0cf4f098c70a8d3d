/* requests.h: the wrappers of the functions that start, complete, cancel and free
 * requests (requests.c), for get_interceptions. */
#ifndef QMPI_TRACE_REQUESTS_H
#define QMPI_TRACE_REQUESTS_H
#include "state.h"

/* 1 if requests.c wraps core function `index`. */
HIDDEN int trace_own_function(int index);
/* The name of its wrapper ("NULL" for any other function). */
HIDDEN char *trace_requests_interception(int index);

#endif
