/* calls.h: a traced call's start and end, shared by every wrapper: the hand-written ones
 * (requests.c, lifecycle.c), the generated ones by role (record.h) and the bare ones of
 * QMPI_TRACE_FUNCTIONS=all (trace_all.qmpi). Inline: what every traced call does.
 *
 * A call's record is written before the call, with duration 0: the record of a call
 * entered and not returned, which is what a process that dies inside the call leaves (the
 * buffer is its tail file, mapped: sink.h). After the call its duration completes it in place;
 * a record that changed in the call (a status read, a request or handle made) is written
 * again, whole. */
#ifndef QMPI_TRACE_CALLS_H
#define QMPI_TRACE_CALLS_H
#include "sink.h"
#include "state.h"
#include "threads.h"

#define ALWAYS_INLINE __attribute__((always_inline))

/* The FUNCTION record of core function `index`, before its first call in this file; 0 if
 * the thread's tracing stopped. */
HIDDEN int trace_name_function(struct instance *in, struct thread_buffer *tb, int index, int kind);
/* Starts recording core function `index` of `kind` at `level`: its record made, with no
 * arguments yet; 0 if this call is not to be recorded (tracing is off, or nested calls
 * are not wanted). trace_enter must follow, before the call. */
HIDDEN int trace_start(struct traced *t, int level, int index, int kind);
/* trace_start, then trace_enter. */
HIDDEN int trace_begin(struct traced *t, int level, int index, int kind);
/* The call's record completed, written again whole (it changed in the call). */
HIDDEN void trace_end(struct traced *t, int failed);

/* What every traced call does first (trace_begin, trace_args_begin, trace_all_begin): the
 * calling thread's buffer for `level` (NULL: this call is not recorded: tracing is off, or
 * nested calls are not wanted), the thread's state and the call's depth; the call is
 * pushed on the thread's open calls. */
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
    if (__builtin_expect(!(tb->named[index / 8] & (1u << index % 8)), 0) && !trace_name_function(in, tb, index, kind))
        return NULL;
    if (depth > 255)
        depth = 255;
    if (ts->open_calls < MAX_OPEN) {
        ts->open_stack[ts->open_calls].func = (uint16_t)index;
        ts->open_stack[ts->open_calls].depth = (uint8_t)depth;
    }
    ts->open_calls++;
    ts->opened++;
    *ts_out = ts;
    *depth_out = (uint8_t)depth;
    return tb;
}

/* Before the call: record `r` at the buffer's end, entered (duration 0); then the enter
 * ticks, read last, into r->enter. */
static inline ALWAYS_INLINE void trace_enter_record(struct traced *t, struct call_record *r)
{
    struct thread_buffer *tb = t->tb;
    if (__builtin_expect(tb->used + CALL_ROOM + RESERVED_BYTES > tb->limit, 0))
        trace_make_room(t->in, tb, CALL_ROOM);
    t->opened = t->ts->opened;
    t->size = (uint32_t)call_record_pack(r, 0, tb->data + tb->used);
    r->enter = trace_ticks();
    memcpy(tb->data + tb->used + 8, &r->enter, sizeof r->enter);
}

/* trace_enter_record of the record made in t->r. */
static inline ALWAYS_INLINE void trace_enter(struct traced *t)
{
    trace_enter_record(t, &t->r);
}

/* Whether a call's record must be written again, whole, rather than completed in place:
 * a call began on this thread meanwhile (one nested in it, which may have written where
 * the record was), or the call lasted too long for the head's 32-bit duration. */
static inline ALWAYS_INLINE int trace_written_again(const struct traced *t, uint64_t duration)
{
    return __builtin_expect(t->ts->opened != t->opened, 0) || __builtin_expect(duration >= COMPACT_DURATION_WIDE, 0);
}

/* After a call whose record did not change in it, left at `leave`: its duration completes
 * the record written before (last, after the failed flag), unless it must be written
 * again (trace_written_again): then `r` is written again, whole. */
static inline ALWAYS_INLINE void trace_leave_at(struct traced *t, const struct call_record *r, int failed,
                                                uint64_t leave)
{
    struct thread_buffer *tb = t->tb;
    char *at = tb->data + tb->used;
    uint64_t duration = leave - r->enter;
    uint32_t stored;
    if (trace_written_again(t, duration)) {
        if (r != &t->r)
            t->r = *r;
        trace_end(t, failed);
        return;
    }
    stored = (uint32_t)duration + (duration == 0); /* 0 says entered */
    t->ts->open_calls--;
    tb->calls++;
    if (failed)
        at[7] |= CALL_FAILED;
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
    memcpy(at + 16, &stored, sizeof stored);
    tb->used += t->size;
    if (__builtin_expect(tb->limit == 0, 0)) /* QMPI_TRACE_FLUSH=record */
        trace_make_room(t->in, tb, 0);
}

/* trace_leave_at, now. */
static inline ALWAYS_INLINE void trace_leave_record(struct traced *t, const struct call_record *r, int failed)
{
    trace_leave_at(t, r, failed, trace_ticks());
}

/* trace_leave_record of the record in t->r. */
static inline ALWAYS_INLINE void trace_leave(struct traced *t, int failed)
{
    trace_leave_record(t, &t->r, failed);
}

#endif
