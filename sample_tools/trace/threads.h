/* threads.h: each thread's buffer and file, per instance. */
#ifndef QMPI_TRACE_THREADS_H
#define QMPI_TRACE_THREADS_H
#include "state.h"

/* The calling thread's buffer for `in`, created (with its file) on first use; NULL if
 * this thread cannot be traced. */
HIDDEN struct thread_buffer *trace_thread_buffer(struct instance *in);
/* The instance's pthread key: a thread's buffers are written out when it exits. */
HIDDEN void trace_threads_start(struct instance *in);

#endif
