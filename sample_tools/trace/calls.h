/* calls.h: a traced call's start and end, shared by every wrapper: the hand-written ones
 * (requests.c, lifecycle.c), the generated ones by role (record.h) and the bare ones of
 * QMPI_TRACE_FUNCTIONS=all. trace_open, inline, is what every traced call does first. */
#ifndef QMPI_TRACE_CALLS_H
#define QMPI_TRACE_CALLS_H
#include "state.h"
#include "threads.h"

/* The FUNCTION record of core function `index`, before its first call in this file. */
HIDDEN void trace_name_function(struct instance *in, struct thread_buffer *tb, int index, int kind);
/* Starts recording core function `index` of `kind` at `level`; 0 if this call is not to
 * be recorded (tracing is off, or nested calls are not wanted). */
HIDDEN int trace_begin(struct traced *t, int level, int index, int kind);
/* The call's record, packed, into the thread's buffer. */
HIDDEN void trace_end(struct traced *t, int failed);

/* What every traced call does first (trace_begin, trace_args_begin, trace_all_begin): the
 * calling thread's buffer for `level` (NULL: this call is not recorded: tracing is off, or
 * nested calls are not wanted), the thread's state and the call's depth; the call is
 * pushed on the thread's open calls. The caller reads the enter ticks next. */
static inline struct thread_buffer *trace_open(int level, int index, int kind, struct thread_state **ts_out,
                                               uint8_t *depth_out)
{
    struct instance *in;
    struct thread_state *ts;
    struct thread_buffer *tb;
    int depth;
    if ((unsigned)level >= MAX_LEVELS || !__atomic_load_n(&(in = &trace_instances[level])->active, __ATOMIC_ACQUIRE))
        return NULL;
    if (__builtin_expect((ts = trace_thread_self) == NULL, 0))
        ts = trace_thread_self = &trace_thread;
    depth = trace_call_depth(ts, index);
    if (depth > 0 && !trace_options.nested)
        return NULL;
    tb = ts->buffers[level];
    if (__builtin_expect(tb == NULL, 0) && (tb = trace_thread_buffer(in)) == NULL)
        return NULL;
    if (__builtin_expect(!(tb->named[index / 8] & (1u << index % 8)), 0))
        trace_name_function(in, tb, index, kind);
    if (depth > 255)
        depth = 255;
    if (ts->open_calls < MAX_OPEN) {
        ts->open_stack[ts->open_calls].func = (uint16_t)index;
        ts->open_stack[ts->open_calls].depth = (uint8_t)depth;
    }
    ts->open_calls++;
    *ts_out = ts;
    *depth_out = (uint8_t)depth;
    return tb;
}

#endif
