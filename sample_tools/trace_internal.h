/* trace_internal.h: what the trace tool's C files share (trace.c: files, buffers, handles,
 * lifecycle; trace_requests.c: the Wait/Test/Start family; trace_args.c: calls recorded by
 * parameter role). One library: everything here is hidden, so calls between the files
 * are direct. The generated wrappers see only trace_roles.h. */
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
    int peers;                   /* communicator: the processes a collective exchanges with (remote size of an
                                    intercommunicator) */
    int in_degree, out_degree;   /* communicator: neighbours of its topology (else peers) */
    struct handle_entry *parent; /* window: its communicator */
    int live;
};

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
    char data[];
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

/* Everything a thread keeps, in one TLS object: one __tls_get_addr per traced call. */
struct thread_state {
    struct thread_buffer *buffers[MAX_LEVELS];
    int open_calls;
    struct {
        uint16_t func;
        uint8_t depth;
    } open_stack[MAX_OPEN];
};
HIDDEN extern __thread struct thread_state trace_thread;

struct trace_options {
    const char *dir;
    int flush_every_record, nested, all_functions;
    size_t buffer_bytes;
    const char *bad_buffer; /* a QMPI_TRACE_BUFFER not taken, said once by rank 0 */
};
HIDDEN extern struct trace_options trace_options;

/* One traced call in progress. */
struct traced {
    struct thread_state *ts;
    struct instance *in;
    struct thread_buffer *tb;
    struct handle_entry *comm;
    struct call_record r;
};

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

/* trace.c */
HIDDEN void trace_read_options(void);
HIDDEN struct thread_buffer *trace_thread_buffer(struct instance *in);
HIDDEN void trace_append(struct instance *in, struct thread_buffer *tb, const void *record, size_t size);
HIDDEN void trace_append_variable(struct instance *in, struct thread_buffer *tb, int kind, const void *fixed,
                                  size_t fixed_size, const void *tail, size_t tail_size);
HIDDEN struct handle_entry *trace_lookup(struct instance *in, struct thread_buffer *tb, int kind, const void *handle,
                                         size_t handle_size, const struct definition *d);
HIDDEN void trace_forget(struct instance *in, int kind, const void *handle, size_t handle_size);
HIDDEN int trace_begin(struct traced *t, int level, int index, int kind);
HIDDEN void trace_end(struct traced *t, int failed);
HIDDEN int trace_world_rank(const struct handle_entry *comm, int rank);
HIDDEN void trace_set_comm(struct traced *t, MPI_Comm comm);
HIDDEN uint64_t trace_handle_bits(const void *handle, size_t size);
/* trace_requests.c */
HIDDEN int trace_own_function(int index);
HIDDEN char *trace_requests_interception(int index);

#endif
