/* sink.c: a thread's buffer and its rank file (sink.h). Appends come from the owning
 * thread alone; the lock orders flushes (a thread's exit, MPI_Finalize). */
#include "sink.h"
#include "options.h"
#include "say.h"
#include <errno.h>
#include <unistd.h>

/* A timer record at a thread's first record, then at flushes at least TIMER_GAP_NS apart
 * and at finalize. */
#define TIMER_GAP_NS 1000000u

static int write_all(int fd, const char *data, size_t size)
{
    while (size > 0) {
        ssize_t n = write(fd, data, size);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return -1;
        data += n;
        size -= (size_t)n;
    }
    return 0;
}

void trace_add_timer(struct thread_buffer *tb)
{
    struct timer_record r = {R_TIMER, sizeof r, 0, 0, 0};
    r.ticks = trace_ticks();
    r.ns = trace_now_ns();
    r.ticks = (r.ticks + trace_ticks()) / 2; /* the tick count at the middle of the clock read */
    memcpy(tb->data + tb->used, &r, sizeof r);
    tb->used += sizeof r;
    tb->last_timer_ns = r.ns;
}

static void flush_locked(struct instance *in, struct thread_buffer *tb)
{
    if (tb->fd >= 0 && tb->used > 0 && write_all(tb->fd, tb->data, tb->used) != 0)
        trace_complain(in, "cannot write a trace file in", trace_options.dir);
    tb->used = 0;
}

void trace_flush(struct instance *in, struct thread_buffer *tb)
{
    pthread_mutex_lock(&tb->lock);
    flush_locked(in, tb);
    pthread_mutex_unlock(&tb->lock);
}

/* A full buffer (or every record, QMPI_TRACE_FLUSH=record) is written out; a timer
 * record goes first when the last one is TIMER_GAP_NS old. The buffer keeps room for it. */
static void flush_due(struct instance *in, struct thread_buffer *tb)
{
    uint64_t ns = trace_now_ns();
    if (ns - tb->last_timer_ns >= TIMER_GAP_NS)
        trace_add_timer(tb);
    trace_flush(in, tb);
}

/* The buffer keeps room for a timer and an END record after any record (RESERVED_BYTES);
 * a record is at most 4096 bytes (append_variable), and the buffer at least 4096 + that
 * room. trace_put, inline, appends when no flush is due. */
_Static_assert(BUFFER_MIN >= RESERVED_BYTES, "room for the largest record after a flush");

void trace_append(struct instance *in, struct thread_buffer *tb, const void *record, size_t size)
{
    if (__builtin_expect(tb->used + size + RESERVED_BYTES > trace_options.buffer_bytes, 0))
        flush_due(in, tb);
    if (__builtin_expect(tb->used + size + RESERVED_BYTES > trace_options.buffer_bytes, 0))
        return; /* cannot happen (records are at most 4096 bytes): never past the buffer */
    memcpy(tb->data + tb->used, record, size);
    tb->used += size;
    if (trace_options.flush_every_record)
        flush_due(in, tb);
}

/* A variable-size record: kind, size, then `fixed` bytes and `tail` bytes, padded to 8. */
void trace_append_variable(struct instance *in, struct thread_buffer *tb, int kind, const void *fixed,
                           size_t fixed_size, const void *tail, size_t tail_size)
{
    char record[4096];
    size_t size = (4 + fixed_size + tail_size + RECORD_ALIGNMENT - 1) & ~(size_t)(RECORD_ALIGNMENT - 1);
    uint16_t head[2] = {(uint16_t)kind, (uint16_t)size};
    if (size > sizeof record) { /* a name or member list too long: cut the tail */
        tail_size = sizeof record - 4 - fixed_size;
        size = (4 + fixed_size + tail_size) & ~(size_t)(RECORD_ALIGNMENT - 1);
        tail_size = size - 4 - fixed_size;
        head[1] = (uint16_t)size;
    }
    memset(record, 0, size);
    memcpy(record, head, 4);
    memcpy(record + 4, fixed, fixed_size);
    memcpy(record + 4 + fixed_size, tail, tail_size);
    trace_append(in, tb, record, size);
}

void trace_sink_close(struct instance *in, struct thread_buffer *tb)
{
    pthread_mutex_lock(&tb->lock);
    if (tb->fd >= 0) {
        /* END: the file is whole (room for both is kept: see trace_append) */
        struct end_record end_record = {R_END, sizeof end_record, 0, tb->calls};
        trace_add_timer(tb);
        memcpy(tb->data + tb->used, &end_record, sizeof end_record);
        tb->used += sizeof end_record;
    }
    flush_locked(in, tb);
    if (tb->fd >= 0)
        close(tb->fd);
    tb->fd = -1;
    pthread_mutex_unlock(&tb->lock);
}
