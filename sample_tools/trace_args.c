/* trace_args.c: a call record from the arguments a generated wrapper stored by role
 * (trace_roles.h, trace_roles.qmpi), and the bare records of QMPI_TRACE_FUNCTIONS=all
 * (trace_all.qmpi).
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
#include "trace_internal.h"
#include "trace_roles.h"

/* Matched probes: the communicator of each message an Mprobe/Improbe matched, until
 * the Mrecv/Imrecv that takes it (which names no communicator). Per thread: a message
 * is received by the thread that probed it in any sane program; one that is not gets
 * no peer. */
#define MESSAGES 16
static __thread struct {
    uint64_t bits;
    struct handle_entry *comm;
} messages[MESSAGES];
static __thread unsigned next_message;

int trace_args_begin(struct trace_args *a, int level, int index, int kind)
{
    a->have = 0;
    a->per_peer = 0;
    a->mode = 0;
    a->file_name = NULL;
    a->freed_kind = 0;
    if ((a->t.tb = trace_open(level, index, kind, &a->t.ts, &a->depth)) == NULL)
        return 0;
    a->t.in = &trace_instances[level];
    a->level = level;
    a->index = index;
    a->kind = kind;
    return 1;
}

/* Called only when trace_args_begin said 1 (TRACE_SET_FREED). */
void trace_args_freed(struct trace_args *a, int kind, const void *handle, size_t size)
{
    struct handle_entry *e = trace_lookup(a->t.in, a->t.tb, kind, handle, size, NULL);
    a->freed_kind = kind;
    a->freed_bits = trace_handle_bits(handle, size);
    a->freed_id = e != NULL ? e->id : -1;
}

/* MPI_File_open's access mode, the same for every MPI (their MPI_MODE_ values differ):
 * OTF2's access mode (0 read-only, 1 write-only, 2 read-write) and the FILE_MODE_ bits. */
static int32_t access_mode(int amode)
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

static int moves_data(int kind)
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

static int is_neighborhood(int kind)
{
    return kind == TRACE_KIND_neighbor || kind == TRACE_KIND_ineighbor || kind == TRACE_KIND_neighbor_init;
}

static int is_collective(int kind)
{
    return is_neighborhood(kind) || kind == TRACE_KIND_collective || kind == TRACE_KIND_icollective ||
           kind == TRACE_KIND_collective_init;
}

static int type_size(struct traced *t, MPI_Datatype type, int *id)
{
    struct handle_entry *e = trace_lookup(t->in, t->tb, R_TYPE, &type, sizeof type, NULL);
    if (id != NULL)
        *id = e != NULL ? e->id : -1;
    return e != NULL ? e->size : 0;
}

/* The bytes of one side of a call: a count and datatype; a count for each peer; or an
 * array of counts (and of datatypes: the w collectives), one per peer. `peers`: how many
 * processes the side exchanges with. */
static int64_t side_bytes(struct traced *t, int64_t count, int per_peer, const int *counts, const MPI_Count *counts_c,
                          MPI_Datatype type, const MPI_Datatype *types, int peers, int *type_id)
{
    int64_t total = 0;
    int i, size = types != NULL ? 0 : type_size(t, type, type_id);
    if (counts == NULL && counts_c == NULL)
        return count * size * (per_peer ? peers : 1);
    for (i = 0; i < peers; i++) {
        int64_t n = counts != NULL ? counts[i] : (int64_t)counts_c[i];
        total += n * (types != NULL ? type_size(t, types[i], NULL) : size);
    }
    return total;
}

/* Collectives: the send side (Scatter's, Scatterv's) or receive side (Gather's,
 * Gatherv's) that counts per peer is significant at the root only. */
static int at_root(const struct traced *t, const struct trace_args *a)
{
    if (!(a->have & HAVE_root) || t->comm == NULL)
        return 1;
    return t->comm->rank == a->root; /* the rank is the communicator entry's: no PMPI call per collective */
}

static void record_data(struct traced *t, struct trace_args *a)
{
    uint32_t have = a->have;
    const struct handle_entry *c = t->comm;
    int neighbors = is_neighborhood(a->kind), root_side = at_root(t, a), datatype = -1;
    int send_peers = c == NULL ? 0 : neighbors ? c->out_degree : c->peers;
    int recv_peers = c == NULL ? 0 : neighbors ? c->in_degree : c->peers;
    if ((have & HAVE_count) && (have & HAVE_datatype)) {
        t->r.count = a->count;
        t->r.bytes = a->count * type_size(t, a->datatype, &datatype);
        t->r.datatype = datatype;
        if (is_collective(a->kind)) /* one buffer description for both sides: Bcast, Reduce, Scan */
            t->r.recv_bytes = t->r.bytes;
    } else if ((have & HAVE_datatype) && a->kind == TRACE_KIND_rma_atomic) { /* Fetch_and_op: one element */
        t->r.count = 1;
        t->r.bytes = t->r.recv_bytes = type_size(t, a->datatype, &datatype);
        t->r.datatype = datatype;
    } else if (have & HAVE_datatype) { /* MPI_Type_commit, a datatype's constructor's old type */
        type_size(t, a->datatype, &datatype);
        t->r.datatype = datatype;
    }
    if ((have & (HAVE_send_count | HAVE_send_counts)) && (have & (HAVE_send_type | HAVE_send_types))) {
        int significant = !(have & HAVE_send_counts) && !(a->per_peer & SEND_PER_PEER) ? 1 : root_side;
        t->r.count = have & HAVE_send_count ? a->send_count : 0;
        t->r.bytes = significant ? side_bytes(t, a->send_count, a->per_peer & SEND_PER_PEER,
                                              have & HAVE_send_counts ? a->send_counts : NULL,
                                              have & HAVE_send_counts ? a->send_counts_c : NULL, a->send_type,
                                              have & HAVE_send_types ? a->send_types : NULL, send_peers, &datatype)
                                 : 0;
        t->r.datatype = datatype;
    }
    if ((have & (HAVE_recv_count | HAVE_recv_counts)) && (have & (HAVE_recv_type | HAVE_recv_types | HAVE_datatype))) {
        int significant = !(have & HAVE_recv_counts) && !(a->per_peer & RECV_PER_PEER) ? 1 : root_side;
        MPI_Datatype type = have & HAVE_recv_type ? a->recv_type : a->datatype; /* Reduce_scatter_block */
        t->r.recv_bytes = significant ? side_bytes(t, a->recv_count, a->per_peer & RECV_PER_PEER,
                                                   have & HAVE_recv_counts ? a->recv_counts : NULL,
                                                   have & HAVE_recv_counts ? a->recv_counts_c : NULL, type,
                                                   have & HAVE_recv_types ? a->recv_types : NULL, recv_peers, NULL)
                                      : 0;
    }
}

/* What a status says about a receive: its source (a world rank), tag and bytes. Only a
 * request's status can say cancelled (the Wait/Test family, trace_requests.c): a probe's,
 * a blocking receive's or a Sendrecv's cannot. */
static void record_status(struct traced *t, const struct trace_args *a)
{
    const MPI_Status *status = a->status;
    int bytes = 0, cancelled = 0;
    if (status->MPI_SOURCE == MPI_ANY_SOURCE) /* not filled (TRACE_SET_STATUS) */
        return;
    if (a->kind == TRACE_KIND_completion && PMPI_Test_cancelled(status, &cancelled) == MPI_SUCCESS && cancelled)
        return;
    if (status->MPI_SOURCE >= 0) {
        t->r.source = trace_world_rank(t->comm, status->MPI_SOURCE);
        if (a->kind == TRACE_KIND_sendrecv)
            t->r.recv_tag = status->MPI_TAG;
        else
            t->r.tag = status->MPI_TAG;
    }
    if (PMPI_Get_count(status, MPI_BYTE, &bytes) == MPI_SUCCESS && bytes != MPI_UNDEFINED)
        t->r.recv_bytes = bytes;
}

static void remember_message(struct traced *t, MPI_Message message)
{
    unsigned slot = next_message++ % MESSAGES;
    messages[slot].bits = trace_handle_bits(&message, sizeof message);
    messages[slot].comm = t->comm;
}

static void take_message(struct traced *t, MPI_Message message)
{
    uint64_t bits = trace_handle_bits(&message, sizeof message);
    unsigned i;
    for (i = 0; i < MESSAGES; i++)
        if (messages[i].comm != NULL && messages[i].bits == bits) {
            t->comm = messages[i].comm;
            t->r.comm = t->comm->id;
            messages[i].comm = NULL;
            return;
        }
}

static int created(struct traced *t, int kind, const void *handle, size_t size, const struct definition *d)
{
    struct handle_entry *e = trace_lookup(t->in, t->tb, kind, handle, size, d);
    return e != NULL ? e->id : -1;
}

/* The files and windows a call names, and the handle it frees (read before the call,
 * TRACE_SET_FREED). */
static void record_objects(struct traced *t, const struct trace_args *a)
{
    uint32_t have = a->have;
    if (have & HAVE_file)
        t->r.file = created(t, R_FILE, &a->file, sizeof a->file, NULL);
    else if (a->file_name != NULL && !(have & HAVE_new_file)) { /* MPI_File_delete: a name, no handle */
        struct definition d = {a->file_name, -1, NULL};
        uint64_t unique = (uint64_t)-1 - (uint64_t)t->in->next_id[R_FILE];
        t->r.file = created(t, R_FILE, &unique, sizeof unique, &d);
        trace_forget(t->in, R_FILE, &unique, sizeof unique);
    }
    if (have & HAVE_window) {
        struct handle_entry *w = trace_lookup(t->in, t->tb, R_WINDOW, &a->window, sizeof a->window, NULL);
        if (w != NULL) {
            t->r.window = w->id;
            if (have & HAVE_target)
                t->r.peer = trace_world_rank(w->parent, a->target);
        }
    }
    if (a->freed_kind == R_COMM)
        t->r.comm = a->freed_id;
    else if (a->freed_kind == R_FILE)
        t->r.file = a->freed_id;
    else if (a->freed_kind == R_WINDOW)
        t->r.window = a->freed_id;
    else if (a->freed_kind != 0)
        t->r.datatype = a->freed_id;
}

/* The handles a call made, and the one it freed forgotten (later handles with the same
 * value are new objects). */
static void record_made(struct traced *t, const struct trace_args *a, int failed)
{
    uint32_t have = a->have;
    if (failed)
        return;
    if (have & HAVE_new_file) {
        MPI_Offset size = 0;
        struct definition d = {a->file_name, 0, NULL};
        PMPI_File_get_size(*a->new_file, &size); /* the size the file had when it was opened */
        d.file_size = size;
        t->r.file = t->r.created = created(t, R_FILE, a->new_file, sizeof *a->new_file, &d);
        t->r.offset = size;
    }
    if (have & HAVE_new_window) {
        struct definition d = {NULL, 0, t->comm};
        t->r.window = t->r.created = created(t, R_WINDOW, a->new_window, sizeof *a->new_window, &d);
    }
    if (have & HAVE_new_type)
        t->r.created = created(t, R_TYPE, a->new_type, sizeof *a->new_type, NULL);
    if ((have & HAVE_new_comm) && *a->new_comm != MPI_COMM_NULL)
        t->r.created = created(t, R_COMM, a->new_comm, sizeof *a->new_comm, NULL);
    if (a->freed_kind != 0)
        trace_forget(t->in, a->freed_kind, &a->freed_bits, sizeof a->freed_bits);
}

/* Before the call: the record holds everything the arguments going in say, and the
 * lookups they need happen here, while the tracer's data is still in the cache (after
 * an MPI call that entered the kernel it is not: docs/performance.md). */
void trace_args_prepare(struct trace_args *a)
{
    struct traced *t = &a->t;
    uint32_t have = a->have;
    t->comm = NULL;
    t->r = (struct call_record){
        .kind = R_CALL, .size = sizeof t->r, .func = (uint16_t)a->index, .depth = a->depth, CALL_RECORD_DEFAULTS};
    if (have & HAVE_comm)
        trace_set_comm(t, a->comm);
    if ((have & HAVE_message) && (a->kind == TRACE_KIND_mrecv || a->kind == TRACE_KIND_imrecv))
        take_message(t, a->message);
    if (have & HAVE_dest)
        t->r.peer = trace_world_rank(t->comm, a->dest);
    if (have & HAVE_root)
        t->r.root = trace_world_rank(t->comm, a->root);
    if (have & HAVE_source)
        t->r.source = trace_world_rank(t->comm, a->source);
    if (have & HAVE_tag)
        t->r.tag = a->tag;
    else if (have & HAVE_new_file)
        t->r.tag = access_mode(a->mode);
    else
        t->r.tag = a->mode; /* MPI-IO: whence, atomicity */
    if (have & HAVE_recv_tag)
        t->r.recv_tag = a->recv_tag;
    if (moves_data(a->kind) || a->kind == TRACE_KIND_type_commit || a->kind == TRACE_KIND_type_create)
        record_data(t, a);
    if (have & HAVE_offset)
        t->r.offset = a->offset;
    record_objects(t, a);
    t->r.enter = trace_ticks(); /* last: the call's time starts here */
}

void trace_args_finish(struct trace_args *a, int failed)
{
    struct traced *t = &a->t;
    uint32_t have = a->have;
    if ((have & HAVE_status) && !failed && a->status != NULL && trace_reads_status(a->kind))
        record_status(t, a);
    if ((have & HAVE_message) && !failed && a->kind == TRACE_KIND_probe && a->message_out != NULL &&
        *a->message_out != MPI_MESSAGE_NULL)
        remember_message(t, *a->message_out);
    if ((have & HAVE_request) && !failed && a->request != NULL) {
        t->r.request = trace_handle_bits(a->request, sizeof *a->request);
        t->r.flags |= CALL_HAS_REQUEST;
    }
    if (have & (HAVE_new_file | HAVE_new_window | HAVE_new_type | HAVE_new_comm) || a->freed_kind != 0)
        record_made(t, a, failed);
    trace_end(t, failed);
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
    struct thread_state *ts = &trace_thread;
    struct packed_call_record s = {
        R_PACKED_CALL, sizeof s, (uint16_t)index, 255, failed ? CALL_FAILED : 0, enter, leave, -1, 0};
    if (ts->open_calls <= MAX_OPEN)
        s.depth = ts->open_stack[ts->open_calls - 1].depth;
    ts->open_calls--;
    ts->buffers[level]->calls++;
    trace_put(&trace_instances[level], ts->buffers[level], &s, sizeof s);
}
