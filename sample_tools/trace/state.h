/* state.h: the trace tool's state, shared by its C files (the types every layer reads:
 * instances, thread buffers, handle entries, options), and the clocks. Functions live
 * with their layer, each in its own header (lifecycle.c lists them). One library:
 * everything is hidden, so calls between the files are direct. */
#ifndef QMPI_TRACE_STATE_H
#define QMPI_TRACE_STATE_H
#define _GNU_SOURCE
#include <mpi.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>
#include <time.h>
#include "qmpi.h"
#include "format.h"
#include "roles.h" /* struct traced */

#define HIDDEN __attribute__((visibility("hidden")))
#define MAX_LEVELS 64
#define CACHE_SLOTS 32
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

/* A slot of a thread's handle cache: the entry, and beside its handle the entry's kind,
 * id and size (which never change once published), so that a hit reads the slot alone.
 * After a system call (an MPI-IO call's) the tracer's data is out of the CPU's caches,
 * and each load that waits on another costs a miss: the entry behind a pointer was one
 * more on every lookup (docs/performance.md). */
struct cache_slot {
    uint64_t handle;
    struct handle_entry *entry; /* NULL: the slot is empty (kind 0, which no handle kind is) */
    int kind, id, size;
};
_Static_assert(sizeof(struct cache_slot) == 32, "two slots, a pair, to a 64-byte cache line");

/* A thread's records for one instance: its buffer, the per-thread handle cache
 * (CACHE_SLOTS slots in pairs: a handle is in its home slot, trace_cache_slot, or the
 * other of the pair) and its rank file. The buffer is the thread's tail file mapped
 * (sink.c: what a crash leaves), or heap memory where that cannot be. At `used` is a zero
 * word, or the record of the call the thread is in (duration 0). */
struct thread_buffer {
    /* the hot path's fields first */
    char *data;
    size_t used;    /* bytes of records in the buffer */
    size_t limit;   /* room for records before a flush is due: the buffer's size (0: after
                       each record, QMPI_TRACE_FLUSH=record) */
    uint64_t calls; /* call records appended: the END record's count */
    unsigned cache_generation;
    struct cache_slot cache[CACHE_SLOTS] __attribute__((aligned(64))); /* each pair one cache line */
    unsigned char named[(NUM_MPI_FUNCS + 7) / 8]; /* core indices whose FUNCTION record this file has */
    /* the rest: flushes and files (sink.c) */
    pthread_mutex_t lock; /* flushes only: appends come from the owning thread alone */
    int fd, thread;
    int busy;    /* in a flush or stop: the signal handler leaves the buffer alone */
    int stopped; /* tracing stopped for this thread (the file could not be written) */
    size_t capacity;
    struct tail_header *tail; /* the mapped tail file (NULL: the buffer is on the heap) */
    uint64_t flushed;         /* bytes written to the rank file */
    uint64_t last_timer_ns;
    char *name; /* the rank file's name in the trace directory */
    struct thread_buffer *next_in_instance;
};

struct instance {
    int active; /* between MPI_Init and MPI_Finalize */
    int rank, world_size;
    int level;
    int dirfd;             /* the trace directory, checked (files.c) */
    int users;             /* MPI_Init and MPI_Session_init calls not yet finalized: the last stops the instance */
    int ended;             /* stopped by its last finalize: its rank files are closed, and stay so */
    MPI_Group world_group; /* the processes of world ranks: MPI_COMM_WORLD's group, or mpi://WORLD's */
    pthread_mutex_t lock;  /* handles, thread list */
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
    unsigned opened; /* traced calls begun on this thread: one begun inside another (nested) is seen by it */
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
    int flush_every_record, buffered, nested, all_functions, verbose;
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
    return __builtin_ia32_rdtsc(); /* what x86intrin.h's __rdtsc is; that header costs every C file 0.5 s to read */
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

/* The buffer keeps room for a timer and an END record after any record, and the zero
 * word that follows the last one (sink.c). A call's record needs at most CALL_ROOM: its
 * COMPACT_CALL, and a signal's record after it. */
#define RESERVED_BYTES (sizeof(struct timer_record) + sizeof(struct end_record) + 8)
#define CALL_ROOM (COMPACT_CALL_MAX + sizeof(struct signal_record) + 8)

#endif
