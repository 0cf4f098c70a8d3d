/* say.h: the trace tool's lines on stderr, each written whole (one write) and escaped:
 * a byte that is not printable ASCII, in a path or a variable's value, is written as
 * \xHH, so no value can split a line, forge another, or reach the terminal raw. */
#ifndef QMPI_TRACE_SAY_H
#define QMPI_TRACE_SAY_H
#include "state.h"

/* "qmpi trace: MESSAGE" (printf's format). */
HIDDEN void trace_say(const char *format, ...) __attribute__((format(printf, 1, 2)));
/* "qmpi trace (level L, rank R): WHAT PATH: strerror(errno); tracing stops for this
 * instance", and the instance stops. */
HIDDEN void trace_complain(struct instance *in, const char *what, const char *path);
/* "qmpi trace (level L, rank R, thread T): WHAT DIR/NAME: strerror(errno); tracing of this
 * thread stops after N calls (the run goes on)". */
HIDDEN void trace_say_thread(struct instance *in, int thread, const char *what, const char *name, uint64_t calls);

#endif
