/* sink.c: a thread's buffer and its rank file (sink.h). Appends come from the owning
 * thread alone; the lock orders flushes (a thread's exit, MPI_Finalize).
 *
 * Why a tail file and not the rank file itself mapped: mapping the rank file's fresh
 * pages as it grows cost ~45 ns per 64-byte record on tmpfs here (populating and
 * unmapping page after page), against ~36 for write(); the tail file's pages are mapped
 * once and reused, so a record costs what a heap buffer's did. What a tail file needs to
 * be read right after any crash: the records in its buffer are followed by a zero word
 * (or by the record of the call the thread is in); a flush writes the buffer to the
 * rank file, then moves `flushed` on, empties the buffer (its first word zero), then
 * moves `staged_from` on: a reader takes the rank file's first `flushed` bytes, then
 * the buffer's records when `staged_from` equals `flushed`. */
#include "sink.h"
#include "options.h"
#include "say.h"
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/vfs.h>
#include <unistd.h>

/* A timer record at a thread's first record, then at flushes at least TIMER_GAP_NS apart
 * and at finalize. */
#define TIMER_GAP_NS 1000000u
/* A stopped thread's records go to a scratch buffer of this size, thrown away. */
#define SCRATCH_BYTES (4 * 4096)

/* A record is at most 4096 bytes (trace_append_variable): the buffer holds one after any
 * other, with room for the file's end. */
_Static_assert(BUFFER_MIN >= RESERVED_BYTES + CALL_ROOM, "room for a record after a flush");

static int write_all(int fd, const char *data, size_t size)
{
    while (size > 0) {
        ssize_t n = write(fd, data, size);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            if (n == 0)
                errno = ENOSPC;
            return -1;
        }
        data += n;
        size -= (size_t)n;
    }
    return 0;
}

/* Copies a record to the buffer's end, and the zero word after it: its head last, so a
 * process killed at any instruction leaves the record whole or not there (the head word
 * at `used`, a call's record entered there included, is cleared first). */
static void put_record(struct thread_buffer *tb, const void *record, size_t size)
{
    char *at = tb->data + tb->used;
    memset(at, 0, 8);
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
    memcpy(at + 4, (const char *)record + 4, size - 4);
    memset(at + size, 0, 8);
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
    memcpy(at, record, 4);
    tb->used += size;
}

void trace_add_timer(struct thread_buffer *tb)
{
    struct timer_record r = {R_TIMER, sizeof r, 0, 0, 0};
    r.ticks = trace_ticks();
    r.ns = trace_now_ns();
    r.ticks = (r.ticks + trace_ticks()) / 2; /* the tick count at the middle of the clock read */
    put_record(tb, &r, sizeof r);
    tb->last_timer_ns = r.ns;
}

/* A stopped thread: its file closed (a tail file kept: it holds what the rank file could
 * not take), its records from now on thrown away, and no call traced (named[] cleared:
 * the next call of each function asks trace_name_function, which says no). */
static void stop(struct instance *in, struct thread_buffer *tb, const char *what)
{
    struct end_record end = {R_END, sizeof end, END_STOPPED, tb->calls};
    char *scratch = malloc(SCRATCH_BYTES);
    int error = errno;
    tb->busy = 1;
    trace_add_timer(tb); /* room is kept for both */
    put_record(tb, &end, sizeof end);
    errno = error;
    trace_say_thread(in, tb->thread, what, tb->name, tb->calls);
    if (tb->tail != NULL)
        munmap(tb->tail, TAIL_BUFFER_OFFSET + tb->capacity);
    else
        free(tb->data);
    close(tb->fd);
    tb->fd = -1;
    tb->tail = NULL;
    tb->stopped = 1;
    memset(tb->named, 0, sizeof tb->named);
    tb->data = scratch;
    tb->capacity = tb->limit = scratch != NULL ? SCRATCH_BYTES : 0;
    tb->used = 0;
    tb->busy = 0;
}

/* Built with -DTRACE_BENCH_DISCARD (bench/Makefile's libqbtrace-discard.so, never a
 * tool that traces), a full buffer is thrown away instead of written: `make bench` times
 * what writing the records to the rank file costs a call as the difference. */
#ifdef TRACE_BENCH_DISCARD
#define write_records(fd, data, size) ((void)write_all, 0)
#else
#define write_records(fd, data, size) write_all(fd, data, size)
#endif

/* The buffer's records written to the rank file (the lock held); a thread whose file
 * cannot take them stops. */
static void flush_locked(struct instance *in, struct thread_buffer *tb)
{
    if (tb->stopped || tb->used == 0) {
        tb->used = 0;
        return;
    }
    tb->busy = 1;
    if (write_records(tb->fd, tb->data, tb->used) != 0) {
        tb->busy = 0;
        stop(in, tb, "cannot write");
        return;
    }
    tb->flushed += tb->used;
    if (tb->tail != NULL) {
        __atomic_store_n(&tb->tail->flushed, tb->flushed, __ATOMIC_RELAXED);
        __atomic_signal_fence(__ATOMIC_SEQ_CST);
        memset(tb->data, 0, 8);
        __atomic_signal_fence(__ATOMIC_SEQ_CST);
        __atomic_store_n(&tb->tail->staged_from, tb->flushed, __ATOMIC_RELAXED);
    }
    tb->used = 0;
    tb->busy = 0;
}

void trace_flush(struct instance *in, struct thread_buffer *tb)
{
    pthread_mutex_lock(&tb->lock);
    flush_locked(in, tb);
    pthread_mutex_unlock(&tb->lock);
}

/* A timer record when the last one is TIMER_GAP_NS old (the buffer keeps room for it),
 * then the buffer written out. */
static void flush_due(struct instance *in, struct thread_buffer *tb)
{
    uint64_t ns = trace_now_ns();
    if (!tb->stopped && ns - tb->last_timer_ns >= TIMER_GAP_NS)
        trace_add_timer(tb);
    trace_flush(in, tb);
}

void trace_make_room(struct instance *in, struct thread_buffer *tb, size_t size)
{
    if (tb->used + size + RESERVED_BYTES > tb->capacity || (tb->limit == 0 && tb->used > 0))
        flush_due(in, tb);
}

void trace_append(struct instance *in, struct thread_buffer *tb, const void *record, size_t size)
{
    if (__builtin_expect(tb->used + size + RESERVED_BYTES > tb->limit, 0))
        trace_make_room(in, tb, size);
    if (__builtin_expect(tb->used + size + RESERVED_BYTES > tb->capacity, 0))
        return; /* only a stopped thread's scratch buffer, when there was no memory for one */
    put_record(tb, record, size);
    if (tb->limit == 0)
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

/* File systems where a shared mapping is slow or unsupported (statfs's f_type): their
 * threads buffer on the heap. */
static const char *network_file_system(int fd)
{
    static const struct {
        long type;
        const char *name;
    } kinds[] = {{0x6969, "NFS"},      {0x0BD00BD0, "Lustre"}, {0x47504653, "GPFS"},   {0xFF534D42, "CIFS"},
                 {0xFE534D42, "SMB2"}, {0x517B, "SMB"},        {0x00C36400, "CephFS"}, {0x65735546, "FUSE"},
                 {0x01021997, "9P"},   {0x5346414F, "AFS"},    {0x19830326, "BeeGFS"}, {0x20030528, "PVFS2"},
                 {0xAAD7AAEA, "PanFS"}};
    struct statfs st;
    size_t i;
    if (fstatfs(fd, &st) != 0)
        return NULL;
    for (i = 0; i < sizeof kinds / sizeof kinds[0]; i++)
        if ((long)st.f_type == kinds[i].type)
            return kinds[i].name;
    return NULL;
}

/* The tail file NAME.tail beside the rank file: created, its space reserved (no write to
 * it can fault for want of space), mapped; its header says which rank file it ends. */
static struct tail_header *make_tail(struct instance *in, struct thread_buffer *tb, const char **why)
{
    char name[4200];
    size_t size = TAIL_BUFFER_OFFSET + tb->capacity;
    struct tail_header *tail;
    int fd, error;
    snprintf(name, sizeof name, "%s%s", tb->name, TAIL_SUFFIX);
    fd = openat(in->dirfd, name, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (fd < 0) {
        *why = "its tail file could not be created";
        return NULL;
    }
    error = posix_fallocate(fd, 0, (off_t)size);
    tail = error == 0 ? mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, 0) : MAP_FAILED;
    close(fd);
    if (tail == MAP_FAILED) {
        *why = error != 0 ? "no space could be reserved for its tail file" : "its tail file could not be mapped";
        unlinkat(in->dirfd, name, 0);
        return NULL;
    }
    tail->version = TRACE_VERSION;
    tail->header_size = sizeof *tail;
    tail->buffer_offset = TAIL_BUFFER_OFFSET;
    tail->buffer_size = (uint32_t)tb->capacity;
    tail->rank = in->rank;
    tail->thread = tb->thread;
    tail->level = in->level;
    tail->run_id = in->run_id;
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
    memcpy(tail->magic, TAIL_MAGIC, 8); /* last: a reader takes no tail without it */
    return tail;
}

static void write_header(struct instance *in, struct thread_buffer *tb)
{
    struct file_header header;
    memset(&header, 0, sizeof header);
    memcpy(header.magic, TRACE_MAGIC, 8);
    header.version = TRACE_VERSION;
    header.header_size = sizeof header;
    header.record_alignment = RECORD_ALIGNMENT;
    header.rank = in->rank;
    header.thread = tb->thread;
    header.level = in->level;
    header.world_size = in->world_size;
    header.pid = (uint32_t)getpid();
    header.clock_origin_ns = in->origin_ns;
    header.realtime_origin_ns = in->realtime_origin_ns;
    header.run_id = in->run_id;
    memcpy(tb->data, &header, sizeof header); /* the first bytes written out */
    tb->used = sizeof header;
}

int trace_sink_open(struct instance *in, struct thread_buffer *tb, int fd, char *name, const char **why)
{
    const char *network = network_file_system(fd);
    tb->fd = fd;
    tb->name = name;
    tb->capacity = trace_options.buffer_bytes;
    *why = trace_options.flush_every_record ? "QMPI_TRACE_FLUSH=record"
           : trace_options.buffered         ? "QMPI_TRACE_FLUSH=full"
           : network != NULL                ? network
                                            : NULL;
    if (*why == NULL && (tb->tail = make_tail(in, tb, why)) != NULL) {
        tb->data = (char *)tb->tail + TAIL_BUFFER_OFFSET;
    } else if ((tb->data = calloc(1, tb->capacity + 8)) == NULL) {
        trace_say_thread(in, tb->thread, "cannot allocate a buffer for", name, 0);
        return -1;
    }
    tb->limit = trace_options.flush_every_record ? 0 : tb->capacity;
    write_header(in, tb);
    flush_locked(in, tb); /* the header (and the tail's `flushed`) at once */
    return tb->stopped ? -1 : 0;
}

void trace_sink_close(struct instance *in, struct thread_buffer *tb)
{
    pthread_mutex_lock(&tb->lock);
    if (!tb->stopped) {
        /* END: the file is whole (room for both is kept) */
        struct end_record end = {R_END, sizeof end, END_FINALIZED, tb->calls};
        trace_add_timer(tb);
        put_record(tb, &end, sizeof end);
        flush_locked(in, tb);
    }
    tb->busy = 1;                           /* a signal's handler on this thread leaves the buffer alone from now on */
    memset(tb->named, 0, sizeof tb->named); /* a call that still comes asks trace_name_function: no */
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
    if (!tb->stopped) {
        if (tb->tail != NULL) { /* the rank file holds everything: its tail file goes */
            char name[4200];
            snprintf(name, sizeof name, "%s%s", tb->name, TAIL_SUFFIX);
            munmap(tb->tail, TAIL_BUFFER_OFFSET + tb->capacity);
            unlinkat(in->dirfd, name, 0);
            tb->tail = NULL;
        } else {
            free(tb->data);
        }
        close(tb->fd);
        tb->fd = -1;
        tb->stopped = 1;
    } else {
        free(tb->data); /* a stopped thread's scratch buffer */
    }
    tb->data = NULL;
    tb->capacity = tb->limit = tb->used = 0;
    pthread_mutex_unlock(&tb->lock);
}
