/* roles.h: what the trace tool's generated wrappers (trace_roles.qmpi) hand to
 * record.h. A wrapper knows its function's kind and which parameter plays which role
 * (qmpigen/mpi/roles.py, from the MPI's own mpi.h); it stores each argument, raw, in a
 * struct trace_args on its stack before the call. trace_args_prepare makes the call
 * record from them before the call (communicator and datatype ids, world ranks, bytes:
 * every lookup), and trace_args_finish adds what the call made or says after it (the
 * handles made, a status, a request) and writes the record: after a call that entered
 * the kernel, every cache line the tracer touches is a miss. */
#ifndef QMPI_TRACE_ROLES_H
#define QMPI_TRACE_ROLES_H
#include <mpi.h>
#include <stdint.h>
#include "format.h"

/* One bit per role a wrapper stored (have): record.h tests only what a wrapper's bits say
 * it stored, so what it did not is no test in its code. */
enum {
    HAVE_comm = 1u << 0,
    HAVE_dest = 1u << 1,
    HAVE_source = 1u << 2,
    HAVE_root = 1u << 3,
    HAVE_target = 1u << 4,
    HAVE_tag = 1u << 5,
    HAVE_recv_tag = 1u << 6,
    HAVE_count = 1u << 7,
    HAVE_datatype = 1u << 8,
    HAVE_send_count = 1u << 9,
    HAVE_send_type = 1u << 10,
    HAVE_recv_count = 1u << 11,
    HAVE_recv_type = 1u << 12,
    HAVE_send_counts = 1u << 13,
    HAVE_recv_counts = 1u << 14,
    HAVE_send_types = 1u << 15,
    HAVE_recv_types = 1u << 16,
    HAVE_request = 1u << 17,
    HAVE_status = 1u << 18,
    HAVE_file = 1u << 19,
    HAVE_new_file = 1u << 20,
    HAVE_freed = 1u << 21, /* a handle freed (TRACE_SET_FREED: freed_kind says which) */
    HAVE_offset = 1u << 22,
    HAVE_window = 1u << 23,
    HAVE_new_window = 1u << 24,
    HAVE_mode = 1u << 25, /* access mode, whence, atomicity flag */
    HAVE_new_type = 1u << 26,
    HAVE_file_name = 1u << 27,
    HAVE_new_comm = 1u << 28,
    HAVE_message = 1u << 30,
};
enum { SEND_PER_PEER = 1, RECV_PER_PEER = 2 }; /* per_peer: the scalar count is for each peer */

struct thread_state;
struct thread_buffer;
struct instance;
struct handle_entry;

/* One traced call in progress: its record, and where it goes. */
struct traced {
    struct thread_state *ts;
    struct instance *in;
    struct thread_buffer *tb;
    struct handle_entry *comm;
    uint32_t size;   /* its record's size in the buffer, written before the call (calls.h) */
    unsigned opened; /* the thread's calls begun when it began */
    struct call_record r;
};

struct trace_args {
    struct traced t; /* the thread's state and buffer (trace_args_begin), the record (trace_args_prepare) */
    int index, kind;
    uint8_t depth, per_peer;
    uint32_t have;
    MPI_Comm comm, *new_comm;
    int dest, source, root, target, tag, recv_tag, mode; /* mode: access mode, whence, atomicity flag */
    int64_t count, send_count, recv_count;
    const int *send_counts, *recv_counts;           /* arrays of int counts */
    const MPI_Count *send_counts_c, *recv_counts_c; /* ... or of MPI_Count (large-count functions) */
    MPI_Datatype datatype, send_type, recv_type, *new_type;
    const MPI_Datatype *send_types, *recv_types;
    MPI_Request *request;
    MPI_Status *status, own_status;
    MPI_File file, *new_file;
    const char *file_name;
    int64_t offset; /* a file offset, view displacement or size; a target displacement */
    MPI_Win window, *new_window;
    MPI_Message message, *message_out; /* the matched message before the call, and where it goes */
    int freed_kind, freed_id;          /* a handle the call frees: its kind (R_*) and id, read before */
    uint64_t freed_bits;
};

/* A communicator, file, window or datatype the call frees (R_COMM, ...): looked up now,
 * while it is still valid. */
__attribute__((visibility("hidden"))) void trace_args_freed(struct trace_args *a, int kind, const void *handle,
                                                            size_t size);

/* Whether the record reads the call's status. A file write's says nothing its count and
 * datatype do not, and an ignored one costs the MPI its filling in; a file read's says how
 * many bytes were read (a short read at the end of the file). */
static inline int trace_reads_status(int kind)
{
    return kind != TRACE_KIND_file_write;
}

/* A role's argument, stored; its bit goes into the wrapper's local <a>_have (a constant
 * the compiler folds into record.h's inline code: only the roles there are tested). */
#define TRACE_SET(a, role, value) ((a).role = (value), a##_have |= HAVE_##role)
/* A handle the call frees, read before the call (it comes back as the null handle). */
#define TRACE_SET_FREED(a, on, kind, pointer)                                                                          \
    ((on) && (pointer) != NULL ? trace_args_freed(&(a), kind, (pointer), sizeof *(pointer)) : (void)0,                 \
     a##_have |= HAVE_freed)
/* A handle the call reads through a pointer (MPI_Type_commit's datatype). */
#define TRACE_SET_FROM(a, role, pointer) ((pointer) != NULL ? (void)TRACE_SET(a, role, *(pointer)) : (void)0)
/* A matched message: its handle before the call (Mrecv takes it), and where it goes
 * (Mprobe fills it). */
#define TRACE_SET_MESSAGE(a, pointer)                                                                                  \
    ((a).message_out = (pointer), (a).message = (pointer) != NULL ? *(pointer) : MPI_MESSAGE_NULL,                     \
     a##_have |= HAVE_message)
#define TRACE_SET_PER_PEER(a, role, flag, value) (TRACE_SET(a, role, (int64_t)(value)), (a).per_peer |= (flag))
/* Count arrays come as int or MPI_Count (the large-count `_c` functions). */
#define TRACE_SET_COUNTS(a, side, value)                                                                               \
    (_Generic((value), const MPI_Count *: (void)((a).side##_counts_c = (const MPI_Count *)(const void *)(value)),   \
              MPI_Count *: (void)((a).side##_counts_c = (const MPI_Count *)(const void *)(value)),                  \
              default: (void)((a).side##_counts = (const int *)(const void *)(value))),                             \
     a##_have |= HAVE_##side##_counts)
/* A status the application ignores is one the tracer still reads: its own. Its source
 * is set to MPI_ANY_SOURCE first, which no filled status holds: an MPI_Iprobe that
 * matched nothing leaves the status as it was, and it is then not read. */
#define TRACE_SET_STATUS(a, on, status)                                                                                \
    do {                                                                                                               \
        if ((on) && (status) == MPI_STATUS_IGNORE)                                                                     \
            (status) = &(a).own_status;                                                                                \
        if ((on) && (status) != NULL)                                                                                  \
            (status)->MPI_SOURCE = MPI_ANY_SOURCE;                                                                     \
        TRACE_SET(a, status, status);                                                                                  \
    } while (0)

#endif
