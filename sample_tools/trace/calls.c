/* calls.c: a traced call's start and end (calls.h). */
#include "calls.h"

int trace_name_function(struct instance *in, struct thread_buffer *tb, int index, int kind)
{
    struct function_fixed function = {index, kind};
    const char *name = QMPI_Function_name(index);
    if (tb->stopped)
        return 0;
    tb->named[index / 8] |= (unsigned char)(1u << index % 8);
    trace_append_variable(in, tb, R_FUNCTION, &function, sizeof function, name, strlen(name) + 1);
    return !tb->stopped;
}

/* Which functions are recorded at all is decided once, by get_interceptions. */
int trace_start(struct traced *t, int level, int index, int kind)
{
    uint8_t depth;
    if ((t->tb = trace_open(level, index, kind, &t->ts, &depth)) == NULL)
        return 0;
    t->in = &trace_instances[level];
    t->comm = NULL;
    t->r = (struct call_record){
        .kind = R_CALL, .size = sizeof t->r, .func = (uint16_t)index, .depth = depth, CALL_RECORD_DEFAULTS};
    return 1;
}

int trace_begin(struct traced *t, int level, int index, int kind)
{
    if (!trace_start(t, level, index, kind))
        return 0;
    trace_enter(t);
    return 1;
}

/* The call's record, packed (its fields at their defaults left out: a COMPACT_CALL), over
 * the one written before the call when it is still at the buffer's end, else after what
 * was written since (a nested call's records, definitions). Straight into the buffer: a
 * copy from a record on the stack would wait for the stores just made to it (no
 * store-to-load forwarding into a wider load). */
void trace_end(struct traced *t, int failed)
{
    uint64_t leave = trace_ticks();
    struct thread_buffer *tb = t->tb;
    t->ts->open_calls--;
    if (failed)
        t->r.flags |= CALL_FAILED;
    tb->calls++;
    if (__builtin_expect(tb->used + COMPACT_CALL_MAX + RESERVED_BYTES > tb->limit, 0))
        trace_make_room(t->in, tb, COMPACT_CALL_MAX);
    if (__builtin_expect(tb->used + COMPACT_CALL_MAX + RESERVED_BYTES > tb->capacity, 0))
        return; /* a stopped thread without a scratch buffer */
    tb->used += call_record_pack(&t->r, leave, tb->data + tb->used);
    if (__builtin_expect(tb->limit == 0, 0)) /* QMPI_TRACE_FLUSH=record */
        trace_make_room(t->in, tb, 0);
}

/* ---- every other MPI function (QMPI_TRACE_FUNCTIONS=all) ----
 * trace_all.qmpi makes a wrapper for every function outside `operations` that calls
 * trace_all_begin before the next link and trace_all_end after it: a COMPACT_CALL record
 * without arguments (generic code cannot know them; no role says), entered before the
 * call as every call's is. */
HIDDEN int trace_all_begin(struct traced *t, int level, int index)
{
    struct thread_buffer *tb;
    uint8_t depth;
    if ((t->tb = tb = trace_open(level, index, TRACE_KIND_other, &t->ts, &depth)) == NULL)
        return 0;
    t->in = &trace_instances[level];
    if (__builtin_expect(tb->used + CALL_ROOM + RESERVED_BYTES > tb->limit, 0))
        trace_make_room(t->in, tb, CALL_ROOM);
    t->opened = t->ts->opened;
    t->r.func = (uint16_t)index;
    t->r.depth = depth;
    t->size = (uint32_t)call_record_pack_bare((uint16_t)index, depth, tb->data + tb->used);
    t->r.enter = trace_ticks();
    memcpy(tb->data + tb->used + 8, &t->r.enter, sizeof t->r.enter);
    return 1;
}

/* t->r holds only the function, depth and enter (trace_all_begin): made whole before it
 * is written again (a call nested in it, or one too long for the head's duration). */
void trace_all_end(struct traced *t, int failed)
{
    uint64_t leave = trace_ticks();
    if (trace_written_again(t, leave - t->r.enter)) {
        struct call_record r = {
            .kind = R_CALL, .size = sizeof r, .func = t->r.func, .depth = t->r.depth, CALL_RECORD_DEFAULTS};
        r.enter = t->r.enter;
        t->r = r;
    }
    trace_leave_at(t, &t->r, failed, leave);
}
