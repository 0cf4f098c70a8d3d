/* trace_internal.h: what the trace tool's C files share (trace.c: files, buffers, handles,
 * lifecycle; trace_requests.c: the Wait/Test/Start family; trace_record.h and trace_args.c:
 * calls recorded by parameter role). One library: everything here is hidden, so calls
 * between the files are direct. The generated wrappers include trace_record.h. */
#ifndef QMPI_TRACE_INTERNAL_H
#define QMPI_TRACE_INTERNAL_H
#define _GNU_SOURCE
#include <mpi.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>
#include <time.h>
#include "qmpi.h"
#include "trace_format.h"
#include "trace_roles.h" /* struct traced */
#if defined(__x86_64__) || defined(__i386__)
#include <x86intrin.h>
#endif

#define HIDDEN __attribute__((visibility("hidden")))
#define MAX_LEVELS 64
#define CACHE_SLOTS 16
#define MAX_OPEN 32

/* A communicator, datatype, file or window known to an instance; never changes once
 * published. */
struct handle_entry {
    int kind; /* R_COMM, R_TYPE, R_FILE, R_WINDOW */
    uint64_t handle;
    int id, size;                /* size: communicator size, datatype size */
    int *world;                  /* communicator: world rank of each local rank */
    int rank;                    /* communicator: this process's rank in it */
    int peers;                   /* communicator: the processes a collective exchanges with (remote size of an
                                    intercommunicator) */
    int in_degree, out_degree;   /* communicator: neighbours of its topology (else peers) */
    struct handle_entry *parent; /* window: its communicator */
    int live;
};

/* The per-thread handle cache: CACHE_SLOTS entries, each handle's home slot by hash
 * (trace_cache_slot); an entry found elsewhere moves home. */
struct thread_buffer {
    pthread_mutex_t lock; /* flushes only: appends come from the owning thread alone */
    int fd, thread;
    size_t used;
    uint64_t calls; /* call records appended: the END record's count */
    uint64_t last_timer_ns;
    unsigned cache_generation;
    struct handle_entry *cache[CACHE_SLOTS];
    unsigned cache_next;
    struct thread_buffer *next_in_instance;
    unsigned char named[(NUM_MPI_FUNCS + 7) / 8]; /* core indices whose FUNCTION record this file has */
    char data[] __attribute__((aligned(8)));
};

struct instance {
    int active; /* between MPI_Init and MPI_Finalize */
    int rank, world_size;
    int level;
    pthread_mutex_t lock; /* handles, thread list */
    pthread_key_t thread_key;
    unsigned generation; /* bumped when a handle dies, so thread caches forget it */
    int next_thread, next_id[R_WINDOW + 1];
    struct handle_entry **handles;
    int handle_count, handle_capacity;
    struct thread_buffer *threads;
    uint64_t origin_ns, realtime_origin_ns;
    uint64_t run_id;
};
HIDDEN extern struct instance trace_instances[MAX_LEVELS];

/* Everything a thread keeps, in one TLS object (reached through trace_thread_self). */
struct thread_state {
    struct thread_buffer *buffers[MAX_LEVELS];
    int open_calls;
    struct {
        uint16_t func;
        uint8_t depth;
    } open_stack[MAX_OPEN];
};
HIDDEN extern __thread struct thread_state trace_thread;
/* The same, found through 8 bytes of static TLS (the initial-exec model: one load): a
 * dlopen'ed library's own TLS costs a call per access. glibc keeps spare static TLS for
 * such libraries; were it used up, dlopen would refuse the tool, which the core reports. */
HIDDEN extern __thread struct thread_state *trace_thread_self __attribute__((tls_model("initial-exec")));

struct trace_options {
    const char *dir;
    int flush_every_record, nested, all_functions;
    size_t buffer_bytes;
    const char *bad_buffer; /* a QMPI_TRACE_BUFFER not taken, said once by rank 0 */
};
HIDDEN extern struct trace_options trace_options;

/* What a new handle's definition needs beyond the handle. */
struct definition {
    const char *file_name; /* R_FILE */
    MPI_Offset file_size;
    struct handle_entry *comm; /* R_WINDOW: the communicator it was created on */
};

static inline uint64_t trace_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Call times are ticks of the cheapest clock that counts at a constant rate (the TSC on
 * x86-64, CNTVCT on aarch64: ~13 ns to read on this VM against ~53 ns for
 * clock_gettime); timer records pair a tick count with CLOCK_MONOTONIC ns so the merger
 * converts ticks to ns by a linear fit over the rank's pairs. */
static inline uint64_t trace_ticks(void)
{
#if defined(__x86_64__) || defined(__i386__)
    return __rdtsc();
#elif defined(__aarch64__)
    uint64_t value;
    __asm__ volatile("mrs %0, cntvct_el0" : "=r"(value));
    return value;
#else
    return trace_now_ns();
#endif
}

/* Traced calls open on this thread, over all instances, innermost last. A call arriving
 * while another function's call is open was made below the application's call by a
 * tool between two instances (TBcast's Send inside Bcast): it is nested one deeper. The
 * same function arriving is the same call passing down the chain, at the same depth. */
static inline int trace_call_depth(const struct thread_state *ts, int func)
{
    if (ts->open_calls == 0)
        return 0;
    if (ts->open_calls > MAX_OPEN)
        return 255;
    return ts->open_stack[ts->open_calls - 1].depth + (ts->open_stack[ts->open_calls - 1].func != func);
}

/* The buffer keeps room for a timer and an END record after any record (see trace.c's
 * trace_append). */
#define RESERVED_BYTES (sizeof(struct timer_record) + sizeof(struct end_record))

/* trace.c */
HIDDEN void trace_read_options(void);
HIDDEN struct thread_buffer *trace_thread_buffer(struct instance *in);
HIDDEN void trace_append(struct instance *in, struct thread_buffer *tb, const void *record, size_t size);
HIDDEN void trace_append_variable(struct instance *in, struct thread_buffer *tb, int kind, const void *fixed,
                                  size_t fixed_size, const void *tail, size_t tail_size);
HIDDEN struct handle_entry *trace_lookup_slow(struct instance *in, struct thread_buffer *tb, int kind, uint64_t bits,
                                              const void *handle, const struct definition *d);
HIDDEN void trace_forget(struct instance *in, int kind, const void *handle, size_t handle_size);
HIDDEN void trace_name_function(struct instance *in, struct thread_buffer *tb, int index, int kind);
HIDDEN int trace_begin(struct traced *t, int level, int index, int kind);
HIDDEN void trace_end(struct traced *t, int failed);
HIDDEN int trace_world_rank(const struct handle_entry *comm, int rank);

/* ---- the hot path, inline in every file: no call between the C files per traced call ---- */

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

static inline uint64_t trace_handle_bits(const void *handle, size_t size)
{
    uint64_t bits = 0;
    memcpy(&bits, handle, size < sizeof bits ? size : sizeof bits);
    return bits;
}

/* A handle's home slot in the thread's cache (CACHE_SLOTS = 16: the top 4 bits of a
 * multiplicative hash of the handle and its kind). */
static inline unsigned trace_cache_slot(int kind, uint64_t bits)
{
    _Static_assert(CACHE_SLOTS == 16, "the hash keeps 4 bits");
    return (unsigned)(((bits ^ (bits >> 32)) + (uint64_t)kind) * 0x9E3779B97F4A7C15u >> 60);
}

/* The entry for a communicator, datatype, file or window handle: from its home slot in
 * this thread's cache, else trace_lookup_slow (the other slots, the instance's table, or
 * a new entry defined in this thread's file). */
static inline struct handle_entry *trace_lookup(struct instance *in, struct thread_buffer *tb, int kind,
                                                const void *handle, size_t handle_size, const struct definition *d)
{
    uint64_t bits = trace_handle_bits(handle, handle_size);
    struct handle_entry *e = tb->cache[trace_cache_slot(kind, bits)];
    if (__builtin_expect(e != NULL && e->handle == bits && e->kind == kind &&
                             tb->cache_generation == __atomic_load_n(&in->generation, __ATOMIC_ACQUIRE),
                         1))
        return e;
    return trace_lookup_slow(in, tb, kind, bits, handle, d);
}

static inline void trace_set_comm(struct traced *t, MPI_Comm comm)
{
    t->comm = trace_lookup(t->in, t->tb, R_COMM, &comm, sizeof comm, NULL);
    if (t->comm != NULL)
        t->r.comm = t->comm->id;
}

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

/* trace_requests.c */
HIDDEN int trace_own_function(int index);
HIDDEN char *trace_requests_interception(int index);

#endif
