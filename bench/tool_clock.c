/* tool_clock.c: the least a tracer does, as the floor of the trace tool's per-call rows
 * (bench/trace_bench.py): an empty typed tool (tool_typed.c) that also reads the tick
 * counter before and after the next call, as the trace tool does (trace_ticks,
 * sample_tools/trace/state.h), and stores the function and the two times into a
 * thread-local ring of records. What the trace tool costs beyond it is what its records
 * of the arguments, its handle lookups, its buffer and its crash-safety cost; the two
 * clock reads themselves no tracer can do without.
 *
 * Build: mpicc -O2 -shared -fPIC -Wall -Wextra -Werror -I<core> -I../sample_tools/trace tool_clock.c -o libqbclock.so
 * Run:   TOOLS=./libqbclock.so ./bench_core call --call iprobe --pair-pmpi */
#include "state.h"
#include <stdlib.h>

struct timed_call {
    uint64_t func, enter, leave;
};

#define RING 4096 /* records: 96 KiB a thread, written round and round */
/* The thread's ring through initial-exec TLS (one load), as the trace tool reaches its
 * state: a dlopen'ed library's own TLS would cost a call to __tls_get_addr per access. */
static __thread struct timed_call *ring __attribute__((tls_model("initial-exec")));
static __thread unsigned next_record __attribute__((tls_model("initial-exec")));
static struct timed_call no_ring[1]; /* without memory: one record, overwritten */

static inline struct timed_call *next_slot(void)
{
    if (__builtin_expect(ring == NULL, 0) && (ring = calloc(RING, sizeof *ring)) == NULL)
        return no_ring;
    return &ring[next_record++ % RING];
}

/* The record of a call to core function `index` made of `call`: enter time, the call,
 * leave time. */
#define TIMED(index, call)                                                                                             \
    do {                                                                                                               \
        struct timed_call *r = next_slot();                                                                            \
        int rc;                                                                                                        \
        r->func = (index);                                                                                             \
        r->enter = trace_ticks();                                                                                      \
        rc = (call);                                                                                                   \
        r->leave = trace_ticks();                                                                                      \
        return rc;                                                                                                     \
    } while (0)

_EXTERN_C_ int QB_Iprobe(int source, int tag, MPI_Comm comm, int *flag, MPI_Status *status, int i, vector *v)
{
    TIMED(_MPI_Iprobe, QMPI_Next_Iprobe(source, tag, comm, flag, status, i, v));
}

_EXTERN_C_ int QB_Allreduce(const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype, MPI_Op op,
                            MPI_Comm comm, int i, vector *v)
{
    TIMED(_MPI_Allreduce, QMPI_Next_Allreduce(sendbuf, recvbuf, count, datatype, op, comm, i, v));
}

_EXTERN_C_ int QB_File_write_at(MPI_File fh, MPI_Offset offset, const void *buf, int count, MPI_Datatype datatype,
                                MPI_Status *status, int i, vector *v)
{
    TIMED(_MPI_File_write_at, QMPI_Next_File_write_at(fh, offset, buf, count, datatype, status, i, v));
}

_EXTERN_C_ int QB_File_seek(MPI_File fh, MPI_Offset offset, int whence, int i, vector *v)
{
    TIMED(_MPI_File_seek, QMPI_Next_File_seek(fh, offset, whence, i, v));
}

_EXTERN_C_ char *get_interceptions(int i)
{
    switch (i) {
    case _MPI_Iprobe:
        return "QB_Iprobe";
    case _MPI_Allreduce:
        return "QB_Allreduce";
    case _MPI_File_write_at:
        return "QB_File_write_at";
    case _MPI_File_seek:
        return "QB_File_seek";
    default:
        return NULL;
    }
}
