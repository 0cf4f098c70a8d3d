/* calls.c: a traced call's start and end (calls.h). */
#include "calls.h"
#include "sink.h"

void trace_name_function(struct instance *in, struct thread_buffer *tb, int index, int kind)
{
    struct function_fixed function = {index, kind};
    const char *name = QMPI_Function_name(index);
    tb->named[index / 8] |= (unsigned char)(1u << index % 8);
    trace_append_variable(in, tb, R_FUNCTION, &function, sizeof function, name, strlen(name) + 1);
}

/* Starts recording core function `index` of `kind` at `level`; 0 if this call is not to
 * be recorded (tracing is off, or nested calls are not wanted). Which functions are
 * recorded at all is decided once, by get_interceptions. */
int trace_begin(struct traced *t, int level, int index, int kind)
{
    uint8_t depth;
    if ((t->tb = trace_open(level, index, kind, &t->ts, &depth)) == NULL)
        return 0;
    t->in = &trace_instances[level];
    t->comm = NULL;
    t->r = (struct call_record){
        .kind = R_CALL, .size = sizeof t->r, .func = (uint16_t)index, .depth = depth, CALL_RECORD_DEFAULTS};
    t->r.enter = trace_ticks();
    return 1;
}

/* The call's record, packed (its fields at their defaults left out: a PACKED_CALL), straight
 * into the buffer when there is room: a file's bytes cost the most of a traced call (0.5
 * ns each on tmpfs, written out), and a copy from a record on the stack would wait for
 * the stores just made to it (no store-to-load forwarding into a wider load). */
void trace_end(struct traced *t, int failed)
{
    uint64_t leave = trace_ticks();
    struct thread_buffer *tb = t->tb;
    t->ts->open_calls--;
    if (failed)
        t->r.flags |= CALL_FAILED;
    tb->calls++;
    if (__builtin_expect(tb->used + PACKED_CALL_MAX + RESERVED_BYTES <= trace_options.buffer_bytes &&
                             !trace_options.flush_every_record,
                         1)) {
        tb->used += call_record_pack(&t->r, leave, tb->data + tb->used);
    } else {
        unsigned char packed[PACKED_CALL_MAX];
        trace_append(t->in, tb, packed, call_record_pack(&t->r, leave, packed));
    }
}

/* ---- every other MPI function (QMPI_TRACE_FUNCTIONS=all) ----
 * trace_all.qmpi makes a wrapper for every function outside `operations` that calls
 * trace_all_begin before the next link and trace_all_end after it: a PACKED_CALL record
 * without arguments (generic code cannot know them; no role says). */
HIDDEN uint64_t trace_all_begin(int level, int index);
HIDDEN void trace_all_end(int level, int index, uint64_t enter, int failed);

/* trace_begin for a function of kind `other`: its enter ticks, or 0 if not recorded. */
uint64_t trace_all_begin(int level, int index)
{
    struct thread_state *ts;
    uint8_t depth;
    uint64_t enter;
    if (trace_open(level, index, TRACE_KIND_other, &ts, &depth) == NULL)
        return 0;
    enter = trace_ticks();
    return enter != 0 ? enter : 1;
}

void trace_all_end(int level, int index, uint64_t enter, int failed)
{
    uint64_t leave = trace_ticks();
    struct thread_state *ts = trace_thread_self; /* set by trace_all_begin's trace_open */
    struct packed_call_record s = {
        R_PACKED_CALL, sizeof s, (uint16_t)index, 255, failed ? CALL_FAILED : 0, enter, leave, -1, 0};
    if (ts->open_calls <= MAX_OPEN)
        s.depth = ts->open_stack[ts->open_calls - 1].depth;
    ts->open_calls--;
    ts->buffers[level]->calls++;
    trace_put(&trace_instances[level], ts->buffers[level], &s, sizeof s);
}
