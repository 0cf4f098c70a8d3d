/* sink.h: where a thread's records go: its buffer, written to its rank file when full. */
#ifndef QMPI_TRACE_SINK_H
#define QMPI_TRACE_SINK_H
#include "state.h"

HIDDEN void trace_append(struct instance *in, struct thread_buffer *tb, const void *record, size_t size);
HIDDEN void trace_append_variable(struct instance *in, struct thread_buffer *tb, int kind, const void *fixed,
                                  size_t fixed_size, const void *tail, size_t tail_size);
/* A timer record into the buffer (room for it is kept: see trace_append). */
HIDDEN void trace_add_timer(struct thread_buffer *tb);
/* The buffer written out (a thread's exit). */
HIDDEN void trace_flush(struct instance *in, struct thread_buffer *tb);
/* The file finished: a timer and the END record, written out, closed. */
HIDDEN void trace_sink_close(struct instance *in, struct thread_buffer *tb);

/* A record of a size known at compile time (the copy is inlined) into the thread's buffer;
 * trace_append when the buffer is due for a flush. */
static inline void trace_put(struct instance *in, struct thread_buffer *tb, const void *record, size_t size)
{
    if (__builtin_expect(
            tb->used + size + RESERVED_BYTES > trace_options.buffer_bytes || trace_options.flush_every_record, 0)) {
        trace_append(in, tb, record, size);
        return;
    }
    memcpy(tb->data + tb->used, record, size);
    tb->used += size;
}

#endif
