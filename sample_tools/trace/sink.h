/* sink.h: where a thread's records go: its buffer, written to its rank file when full.
 * The buffer is the page of the rank file's tail file after its header, mapped shared:
 * what is in it when the process dies (SIGKILL included) stays in the file system, and
 * `qmpigen trace` reads it after the rank file's bytes (docs/trace-format.md). Where a
 * tail file cannot be had (a network file system, QMPI_TRACE_FLUSH=full or record), the
 * buffer is heap memory, as before version 6. */
#ifndef QMPI_TRACE_SINK_H
#define QMPI_TRACE_SINK_H
#include "state.h"

/* The thread's buffer for its new rank file (`fd`, named `name` in the trace directory):
 * the header written, the tail file made (or heap memory, and `why` says so); -1 (and a
 * line) if the rank file cannot be written. */
HIDDEN int trace_sink_open(struct instance *in, struct thread_buffer *tb, int fd, char *name, const char **why);
HIDDEN void trace_append(struct instance *in, struct thread_buffer *tb, const void *record, size_t size);
HIDDEN void trace_append_variable(struct instance *in, struct thread_buffer *tb, int kind, const void *fixed,
                                  size_t fixed_size, const void *tail, size_t tail_size);
/* Room for `size` bytes of records and the file's end: a flush when the buffer is too full
 * to hold them, and after each record with QMPI_TRACE_FLUSH=record. */
HIDDEN void trace_make_room(struct instance *in, struct thread_buffer *tb, size_t size);
/* A timer record into the buffer (room for it is kept: RESERVED_BYTES). */
HIDDEN void trace_add_timer(struct thread_buffer *tb);
/* The buffer written out (a thread's exit). */
HIDDEN void trace_flush(struct instance *in, struct thread_buffer *tb);
/* The file finished: a timer and the END record, written out, closed; the tail file,
 * written out, removed. */
HIDDEN void trace_sink_close(struct instance *in, struct thread_buffer *tb);

#endif
