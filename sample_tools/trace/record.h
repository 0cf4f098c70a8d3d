/* record.h: a call's record from the arguments a generated wrapper stored by role
 * (roles.h, trace_roles.qmpi). Inline in every generated wrapper: each knows its
 * function's kind and which roles it stored, so the compiler keeps only the code those
 * roles need (a File_write_at's record is a few stores and two handle lookups, not the
 * test of every role); what is rare or long (statuses, handles made, probes' messages,
 * count arrays) is in args.c.
 *
 * What each role becomes (docs/trace-format.md, CALL record):
 *   comm -> comm (its id); dest, root, source -> world ranks (peer, root, source);
 *   target -> peer (a world rank, through the window's communicator); tag, recv_tag;
 *   count x datatype -> count, datatype, bytes; the send side (send_count x send_type,
 *   per-peer counts, count arrays) -> bytes, the receive side -> recv_bytes;
 *   request -> request; file, window -> their ids; offset, target_disp -> offset;
 *   access mode, whence, atomicity -> tag; a handle made -> created; a handle freed ->
 *   comm, file, window or datatype, and forgotten.
 * A status (the application's, or the tracer's own when it passes MPI_STATUS_IGNORE)
 * says what arrived: source, tag and bytes of a receive. */
#ifndef QMPI_TRACE_RECORD_H
#define QMPI_TRACE_RECORD_H
#include "args.h"
#include "calls.h"
#include "handles.h"

/* A wrapper's record: inline, so that each keeps only the code of its roles; or one copy
 * out of line that tests the role bits at run time (args.c), for the calls
 * a program makes once per object, whose speed is not the point: a persistent request's
 * init (its starts are traced in requests.c), a handle made or freed, a file opened,
 * closed or deleted. Those are a third of the generated wrappers (117 of 363 on MPICH):
 * inline, a sixth of trace_roles.c's compile time. With TRACE_RECORDS_SHARED (make -C sample_tools
 * TRACE_RECORDS=shared) every wrapper uses the copy out of line: the same C, compiled once
 * instead of in each of some 360 wrappers (trace_roles.c in 10 s against 28 at -O2 -g,
 * under ASan 17 s against 152), for builds whose speed is not the point, as sanitizer
 * builds; a traced call then costs more (docs/tracing.md). `kind` is a constant in every
 * wrapper: the compiler keeps one of the two calls. */
#ifdef TRACE_RECORDS_SHARED
#define RECORD_SHARED(kind) 1
#else
#define RECORD_SHARED(kind)                                                                                            \
    ((kind) == TRACE_KIND_send_init || (kind) == TRACE_KIND_recv_init || (kind) == TRACE_KIND_collective_init ||       \
     (kind) == TRACE_KIND_neighbor_init || (kind) == TRACE_KIND_window_create || (kind) == TRACE_KIND_window_free ||   \
     (kind) == TRACE_KIND_file_open || (kind) == TRACE_KIND_file_close || (kind) == TRACE_KIND_file_delete ||          \
     (kind) == TRACE_KIND_comm_create || (kind) == TRACE_KIND_comm_free || (kind) == TRACE_KIND_type_create ||         \
     (kind) == TRACE_KIND_type_commit || (kind) == TRACE_KIND_type_free)
#endif
#define RECORD_INLINE inline ALWAYS_INLINE

/* 1 if the call is recorded (then trace_args_prepare must come before the call and
 * trace_args_finish after it); the wrapper stores arguments either way. */
static inline ALWAYS_INLINE int trace_args_begin(struct trace_args *a, int level, int index, int kind)
{
    a->per_peer = 0;
    a->freed_kind = 0;
    if ((a->t.tb = trace_open(level, index, kind, &a->t.ts, &a->depth)) == NULL)
        return 0;
    a->t.in = &trace_instances[level];
    a->index = index;
    a->kind = kind;
    return 1;
}

/* MPI_File_open's access mode, the same for every MPI (their MPI_MODE_ values differ):
 * OTF2's access mode (0 read-only, 1 write-only, 2 read-write) and the FILE_MODE_ bits. */
static inline int32_t access_mode(int amode)
{
    int32_t mode = amode & MPI_MODE_RDWR ? 2 : amode & MPI_MODE_WRONLY ? 1 : 0;
    if (amode & MPI_MODE_CREATE)
        mode |= FILE_MODE_CREATE;
    if (amode & MPI_MODE_EXCL)
        mode |= FILE_MODE_EXCLUSIVE;
    if (amode & MPI_MODE_DELETE_ON_CLOSE)
        mode |= FILE_MODE_DELETE_ON_CLOSE;
    if (amode & MPI_MODE_APPEND)
        mode |= FILE_MODE_APPEND;
    return mode;
}

static inline int moves_data(int kind)
{
    switch (kind) {
    case TRACE_KIND_sendrecv:
    case TRACE_KIND_send_init:
    case TRACE_KIND_recv_init:
    case TRACE_KIND_isend:
    case TRACE_KIND_send:
    case TRACE_KIND_irecv:
    case TRACE_KIND_recv:
    case TRACE_KIND_imrecv:
    case TRACE_KIND_mrecv:
    case TRACE_KIND_rma_get:
    case TRACE_KIND_rma_put:
    case TRACE_KIND_rma_atomic:
    case TRACE_KIND_file_read:
    case TRACE_KIND_file_write:
    case TRACE_KIND_neighbor_init:
    case TRACE_KIND_ineighbor:
    case TRACE_KIND_neighbor:
    case TRACE_KIND_collective_init:
    case TRACE_KIND_icollective:
    case TRACE_KIND_collective:
        return 1;
    default:
        return 0;
    }
}

static inline int is_neighborhood(int kind)
{
    return kind == TRACE_KIND_neighbor || kind == TRACE_KIND_ineighbor || kind == TRACE_KIND_neighbor_init;
}

static inline int is_collective(int kind)
{
    return is_neighborhood(kind) || kind == TRACE_KIND_collective || kind == TRACE_KIND_icollective ||
           kind == TRACE_KIND_collective_init;
}

/* The bytes of one side of a call: a count and datatype, or a count for each peer; an
 * array of counts (and of datatypes: the w collectives), one per peer, is summed by
 * trace_side_bytes (args.c). `peers`: how many processes the side exchanges with. */
static inline ALWAYS_INLINE int64_t side_bytes(struct traced *t, int64_t count, int per_peer, const int *counts,
                                               const MPI_Count *counts_c, MPI_Datatype type, const MPI_Datatype *types,
                                               int peers, int *type_id)
{
    if (counts == NULL && counts_c == NULL)
        return count * trace_type_size(t, type, type_id) * (per_peer ? peers : 1);
    return trace_side_bytes(t, counts, counts_c, type, types, peers, type_id);
}

/* Collectives: the send side (Scatter's, Scatterv's) or receive side (Gather's,
 * Gatherv's) that counts per peer is significant at the root only. */
static inline int at_root(const struct traced *t, const struct trace_args *a, uint32_t have)
{
    if (!(have & HAVE_root) || t->comm == NULL)
        return 1;
    return t->comm->rank == a->root; /* the rank is the communicator entry's: no PMPI call per collective */
}

static inline ALWAYS_INLINE void record_data(struct traced *t, struct call_record *r, const struct trace_args *a,
                                             int kind, uint32_t have)
{
    const struct handle_entry *c = t->comm;
    int neighbors = is_neighborhood(kind), root_side = at_root(t, a, have), datatype = -1;
    int send_peers = c == NULL ? 0 : neighbors ? c->out_degree : c->peers;
    int recv_peers = c == NULL ? 0 : neighbors ? c->in_degree : c->peers;
    if ((have & HAVE_count) && (have & HAVE_datatype)) {
        r->count = a->count;
        r->bytes = a->count * trace_type_size(t, a->datatype, &datatype);
        r->datatype = datatype;
        if (is_collective(kind)) /* one buffer description for both sides: Bcast, Reduce, Scan */
            r->recv_bytes = r->bytes;
    } else if ((have & HAVE_datatype) && kind == TRACE_KIND_rma_atomic) { /* Fetch_and_op: one element */
        r->count = 1;
        r->bytes = r->recv_bytes = trace_type_size(t, a->datatype, &datatype);
        r->datatype = datatype;
    } else if (have & HAVE_datatype) { /* MPI_Type_commit, a datatype's constructor's old type */
        trace_type_size(t, a->datatype, &datatype);
        r->datatype = datatype;
    }
    if ((have & (HAVE_send_count | HAVE_send_counts)) && (have & (HAVE_send_type | HAVE_send_types))) {
        int significant = !(have & HAVE_send_counts) && !(a->per_peer & SEND_PER_PEER) ? 1 : root_side;
        r->count = have & HAVE_send_count ? a->send_count : 0;
        r->bytes = significant ? side_bytes(t, a->send_count, a->per_peer & SEND_PER_PEER,
                                            have & HAVE_send_counts ? a->send_counts : NULL,
                                            have & HAVE_send_counts ? a->send_counts_c : NULL, a->send_type,
                                            have & HAVE_send_types ? a->send_types : NULL, send_peers, &datatype)
                               : 0;
        r->datatype = datatype;
    }
    if ((have & (HAVE_recv_count | HAVE_recv_counts)) && (have & (HAVE_recv_type | HAVE_recv_types | HAVE_datatype))) {
        int significant = !(have & HAVE_recv_counts) && !(a->per_peer & RECV_PER_PEER) ? 1 : root_side;
        MPI_Datatype type = have & HAVE_recv_type ? a->recv_type : a->datatype; /* Reduce_scatter_block */
        r->recv_bytes = significant ? side_bytes(t, a->recv_count, a->per_peer & RECV_PER_PEER,
                                                 have & HAVE_recv_counts ? a->recv_counts : NULL,
                                                 have & HAVE_recv_counts ? a->recv_counts_c : NULL, type,
                                                 have & HAVE_recv_types ? a->recv_types : NULL, recv_peers, NULL)
                                    : 0;
    }
}

/* The files and windows a call names, and the handle it frees (read before the call,
 * TRACE_SET_FREED). */
static inline ALWAYS_INLINE void record_objects(struct traced *t, struct call_record *r, const struct trace_args *a,
                                                uint32_t have)
{
    if (have & HAVE_file)
        r->file = trace_handle_id(t, R_FILE, &a->file, sizeof a->file, NULL);
    else if ((have & HAVE_file_name) && a->file_name != NULL && !(have & HAVE_new_file)) /* MPI_File_delete */
        r->file = trace_deleted_file_id(t, a->file_name);
    if (have & HAVE_window) {
        const struct cache_slot *w = trace_lookup(t->in, t->tb, R_WINDOW, &a->window, sizeof a->window, NULL);
        if (w->entry != NULL) {
            r->window = w->id;
            if (have & HAVE_target)
                r->peer = trace_world_rank(w->entry->parent, a->target);
        }
    }
    if (!(have & HAVE_freed))
        return;
    if (a->freed_kind == R_COMM)
        r->comm = a->freed_id;
    else if (a->freed_kind == R_FILE)
        r->file = a->freed_id;
    else if (a->freed_kind == R_WINDOW)
        r->window = a->freed_id;
    else if (a->freed_kind != 0)
        r->datatype = a->freed_id;
}

/* Before the call: the record holds everything the arguments going in say, and the
 * lookups they need happen here, while the tracer's data is still in the cache (after
 * an MPI call that entered the kernel it is not: docs/performance.md).
 *
 * The record `r` is the wrapper's own local (trace_record), never t->r: no call
 * out of line can reach it, so the compiler knows each field the wrapper's roles leave
 * at its default and packing keeps no test for it. Made in t->r, every call out of line
 * (a handle cache miss, a count array summed) would have it reload and test all 14 fields: a
 * third more instructions per traced call, and a third more code to compile.
 * trace_args_finish copies it to t->r only on the paths that call out of line with it. */
static RECORD_INLINE void record_prepare(struct trace_args *a, struct call_record *r, int kind, uint32_t have)
{
    struct traced *t = &a->t;
    *r = (struct call_record){
        .kind = R_CALL, .size = sizeof *r, .func = (uint16_t)a->index, .depth = a->depth, CALL_RECORD_DEFAULTS};
    a->have = have; /* for args.c's parts */
    t->comm = NULL;
    if (have & HAVE_comm)
        r->comm = trace_set_comm(t, a->comm);
    if ((have & HAVE_message) && (kind == TRACE_KIND_mrecv || kind == TRACE_KIND_imrecv) &&
        trace_take_message(t, a->message))
        r->comm = t->comm->id;
    if (have & HAVE_dest)
        r->peer = trace_world_rank(t->comm, a->dest);
    if (have & HAVE_root)
        r->root = trace_world_rank(t->comm, a->root);
    if (have & HAVE_source)
        r->source = trace_world_rank(t->comm, a->source);
    if (have & HAVE_tag)
        r->tag = a->tag;
    else if ((have & HAVE_new_file) && (have & HAVE_mode))
        r->tag = access_mode(a->mode);
    else if (have & HAVE_mode)
        r->tag = a->mode; /* MPI-IO: whence, atomicity */
    if (have & HAVE_recv_tag)
        r->recv_tag = a->recv_tag;
    if (moves_data(kind) || kind == TRACE_KIND_type_commit || kind == TRACE_KIND_type_create)
        record_data(t, r, a, kind, have);
    if (have & HAVE_offset)
        r->offset = a->offset;
    record_objects(t, r, a, have);
    trace_enter_record(t, r); /* the record written, entered; the call's time starts here */
}

/* Whether a call's record changes in the call (a status read, a request or handle made):
 * a constant in each wrapper. */
static inline int changes_in_call(int kind, uint32_t have)
{
    return ((have & HAVE_status) && trace_reads_status(kind)) || (have & HAVE_request) ||
           (have & (HAVE_new_file | HAVE_new_window | HAVE_new_type | HAVE_new_comm));
}

/* After the call: what it made or says (handles, statuses, requests), the leave time;
 * the record is completed, or written again. What is out of line works on t->r, so the
 * record goes there only on the paths that call it. */
static RECORD_INLINE void record_finish(struct trace_args *a, struct call_record *r, int kind, uint32_t have,
                                        int failed)
{
    struct traced *t = &a->t;
    int changed = 0, status_read, made;
    if (!changes_in_call(kind, have)) {
        if ((have & HAVE_freed) && a->freed_kind != 0)
            trace_record_made(t, a, failed); /* the freed handle forgotten */
        trace_leave_record(t, r, failed);
        return;
    }
    if ((have & HAVE_message) && !failed && kind == TRACE_KIND_probe && a->message_out != NULL &&
        *a->message_out != MPI_MESSAGE_NULL)
        trace_remember_message(t, *a->message_out);
    if ((have & HAVE_request) && !failed && a->request != NULL) {
        r->request = trace_handle_bits(a->request, sizeof *a->request);
        r->flags |= CALL_HAS_REQUEST;
        changed = 1;
    }
    /* a status still MPI_ANY_SOURCE was not filled in (TRACE_SET_STATUS): a probe that
     * matched nothing calls nothing */
    status_read = (have & HAVE_status) && !failed && a->status != NULL && trace_reads_status(kind) &&
                  (kind == TRACE_KIND_file_read || a->status->MPI_SOURCE != MPI_ANY_SOURCE);
    made = (have & (HAVE_new_file | HAVE_new_window | HAVE_new_type | HAVE_new_comm)) ||
           ((have & HAVE_freed) && a->freed_kind != 0);
    if (!changed && !status_read && !made) { /* a probe that matched nothing, a call that failed */
        trace_leave_record(t, r, failed);
        return;
    }
    t->r = *r;
    if (status_read)
        changed |= trace_record_status(t, a);
    if (made) {
        trace_record_made(t, a, failed);
        changed = 1;
    }
    if (changed)
        trace_end(t, failed);
    else
        trace_leave(t, failed);
}

/* The copies out of line (args.c, compiled once): the role bits tested at run time. */
HIDDEN void trace_record_prepare_shared(struct trace_args *a, struct call_record *r, int kind, uint32_t have);
HIDDEN void trace_record_finish_shared(struct trace_args *a, struct call_record *r, int kind, uint32_t have,
                                       int failed);

/* What a generated wrapper calls, before and after the call. */
#define trace_args_prepare(a, r, kind, have)                                                                           \
    (RECORD_SHARED(kind) ? trace_record_prepare_shared(a, r, kind, have) : record_prepare(a, r, kind, have))
#define trace_args_finish(a, r, kind, have, failed)                                                                    \
    (RECORD_SHARED(kind) ? trace_record_finish_shared(a, r, kind, have, failed)                                        \
                         : record_finish(a, r, kind, have, failed))

#endif
