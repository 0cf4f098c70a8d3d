/* trace: records every interesting MPI call with its times and arguments into binary
 * per-thread buffers, written per rank and thread to QMPI_TRACE_DIR (the PIOsim MPI
 * wrapper's design, seed 004). `qmpigen trace DIR -o OUT` merges the files into OTF2,
 * Perfetto JSON, a PNG timeline and a summary. Format: docs/trace-format.md.
 *
 * Build: mpicc -shared -fPIC -Wall -Wextra -Werror -I<core> trace.c -o libtrace.so -lpthread
 *        (sample_tools/Makefile also links in the wrappers trace_all.qmpi generates; alone,
 *        trace.c traces only the functions of its table)
 * Run:   TOOLS=./libtrace.so:./libtbcast.so:./libtrace.so mpiexec -n 4 ./app
 *
 * Stackable: one library serves every instance in the chain; each instance keeps its
 * state in slot `level` of `instances` and writes its own files (the level is in their
 * names). Options (environment; read once per process):
 *   QMPI_TRACE_DIR=dir          where the files go (default qmpi-trace), created if missing
 *   QMPI_TRACE_FLUSH=full|record write when a thread's buffer is full (default) or every record
 *   QMPI_TRACE_NESTED=1|0       record calls made while a traced call of an instance above
 *                               is open on this thread (e.g. TBcast's Send/Recv) (default 1)
 *   QMPI_TRACE_FUNCTIONS=default|all  `all` adds the ordinary functions of the table below
 *                               (Comm_rank, Comm_size) and every other MPI function, seed 004
 *                               section 3.1.4 (see "every other MPI function" at the end)
 *   QMPI_TRACE_BUFFER=bytes     per-thread buffer (default 1 MiB, at least 4096)
 * No MPI communication happens for tracing's sake except the clock ping-pong with world
 * rank 0 right after MPI_Init and right before MPI_Finalize, through PMPI.
 * The hot path (begin/end): one TLS lookup, two reads of the tick counter (not
 * clock_gettime: see struct timer_record), the communicator from a 16-entry per-thread
 * cache, an 80-byte record copied into the thread's buffer; no lock, no atomic
 * read-modify-write. `make bench` measures it against an empty tool. */
#define _GNU_SOURCE
#include <mpi.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include "qmpi.h"
#if defined(__x86_64__) || defined(__i386__)
#include <x86intrin.h>
#endif

#define TRACE_VERSION 2
#define MAX_LEVELS 64
#define CACHE_SLOTS 16
#define CLOCK_PINGS 8

/* Stable function codes written in the files (the core's indices differ per MPI); the
 * names reach the merger in FUNCTION records, so this table is their only home. The
 * third column: 1 = interesting (always traced), 0 = ordinary (QMPI_TRACE_FUNCTIONS=all).
 * Every other function traced under `all` has code TF_COUNT + its core index. */
#define TRACE_FUNCTIONS(X)                                                                         \
    X(INIT, Init, 1) X(INIT_THREAD, Init_thread, 1) X(FINALIZE, Finalize, 1)                       \
    X(SEND, Send, 1) X(SSEND, Ssend, 1) X(RECV, Recv, 1) X(ISEND, Isend, 1) X(IRECV, Irecv, 1)     \
    X(WAIT, Wait, 1) X(WAITALL, Waitall, 1) X(TEST, Test, 1)                                       \
    X(BARRIER, Barrier, 1) X(BCAST, Bcast, 1) X(REDUCE, Reduce, 1) X(ALLREDUCE, Allreduce, 1)      \
    X(COMM_SPLIT, Comm_split, 1) X(COMM_DUP, Comm_dup, 1) X(COMM_FREE, Comm_free, 1)               \
    X(FILE_OPEN, File_open, 1) X(FILE_CLOSE, File_close, 1)                                        \
    X(FILE_WRITE_AT, File_write_at, 1) X(FILE_READ_AT, File_read_at, 1)                            \
    X(COMM_RANK, Comm_rank, 0) X(COMM_SIZE, Comm_size, 0)

enum trace_function {
#define AS_ENUM(code, name, interesting) TF_##code,
    TRACE_FUNCTIONS(AS_ENUM)
#undef AS_ENUM
    TF_COUNT
};
static const char *const function_names[TF_COUNT] = {
#define AS_NAME(code, name, interesting) "MPI_" #name,
    TRACE_FUNCTIONS(AS_NAME)
#undef AS_NAME
};
static const unsigned char function_interesting[TF_COUNT] = {
#define AS_FLAG(code, name, interesting) interesting,
    TRACE_FUNCTIONS(AS_FLAG)
#undef AS_FLAG
};

/* Record kinds; every record starts with kind and total size (a multiple of 8). */
enum {
    R_FUNCTION = 1, R_PROCESS = 2, R_COMM = 3, R_TYPE = 4, R_FILE = 5, R_CALL = 6, R_COMPLETION = 7, R_CLOCK = 8,
    R_TIMER = 9, R_SHORT_CALL = 10
};
enum { CALL_HAS_REQUEST = 1, CALL_FAILED = 2 };
enum { PEER_NONE = -1, PEER_ANY = -2 };

struct file_header { /* 64 bytes */
    char magic[8];   /* "QMPITRC\0" */
    uint16_t version, header_size;
    uint32_t record_alignment;
    int32_t rank, thread, level, world_size;
    uint32_t pid, reserved;
    uint64_t clock_origin_ns;   /* CLOCK_MONOTONIC at MPI_Init, for reference */
    uint64_t realtime_origin_ns; /* CLOCK_REALTIME at the same moment */
    uint64_t reserved2;
};

struct call_record { /* 80 bytes */
    uint16_t kind, size, func;
    uint8_t depth, flags;
    uint64_t enter, leave; /* ticks (see struct timer_record) */
    int32_t comm, peer, tag, root; /* peer and root in MPI_COMM_WORLD ranks */
    int32_t datatype, file;
    int64_t count, bytes, offset;
    uint64_t request; /* the request handle's value; the merger numbers them */
};

/* A call whose record would hold only its communicator (Comm_rank, Barrier, Wait on a
 * send, ...): the same first 24 bytes and the communicator, no more. Every byte costs at
 * run time (the kernel copies it into the file: about half the cost of a traced call). */
struct short_call_record { /* 32 bytes */
    uint16_t kind, size, func;
    uint8_t depth, flags;
    uint64_t enter, leave;
    int32_t comm, reserved;
};

struct completion_record { /* 32 bytes: one completed request of a Wait/Waitall/Test */
    uint16_t kind, size;
    int32_t source; /* world rank (receives) */
    uint64_t request;
    int32_t tag, reserved;
    int64_t bytes;
};

/* Call times are ticks of the cheapest clock that counts at a constant rate (the TSC on
 * x86-64, CNTVCT on aarch64: ~13 ns to read on this VM against ~53 ns for
 * clock_gettime); timer records pair a tick count with CLOCK_MONOTONIC ns, at a thread's
 * first record, then at flushes at least TIMER_GAP_NS apart and at finalize, so the
 * merger converts ticks to ns by a linear fit over the rank's pairs. */
struct timer_record { /* 24 bytes */
    uint16_t kind, size;
    uint32_t reserved;
    uint64_t ticks, ns;
};
#define TIMER_GAP_NS 1000000u

struct clock_record { /* 32 bytes */
    uint16_t kind, size;
    uint32_t phase; /* 0 at init, 1 at finalize */
    uint64_t local_ns;
    int64_t offset_ns; /* world rank 0's clock minus ours */
    uint64_t round_trip_ns;
};

/* A communicator, datatype or file known to an instance; never changes once published. */
struct handle_entry {
    int kind; /* R_COMM, R_TYPE, R_FILE */
    uint64_t handle;
    int id, size; /* size: communicator size, datatype size */
    int *world;   /* communicator: world rank of each local rank */
    int live;
};

struct thread_buffer {
    pthread_mutex_t lock; /* flushes only: appends come from the owning thread alone */
    int fd, thread;
    size_t used;
    uint64_t last_timer_ns;
    unsigned cache_generation;
    struct handle_entry *cache[CACHE_SLOTS];
    unsigned cache_next;
    struct thread_buffer *next_in_instance;
    /* core indices whose FUNCTION record this file has (QMPI_TRACE_FUNCTIONS=all) */
    unsigned char named[(NUM_MPI_FUNCS + 7) / 8];
    char data[];
};

struct instance {
    int active; /* between MPI_Init and MPI_Finalize */
    int rank, world_size;
    int level;
    pthread_mutex_t lock; /* handles, thread list */
    pthread_key_t thread_key;
    unsigned generation; /* bumped when a handle dies, so thread caches forget it */
    int next_thread, next_id[9];
    struct handle_entry **handles;
    int handle_count, handle_capacity;
    struct thread_buffer *threads;
    uint64_t origin_ns, realtime_origin_ns;
};

static struct instance instances[MAX_LEVELS];
/* Everything a thread keeps, in one TLS object: one __tls_get_addr per traced call. */
#define MAX_OPEN 32
struct thread_state {
    struct thread_buffer *buffers[MAX_LEVELS];
    int open_calls;
    struct { uint16_t func; uint8_t depth; } open_stack[MAX_OPEN];
};
static __thread struct thread_state thread_state;
/* Traced calls open on this thread, over all instances, innermost last. A call arriving
 * while another function's call is open was made below the application's call by a
 * tool between two instances (TBcast's Send inside Bcast): it is nested one deeper. The
 * same function arriving is the same call passing down the chain, at the same depth. */
static inline int call_depth(const struct thread_state *ts, int func)
{
    if (ts->open_calls == 0)
        return 0;
    if (ts->open_calls > MAX_OPEN)
        return 255;
    return ts->open_stack[ts->open_calls - 1].depth + (ts->open_stack[ts->open_calls - 1].func != func);
}

static struct {
    const char *dir;
    int flush_every_record, nested, all_functions;
    size_t buffer_bytes;
} options;
static pthread_once_t options_once = PTHREAD_ONCE_INIT;

static void read_options(void)
{
    const char *value;
    options.dir = (value = getenv("QMPI_TRACE_DIR")) && *value ? value : "qmpi-trace";
    options.flush_every_record = (value = getenv("QMPI_TRACE_FLUSH")) && strcmp(value, "record") == 0;
    options.nested = !((value = getenv("QMPI_TRACE_NESTED")) && strcmp(value, "0") == 0);
    options.all_functions = (value = getenv("QMPI_TRACE_FUNCTIONS")) && strcmp(value, "all") == 0;
    options.buffer_bytes = (value = getenv("QMPI_TRACE_BUFFER")) ? strtoull(value, NULL, 10) : 0;
    if (options.buffer_bytes < 4096)
        options.buffer_bytes = value ? 4096 : 1u << 20;
}

static inline uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static inline uint64_t ticks(void)
{
#if defined(__x86_64__) || defined(__i386__)
    return __rdtsc();
#elif defined(__aarch64__)
    uint64_t value;
    __asm__ volatile("mrs %0, cntvct_el0" : "=r"(value));
    return value;
#else
    return now_ns();
#endif
}

static void complain(struct instance *in, const char *what, const char *path)
{
    fprintf(stderr, "qmpi trace (level %d, rank %d): %s %s: %s; tracing stops for this instance\n", in->level,
            in->rank, what, path, strerror(errno));
    __atomic_store_n(&in->active, 0, __ATOMIC_RELEASE);
}

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

/* A timer record into the buffer (room for it is kept: see append). */
static void add_timer(struct thread_buffer *tb)
{
    struct timer_record r = {R_TIMER, sizeof r, 0, 0, 0};
    r.ticks = ticks();
    r.ns = now_ns();
    r.ticks = (r.ticks + ticks()) / 2; /* the tick count at the middle of the clock read */
    memcpy(tb->data + tb->used, &r, sizeof r);
    tb->used += sizeof r;
    tb->last_timer_ns = r.ns;
}

static void flush_locked(struct instance *in, struct thread_buffer *tb)
{
    if (tb->fd >= 0 && tb->used > 0 && write_all(tb->fd, tb->data, tb->used) != 0)
        complain(in, "cannot write a trace file in", options.dir);
    tb->used = 0;
}

static void flush(struct instance *in, struct thread_buffer *tb)
{
    pthread_mutex_lock(&tb->lock);
    flush_locked(in, tb);
    pthread_mutex_unlock(&tb->lock);
}

/* A full buffer (or every record, QMPI_TRACE_FLUSH=record) is written out; a timer
 * record goes first when the last one is TIMER_GAP_NS old. The buffer keeps room for it. */
static void flush_due(struct instance *in, struct thread_buffer *tb)
{
    uint64_t ns = now_ns();
    if (ns - tb->last_timer_ns >= TIMER_GAP_NS)
        add_timer(tb);
    flush(in, tb);
}

static inline void append(struct instance *in, struct thread_buffer *tb, const void *record, size_t size)
{
    if (__builtin_expect(tb->used + size + sizeof(struct timer_record) > options.buffer_bytes, 0))
        flush_due(in, tb);
    memcpy(tb->data + tb->used, record, size);
    tb->used += size;
    if (options.flush_every_record)
        flush_due(in, tb);
}

/* A variable-size record: kind, size, then `fixed` bytes and `tail` bytes, padded to 8. */
static void append_variable(struct instance *in, struct thread_buffer *tb, int kind, const void *fixed,
                            size_t fixed_size, const void *tail, size_t tail_size)
{
    char record[4096];
    size_t size = (4 + fixed_size + tail_size + 7) & ~(size_t)7;
    uint16_t head[2] = {(uint16_t)kind, (uint16_t)size};
    if (size > sizeof record) { /* a name or member list too long: cut the tail */
        tail_size = sizeof record - 4 - fixed_size;
        size = (4 + fixed_size + tail_size) & ~(size_t)7;
        tail_size = size - 4 - fixed_size;
        head[1] = (uint16_t)size;
    }
    memset(record, 0, size);
    memcpy(record, head, 4);
    memcpy(record + 4, fixed, fixed_size);
    memcpy(record + 4 + fixed_size, tail, tail_size);
    append(in, tb, record, size);
}

static void thread_exit(void *buffer)
{
    struct thread_buffer *tb = buffer;
    int level;
    for (level = 0; level < MAX_LEVELS && thread_state.buffers[level] != tb; level++)
        ;
    if (level < MAX_LEVELS) {
        add_timer(tb);
        flush(&instances[level], tb);
    }
}

static void write_preamble(struct instance *in, struct thread_buffer *tb)
{
    char host[256] = "unknown";
    char process[512];
    int32_t code;
    size_t length;
    gethostname(host, sizeof host - 1);
    host[sizeof host - 1] = '\0';
    for (code = 0; code < TF_COUNT; code++)
        append_variable(in, tb, R_FUNCTION, &code, 4, function_names[code], strlen(function_names[code]) + 1);
    /* program and host, each NUL-terminated, after a 4-byte pad */
    length = (size_t)snprintf(process, sizeof process, "%s%c%s", program_invocation_short_name, '\0', host);
    code = 0;
    append_variable(in, tb, R_PROCESS, &code, 4, process, length + 1);
}

/* The calling thread's buffer for `in`, created (with its file) on first use. */
static struct thread_buffer *thread_buffer(struct instance *in)
{
    struct thread_buffer *tb = thread_state.buffers[in->level];
    struct file_header header;
    char host[256] = "unknown", path[4096];
    if (tb != NULL)
        return tb;
    tb = calloc(1, sizeof *tb + options.buffer_bytes);
    if (tb == NULL) {
        complain(in, "cannot allocate a buffer in", options.dir);
        return NULL;
    }
    pthread_mutex_init(&tb->lock, NULL);
    pthread_mutex_lock(&in->lock);
    tb->thread = in->next_thread++;
    tb->next_in_instance = in->threads;
    in->threads = tb;
    pthread_mutex_unlock(&in->lock);
    gethostname(host, sizeof host - 1);
    host[sizeof host - 1] = '\0';
    snprintf(path, sizeof path, "%s/%s_%s_%d_%d.L%d.qtr", options.dir, program_invocation_short_name, host, in->rank,
             tb->thread, in->level);
    tb->fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    thread_state.buffers[in->level] = tb;
    pthread_setspecific(in->thread_key, tb);
    if (tb->fd < 0) {
        complain(in, "cannot create", path);
        return NULL;
    }
    memset(&header, 0, sizeof header);
    memcpy(header.magic, "QMPITRC", 8);
    header.version = TRACE_VERSION;
    header.header_size = sizeof header;
    header.record_alignment = 8;
    header.rank = in->rank;
    header.thread = tb->thread;
    header.level = in->level;
    header.world_size = in->world_size;
    header.pid = (uint32_t)getpid();
    header.clock_origin_ns = in->origin_ns;
    header.realtime_origin_ns = in->realtime_origin_ns;
    if (write_all(tb->fd, (const char *)&header, sizeof header) != 0) {
        complain(in, "cannot write", path);
        return NULL;
    }
    write_preamble(in, tb);
    add_timer(tb);
    return tb;
}

static uint64_t handle_bits(const void *handle, size_t size)
{
    uint64_t bits = 0;
    memcpy(&bits, handle, size < sizeof bits ? size : sizeof bits);
    return bits;
}

/* Writes the definition of a new handle entry (in this thread's file; the merger reads
 * every file's definitions before any events). */
static void define(struct instance *in, struct thread_buffer *tb, struct handle_entry *e, const void *handle,
                   const char *file_name, MPI_Offset file_size)
{
    if (e->kind == R_COMM) {
        MPI_Comm comm = *(const MPI_Comm *)handle;
        MPI_Group group, world_group;
        int i, *local = malloc(sizeof(int) * (size_t)e->size);
        int32_t fixed[2] = {e->id, e->size};
        e->world = malloc(sizeof(int) * (size_t)e->size);
        for (i = 0; i < e->size; i++)
            local[i] = i;
        PMPI_Comm_group(comm, &group);
        PMPI_Comm_group(MPI_COMM_WORLD, &world_group);
        PMPI_Group_translate_ranks(group, e->size, local, world_group, e->world);
        PMPI_Group_free(&group);
        PMPI_Group_free(&world_group);
        free(local);
        append_variable(in, tb, R_COMM, fixed, sizeof fixed, e->world, sizeof(int) * (size_t)e->size);
    } else if (e->kind == R_TYPE) {
        MPI_Datatype type = *(const MPI_Datatype *)handle;
        int nints = 0, naddrs = 0, ntypes = 0, combiner = 0, length = 0;
        char name[MPI_MAX_OBJECT_NAME + 1] = "";
        int32_t fixed[6];
        PMPI_Type_get_envelope(type, &nints, &naddrs, &ntypes, &combiner);
        PMPI_Type_get_name(type, name, &length);
        fixed[0] = e->id, fixed[1] = e->size, fixed[2] = combiner == MPI_COMBINER_NAMED;
        fixed[3] = nints, fixed[4] = naddrs, fixed[5] = ntypes;
        append_variable(in, tb, R_TYPE, fixed, sizeof fixed, name, strlen(name) + 1);
    } else {
        struct { int32_t id, reserved; int64_t initial_size; } fixed = {e->id, 0, (int64_t)file_size};
        append_variable(in, tb, R_FILE, &fixed, sizeof fixed, file_name, strlen(file_name) + 1);
    }
}

/* The entry for a communicator, datatype or file handle: from this thread's cache, else
 * the instance's table, else new (defined in this thread's file). */
static struct handle_entry *lookup(struct instance *in, struct thread_buffer *tb, int kind, const void *handle,
                                   size_t handle_size, const char *file_name, MPI_Offset file_size)
{
    uint64_t bits = handle_bits(handle, handle_size);
    unsigned generation = __atomic_load_n(&in->generation, __ATOMIC_ACQUIRE);
    struct handle_entry *e = NULL;
    int i;
    if (tb->cache_generation != generation) {
        memset(tb->cache, 0, sizeof tb->cache);
        tb->cache_generation = generation;
    }
    for (i = 0; i < CACHE_SLOTS; i++)
        if (tb->cache[i] != NULL && tb->cache[i]->handle == bits && tb->cache[i]->kind == kind)
            return tb->cache[i];
    pthread_mutex_lock(&in->lock);
    for (i = 0; i < in->handle_count; i++)
        if (in->handles[i]->live && in->handles[i]->handle == bits && in->handles[i]->kind == kind) {
            e = in->handles[i];
            break;
        }
    if (e == NULL && (e = calloc(1, sizeof *e)) != NULL) {
        e->kind = kind;
        e->handle = bits;
        e->id = in->next_id[kind]++;
        e->live = 1;
        if (kind == R_COMM)
            PMPI_Comm_size(*(const MPI_Comm *)handle, &e->size);
        else if (kind == R_TYPE)
            PMPI_Type_size(*(const MPI_Datatype *)handle, &e->size);
        define(in, tb, e, handle, file_name, file_size);
        if (in->handle_count == in->handle_capacity) {
            in->handle_capacity = in->handle_capacity ? 2 * in->handle_capacity : 16;
            in->handles = realloc(in->handles, sizeof *in->handles * (size_t)in->handle_capacity);
        }
        in->handles[in->handle_count++] = e;
    }
    pthread_mutex_unlock(&in->lock);
    tb->cache[tb->cache_next++ % CACHE_SLOTS] = e;
    return e;
}

/* A handle about to be freed: later handles with the same value are new objects. */
static void forget(struct instance *in, int kind, const void *handle, size_t handle_size)
{
    uint64_t bits = handle_bits(handle, handle_size);
    int i;
    pthread_mutex_lock(&in->lock);
    for (i = 0; i < in->handle_count; i++)
        if (in->handles[i]->live && in->handles[i]->handle == bits && in->handles[i]->kind == kind)
            in->handles[i]->live = 0;
    __atomic_add_fetch(&in->generation, 1, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&in->lock);
}

/* One traced call in progress. */
struct traced {
    struct thread_state *ts;
    struct instance *in;
    struct thread_buffer *tb;
    struct handle_entry *comm;
    struct call_record r;
};

/* Starts recording `func` at `level`; 0 if this call is not to be recorded. */
static inline int begin(struct traced *t, int level, int func)
{
    struct instance *in = &instances[level];
    struct thread_state *ts;
    struct thread_buffer *tb;
    int depth;
    if (level >= MAX_LEVELS || !__atomic_load_n(&in->active, __ATOMIC_ACQUIRE))
        return 0;
    if (!function_interesting[func] && !options.all_functions)
        return 0;
    ts = &thread_state;
    depth = call_depth(ts, func);
    if (depth > 0 && !options.nested)
        return 0;
    tb = ts->buffers[level];
    if (__builtin_expect(tb == NULL, 0) && (tb = thread_buffer(in)) == NULL)
        return 0;
    t->ts = ts;
    t->in = in;
    t->tb = tb;
    t->comm = NULL;
    t->r = (struct call_record){.kind = R_CALL, .size = sizeof t->r, .func = (uint16_t)func,
                                .depth = (uint8_t)(depth > 255 ? 255 : depth), .comm = -1, .peer = -1, .root = -1,
                                .datatype = -1, .file = -1};
    if (ts->open_calls < MAX_OPEN) {
        ts->open_stack[ts->open_calls].func = (uint16_t)func;
        ts->open_stack[ts->open_calls].depth = t->r.depth;
    }
    ts->open_calls++;
    t->r.enter = ticks();
    return 1;
}

static inline void end(struct traced *t, int ret)
{
    t->r.leave = ticks();
    t->ts->open_calls--;
    if (ret != MPI_SUCCESS)
        t->r.flags |= CALL_FAILED;
    if ((t->r.peer & t->r.root & t->r.datatype & t->r.file) == -1 &&
        (t->r.tag | t->r.count | t->r.bytes | t->r.offset | (int64_t)t->r.request) == 0) {
        struct short_call_record s = {R_SHORT_CALL, sizeof s, t->r.func, t->r.depth, t->r.flags,
                                      t->r.enter, t->r.leave, t->r.comm, 0};
        append(t->in, t->tb, &s, sizeof s);
    } else {
        append(t->in, t->tb, &t->r, sizeof t->r);
    }
}

static int world_rank(struct handle_entry *comm, int rank)
{
    if (rank == MPI_ANY_SOURCE)
        return PEER_ANY;
    if (comm == NULL || rank < 0 || rank >= comm->size)
        return PEER_NONE;
    return comm->world[rank];
}

static void set_comm(struct traced *t, MPI_Comm comm)
{
    t->comm = lookup(t->in, t->tb, R_COMM, &comm, sizeof comm, NULL, 0);
    if (t->comm != NULL)
        t->r.comm = t->comm->id;
}

static void set_data(struct traced *t, int count, MPI_Datatype type)
{
    struct handle_entry *e = lookup(t->in, t->tb, R_TYPE, &type, sizeof type, NULL, 0);
    t->r.count = count;
    if (e != NULL) {
        t->r.datatype = e->id;
        t->r.bytes = (int64_t)count * e->size;
    }
}

static void set_request(struct traced *t, const MPI_Request *request)
{
    t->r.request = handle_bits(request, sizeof *request);
    t->r.flags |= CALL_HAS_REQUEST;
}

static void complete(struct traced *t, MPI_Request request, const MPI_Status *status)
{
    struct completion_record c;
    int bytes = 0;
    memset(&c, 0, sizeof c);
    c.kind = R_COMPLETION;
    c.size = sizeof c;
    c.request = handle_bits(&request, sizeof request);
    c.source = PEER_NONE;
    if (status != NULL && status->MPI_SOURCE >= 0) {
        /* receives only; sends leave the status undefined and the merger ignores it */
        c.source = status->MPI_SOURCE;
        c.tag = status->MPI_TAG;
        PMPI_Get_count(status, MPI_BYTE, &bytes);
        c.bytes = bytes;
    }
    append(t->in, t->tb, &c, sizeof c);
}

/* ---- clocks: offsets to world rank 0 at init and finalize, by PMPI ping-pong ---- */

static void measure_clock(struct instance *in, uint32_t phase)
{
    struct clock_record c;
    struct thread_buffer *tb = thread_buffer(in);
    MPI_Comm comm;
    int peer, ping;
    memset(&c, 0, sizeof c);
    c.kind = R_CLOCK;
    c.size = sizeof c;
    c.phase = phase;
    c.round_trip_ns = UINT64_MAX;
    PMPI_Comm_dup(MPI_COMM_WORLD, &comm); /* our own context: the application's tags are safe */
    for (peer = 1; peer < in->world_size; peer++) {
        for (ping = 0; ping < CLOCK_PINGS; ping++) {
            uint64_t sent, received, remote = 0;
            if (in->rank == 0) {
                PMPI_Recv(&remote, 1, MPI_UINT64_T, peer, ping, comm, MPI_STATUS_IGNORE);
                remote = now_ns();
                PMPI_Send(&remote, 1, MPI_UINT64_T, peer, ping, comm);
            } else if (in->rank == peer) {
                sent = now_ns();
                PMPI_Send(&sent, 1, MPI_UINT64_T, 0, ping, comm);
                PMPI_Recv(&remote, 1, MPI_UINT64_T, 0, ping, comm, MPI_STATUS_IGNORE);
                received = now_ns();
                if (received - sent < c.round_trip_ns) {
                    c.round_trip_ns = received - sent;
                    c.local_ns = sent + (received - sent) / 2;
                    c.offset_ns = (int64_t)(remote - c.local_ns);
                }
            }
        }
    }
    PMPI_Comm_free(&comm);
    if (in->rank == 0 || in->world_size == 1) {
        c.local_ns = now_ns();
        c.round_trip_ns = 0;
    }
    if (tb != NULL)
        append(in, tb, &c, sizeof c);
}

static void start_instance(int level)
{
    struct instance *in = &instances[level];
    struct timespec real;
    struct stat st;
    pthread_once(&options_once, read_options);
    in->level = level;
    pthread_mutex_init(&in->lock, NULL);
    pthread_key_create(&in->thread_key, thread_exit);
    PMPI_Comm_rank(MPI_COMM_WORLD, &in->rank);
    PMPI_Comm_size(MPI_COMM_WORLD, &in->world_size);
    in->origin_ns = now_ns();
    clock_gettime(CLOCK_REALTIME, &real);
    in->realtime_origin_ns = (uint64_t)real.tv_sec * 1000000000u + (uint64_t)real.tv_nsec;
    if (mkdir(options.dir, 0755) != 0 && errno != EEXIST)
        complain(in, "cannot create directory", options.dir);
    else if (stat(options.dir, &st) != 0 || !S_ISDIR(st.st_mode))
        complain(in, "not a directory:", options.dir);
    else
        __atomic_store_n(&in->active, 1, __ATOMIC_RELEASE);
    measure_clock(in, 0);
}

static void stop_instance(struct instance *in)
{
    struct thread_buffer *tb;
    __atomic_store_n(&in->active, 0, __ATOMIC_RELEASE);
    pthread_mutex_lock(&in->lock);
    for (tb = in->threads; tb != NULL; tb = tb->next_in_instance) {
        pthread_mutex_lock(&tb->lock);
        if (tb->fd >= 0)
            add_timer(tb);
        flush_locked(in, tb);
        if (tb->fd >= 0)
            close(tb->fd);
        tb->fd = -1;
        pthread_mutex_unlock(&tb->lock);
    }
    pthread_mutex_unlock(&in->lock);
}

/* ---- wrappers ---- */

static int traced_init(int func, uint64_t enter, int ret, int level)
{
    struct traced t;
    if (level >= MAX_LEVELS || ret != MPI_SUCCESS)
        return ret;
    start_instance(level);
    if (begin(&t, level, func)) {
        t.r.enter = enter;
        end(&t, ret);
    }
    return ret;
}

_EXTERN_C_ int TR_Init(int *argc, char ***argv, int level, vector *v)
{
    uint64_t enter = ticks();
    return traced_init(TF_INIT, enter, QMPI_Next_Init(argc, argv, level, v), level);
}

_EXTERN_C_ int TR_Init_thread(int *argc, char ***argv, int required, int *provided, int level, vector *v)
{
    uint64_t enter = ticks();
    return traced_init(TF_INIT_THREAD, enter, QMPI_Next_Init_thread(argc, argv, required, provided, level, v),
                       level);
}

_EXTERN_C_ int TR_Finalize(int level, vector *v)
{
    struct traced t;
    int traced = 0, ret;
    if (level < MAX_LEVELS && __atomic_load_n(&instances[level].active, __ATOMIC_ACQUIRE)) {
        measure_clock(&instances[level], 1);
        traced = begin(&t, level, TF_FINALIZE);
    }
    ret = QMPI_Next_Finalize(level, v);
    if (traced) {
        end(&t, ret);
        stop_instance(&instances[level]);
    }
    return ret;
}

/* What every point-to-point record holds: communicator, count, bytes, datatype, and
 * the peer (in MPI_COMM_WORLD terms) and tag. */
static void set_message(struct traced *t, MPI_Comm comm, int count, MPI_Datatype datatype, int peer, int tag)
{
    set_comm(t, comm);
    set_data(t, count, datatype);
    t->r.peer = world_rank(t->comm, peer);
    t->r.tag = tag;
}

/* Point-to-point sends: peer, tag, count, bytes, datatype, communicator. */
#define SEND_WRAPPER(Name, CODE)                                                                   \
    _EXTERN_C_ int TR_##Name(const void *buf, int count, MPI_Datatype datatype, int dest, int tag,  \
                             MPI_Comm comm, int level, vector *v)                                  \
    {                                                                                              \
        struct traced t;                                                                           \
        int ret;                                                                                   \
        if (!begin(&t, level, CODE))                                                               \
            return QMPI_Next_##Name(buf, count, datatype, dest, tag, comm, level, v);              \
        ret = QMPI_Next_##Name(buf, count, datatype, dest, tag, comm, level, v);                   \
        set_message(&t, comm, count, datatype, dest, tag);                                         \
        end(&t, ret);                                                                              \
        return ret;                                                                                \
    }
SEND_WRAPPER(Send, TF_SEND)
SEND_WRAPPER(Ssend, TF_SSEND)

_EXTERN_C_ int TR_Recv(void *buf, int count, MPI_Datatype datatype, int source, int tag, MPI_Comm comm,
                       MPI_Status *status, int level, vector *v)
{
    struct traced t;
    MPI_Status own;
    int ret, bytes = 0;
    if (!begin(&t, level, TF_RECV))
        return QMPI_Next_Recv(buf, count, datatype, source, tag, comm, status, level, v);
    if (status == MPI_STATUS_IGNORE)
        status = &own;
    ret = QMPI_Next_Recv(buf, count, datatype, source, tag, comm, status, level, v);
    /* what arrived, not what was asked for (MPI_ANY_SOURCE, MPI_ANY_TAG, shorter) */
    set_message(&t, comm, count, datatype, ret == MPI_SUCCESS ? status->MPI_SOURCE : source,
                ret == MPI_SUCCESS ? status->MPI_TAG : tag);
    if (ret == MPI_SUCCESS && PMPI_Get_count(status, MPI_BYTE, &bytes) == MPI_SUCCESS)
        t.r.bytes = bytes;
    end(&t, ret);
    return ret;
}

_EXTERN_C_ int TR_Isend(const void *buf, int count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm,
                        MPI_Request *request, int level, vector *v)
{
    struct traced t;
    int ret;
    if (!begin(&t, level, TF_ISEND))
        return QMPI_Next_Isend(buf, count, datatype, dest, tag, comm, request, level, v);
    ret = QMPI_Next_Isend(buf, count, datatype, dest, tag, comm, request, level, v);
    set_message(&t, comm, count, datatype, dest, tag);
    set_request(&t, request);
    end(&t, ret);
    return ret;
}

_EXTERN_C_ int TR_Irecv(void *buf, int count, MPI_Datatype datatype, int source, int tag, MPI_Comm comm,
                        MPI_Request *request, int level, vector *v)
{
    struct traced t;
    int ret;
    if (!begin(&t, level, TF_IRECV))
        return QMPI_Next_Irecv(buf, count, datatype, source, tag, comm, request, level, v);
    ret = QMPI_Next_Irecv(buf, count, datatype, source, tag, comm, request, level, v);
    set_message(&t, comm, count, datatype, source, tag);
    set_request(&t, request);
    end(&t, ret);
    return ret;
}

/* Completion records follow the call record they belong to; status sources are made
 * world ranks by the merger (it knows the request's communicator from Isend/Irecv). */
_EXTERN_C_ int TR_Wait(MPI_Request *request, MPI_Status *status, int level, vector *v)
{
    struct traced t;
    MPI_Status own;
    MPI_Request before;
    int ret;
    if (!begin(&t, level, TF_WAIT))
        return QMPI_Next_Wait(request, status, level, v);
    if (status == MPI_STATUS_IGNORE)
        status = &own;
    before = *request;
    ret = QMPI_Next_Wait(request, status, level, v);
    t.r.count = 1;
    set_request(&t, &before);
    end(&t, ret);
    if (ret == MPI_SUCCESS && before != MPI_REQUEST_NULL)
        complete(&t, before, status);
    return ret;
}

_EXTERN_C_ int TR_Waitall(int count, MPI_Request requests[], MPI_Status statuses[], int level, vector *v)
{
    struct traced t;
    MPI_Request small_before[64], *before = small_before;
    MPI_Status small_own[64], *own = NULL;
    int ret, i;
    if (!begin(&t, level, TF_WAITALL))
        return QMPI_Next_Waitall(count, requests, statuses, level, v);
    if (count > 64) {
        before = malloc(sizeof *before * (size_t)count);
        own = statuses == MPI_STATUSES_IGNORE ? malloc(sizeof *own * (size_t)count) : NULL;
    } else if (statuses == MPI_STATUSES_IGNORE) {
        own = small_own;
    }
    memcpy(before, requests, sizeof *before * (size_t)count);
    if (statuses == MPI_STATUSES_IGNORE)
        statuses = own;
    ret = QMPI_Next_Waitall(count, requests, statuses, level, v);
    t.r.count = count;
    end(&t, ret);
    if (ret == MPI_SUCCESS)
        for (i = 0; i < count; i++)
            if (before[i] != MPI_REQUEST_NULL)
                complete(&t, before[i], &statuses[i]);
    if (before != small_before)
        free(before);
    if (own != small_own)
        free(own);
    return ret;
}

_EXTERN_C_ int TR_Test(MPI_Request *request, int *flag, MPI_Status *status, int level, vector *v)
{
    struct traced t;
    MPI_Status own;
    MPI_Request before;
    int ret;
    if (!begin(&t, level, TF_TEST))
        return QMPI_Next_Test(request, flag, status, level, v);
    if (status == MPI_STATUS_IGNORE)
        status = &own;
    before = *request;
    ret = QMPI_Next_Test(request, flag, status, level, v);
    set_request(&t, &before);
    t.r.count = ret == MPI_SUCCESS && *flag;
    end(&t, ret);
    if (t.r.count && before != MPI_REQUEST_NULL)
        complete(&t, before, status);
    return ret;
}

_EXTERN_C_ int TR_Barrier(MPI_Comm comm, int level, vector *v)
{
    struct traced t;
    int ret;
    if (!begin(&t, level, TF_BARRIER))
        return QMPI_Next_Barrier(comm, level, v);
    ret = QMPI_Next_Barrier(comm, level, v);
    set_comm(&t, comm);
    end(&t, ret);
    return ret;
}

_EXTERN_C_ int TR_Bcast(void *buffer, int count, MPI_Datatype datatype, int root, MPI_Comm comm, int level,
                        vector *v)
{
    struct traced t;
    int ret;
    if (!begin(&t, level, TF_BCAST))
        return QMPI_Next_Bcast(buffer, count, datatype, root, comm, level, v);
    ret = QMPI_Next_Bcast(buffer, count, datatype, root, comm, level, v);
    set_comm(&t, comm);
    set_data(&t, count, datatype);
    t.r.root = world_rank(t.comm, root);
    end(&t, ret);
    return ret;
}

_EXTERN_C_ int TR_Reduce(const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype, MPI_Op op, int root,
                         MPI_Comm comm, int level, vector *v)
{
    struct traced t;
    int ret;
    if (!begin(&t, level, TF_REDUCE))
        return QMPI_Next_Reduce(sendbuf, recvbuf, count, datatype, op, root, comm, level, v);
    ret = QMPI_Next_Reduce(sendbuf, recvbuf, count, datatype, op, root, comm, level, v);
    set_comm(&t, comm);
    set_data(&t, count, datatype);
    t.r.root = world_rank(t.comm, root);
    end(&t, ret);
    return ret;
}

_EXTERN_C_ int TR_Allreduce(const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype, MPI_Op op,
                            MPI_Comm comm, int level, vector *v)
{
    struct traced t;
    int ret;
    if (!begin(&t, level, TF_ALLREDUCE))
        return QMPI_Next_Allreduce(sendbuf, recvbuf, count, datatype, op, comm, level, v);
    ret = QMPI_Next_Allreduce(sendbuf, recvbuf, count, datatype, op, comm, level, v);
    set_comm(&t, comm);
    set_data(&t, count, datatype);
    end(&t, ret);
    return ret;
}

/* A call that creates a communicator records the new one's id in `offset` (-1 for
 * MPI_COMM_NULL), defining it at once so its members are known. */
static void set_new_comm(struct traced *t, int ret, MPI_Comm created)
{
    struct handle_entry *e;
    t->r.offset = -1;
    if (ret == MPI_SUCCESS && created != MPI_COMM_NULL && (e = lookup(t->in, t->tb, R_COMM, &created,
                                                                       sizeof created, NULL, 0)) != NULL)
        t->r.offset = e->id;
}

_EXTERN_C_ int TR_Comm_split(MPI_Comm comm, int color, int key, MPI_Comm *newcomm, int level, vector *v)
{
    struct traced t;
    int ret;
    if (!begin(&t, level, TF_COMM_SPLIT))
        return QMPI_Next_Comm_split(comm, color, key, newcomm, level, v);
    ret = QMPI_Next_Comm_split(comm, color, key, newcomm, level, v);
    set_comm(&t, comm);
    set_new_comm(&t, ret, *newcomm);
    t.r.tag = color;
    end(&t, ret);
    return ret;
}

_EXTERN_C_ int TR_Comm_dup(MPI_Comm comm, MPI_Comm *newcomm, int level, vector *v)
{
    struct traced t;
    int ret;
    if (!begin(&t, level, TF_COMM_DUP))
        return QMPI_Next_Comm_dup(comm, newcomm, level, v);
    ret = QMPI_Next_Comm_dup(comm, newcomm, level, v);
    set_comm(&t, comm);
    set_new_comm(&t, ret, *newcomm);
    end(&t, ret);
    return ret;
}

_EXTERN_C_ int TR_Comm_free(MPI_Comm *comm, int level, vector *v)
{
    struct traced t;
    MPI_Comm freed = *comm;
    int ret;
    if (!begin(&t, level, TF_COMM_FREE))
        return QMPI_Next_Comm_free(comm, level, v);
    set_comm(&t, freed);
    ret = QMPI_Next_Comm_free(comm, level, v);
    forget(t.in, R_COMM, &freed, sizeof freed);
    end(&t, ret);
    return ret;
}

_EXTERN_C_ int TR_Comm_rank(MPI_Comm comm, int *rank, int level, vector *v)
{
    struct traced t;
    int ret;
    if (!begin(&t, level, TF_COMM_RANK))
        return QMPI_Next_Comm_rank(comm, rank, level, v);
    ret = QMPI_Next_Comm_rank(comm, rank, level, v);
    set_comm(&t, comm);
    end(&t, ret);
    return ret;
}

_EXTERN_C_ int TR_Comm_size(MPI_Comm comm, int *size, int level, vector *v)
{
    struct traced t;
    int ret;
    if (!begin(&t, level, TF_COMM_SIZE))
        return QMPI_Next_Comm_size(comm, size, level, v);
    ret = QMPI_Next_Comm_size(comm, size, level, v);
    set_comm(&t, comm);
    end(&t, ret);
    return ret;
}

_EXTERN_C_ int TR_File_open(MPI_Comm comm, const char *filename, int amode, MPI_Info info, MPI_File *fh, int level,
                            vector *v)
{
    struct traced t;
    MPI_Offset size = 0;
    struct handle_entry *e;
    int ret;
    if (!begin(&t, level, TF_FILE_OPEN))
        return QMPI_Next_File_open(comm, filename, amode, info, fh, level, v);
    ret = QMPI_Next_File_open(comm, filename, amode, info, fh, level, v);
    set_comm(&t, comm);
    if (ret == MPI_SUCCESS) {
        PMPI_File_get_size(*fh, &size); /* the size the file had when it was opened */
        if ((e = lookup(t.in, t.tb, R_FILE, fh, sizeof *fh, filename, size)) != NULL)
            t.r.file = e->id;
    }
    t.r.bytes = size;
    end(&t, ret);
    return ret;
}

_EXTERN_C_ int TR_File_close(MPI_File *fh, int level, vector *v)
{
    struct traced t;
    MPI_File closed = *fh;
    struct handle_entry *e;
    int ret;
    if (!begin(&t, level, TF_FILE_CLOSE))
        return QMPI_Next_File_close(fh, level, v);
    if ((e = lookup(t.in, t.tb, R_FILE, &closed, sizeof closed, "?", 0)) != NULL)
        t.r.file = e->id;
    ret = QMPI_Next_File_close(fh, level, v);
    forget(t.in, R_FILE, &closed, sizeof closed);
    end(&t, ret);
    return ret;
}

#define FILE_AT_WRAPPER(Name, CODE, BUF)                                                           \
    _EXTERN_C_ int TR_##Name(MPI_File fh, MPI_Offset offset, BUF buf, int count, MPI_Datatype datatype, \
                             MPI_Status *status, int level, vector *v)                             \
    {                                                                                              \
        struct traced t;                                                                           \
        struct handle_entry *e;                                                                    \
        int ret;                                                                                   \
        if (!begin(&t, level, CODE))                                                               \
            return QMPI_Next_##Name(fh, offset, buf, count, datatype, status, level, v);           \
        ret = QMPI_Next_##Name(fh, offset, buf, count, datatype, status, level, v);                \
        if ((e = lookup(t.in, t.tb, R_FILE, &fh, sizeof fh, "?", 0)) != NULL)                      \
            t.r.file = e->id;                                                                      \
        set_data(&t, count, datatype);                                                             \
        t.r.offset = offset;                                                                       \
        end(&t, ret);                                                                              \
        return ret;                                                                                \
    }
FILE_AT_WRAPPER(File_write_at, TF_FILE_WRITE_AT, const void *)
FILE_AT_WRAPPER(File_read_at, TF_FILE_READ_AT, void *)

/* ---- every other MPI function (QMPI_TRACE_FUNCTIONS=all) ----
 * trace_all.qmpi makes a wrapper for every function of the core's enumeration that
 * calls trace_all_begin before the next link and trace_all_end after it;
 * sample_tools/Makefile links that generated C into libtrace.so, its get_interceptions
 * renamed trace_all_get_interceptions. Such a call is a SHORT CALL record without
 * arguments (generic code cannot know them), with code TF_COUNT + core index, named in
 * a FUNCTION record before its first call in each file (not all up front: an MPI 5
 * core has 700 functions, a thread calls a few). trace.c built alone (bench/) has no
 * generated part: the weak reference is NULL and `all` adds only the table's ordinary
 * functions. Hidden: one library, so the wrappers call these directly, not via PLT. */
_Static_assert(TF_COUNT + NUM_MPI_FUNCS <= UINT16_MAX, "function codes are 16 bits in call records");
extern char *trace_all_get_interceptions(int i) __attribute__((weak, visibility("hidden")));
__attribute__((visibility("hidden"))) uint64_t trace_all_begin(int level, int index);
__attribute__((visibility("hidden"))) void trace_all_end(int level, int index, uint64_t enter, int failed);

/* begin() for a function outside the table: its enter ticks, or 0 if not recorded. The
 * depth goes on the thread's open-call stack, where trace_all_end finds it. */
uint64_t trace_all_begin(int level, int index)
{
    struct thread_state *ts = &thread_state;
    struct thread_buffer *tb;
    int func = TF_COUNT + index, depth;
    uint64_t enter;
    if ((unsigned)level >= MAX_LEVELS || !__atomic_load_n(&instances[level].active, __ATOMIC_ACQUIRE))
        return 0;
    depth = call_depth(ts, func);
    if (depth > 0 && !options.nested)
        return 0;
    tb = ts->buffers[level];
    if (__builtin_expect(tb == NULL, 0) && (tb = thread_buffer(&instances[level])) == NULL)
        return 0;
    if (__builtin_expect(!(tb->named[index / 8] & (1u << index % 8)), 0)) {
        int32_t code = func;
        const char *name = QMPI_Function_name(index);
        tb->named[index / 8] |= (unsigned char)(1u << index % 8);
        append_variable(&instances[level], tb, R_FUNCTION, &code, 4, name, strlen(name) + 1);
    }
    if (ts->open_calls < MAX_OPEN) {
        ts->open_stack[ts->open_calls].func = (uint16_t)func;
        ts->open_stack[ts->open_calls].depth = (uint8_t)(depth > 255 ? 255 : depth);
    }
    ts->open_calls++;
    enter = ticks();
    return enter != 0 ? enter : 1;
}

/* end() for it; `failed`: the function returns an MPI error code and it is not MPI_SUCCESS. */
void trace_all_end(int level, int index, uint64_t enter, int failed)
{
    uint64_t leave = ticks();
    struct thread_state *ts = &thread_state;
    struct short_call_record s = {R_SHORT_CALL, sizeof s, (uint16_t)(TF_COUNT + index), 255,
                                  failed ? CALL_FAILED : 0, enter, leave, -1, 0};
    if (ts->open_calls <= MAX_OPEN)
        s.depth = ts->open_stack[ts->open_calls - 1].depth;
    ts->open_calls--;
    append(&instances[level], ts->buffers[level], &s, sizeof s);
}

/* Called when the core builds the chain: the options decide which wrappers it installs. */
_EXTERN_C_ char *get_interceptions(int i)
{
    switch (i) {
#define INTERCEPT(code, name, interesting)                                                         \
    case _MPI_##name:                                                                              \
        return "TR_" #name;
        TRACE_FUNCTIONS(INTERCEPT)
#undef INTERCEPT
    default:
        pthread_once(&options_once, read_options);
        return options.all_functions && trace_all_get_interceptions != NULL ? trace_all_get_interceptions(i)
                                                                            : "NULL";
    }
}
