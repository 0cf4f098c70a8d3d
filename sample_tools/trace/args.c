/* args.c: the rare and long parts of a call record made by role (args.h; record.h has
 * the rest, inline in the generated wrappers), and the record made out of line (record.h:
 * the calls made once per object, and every call with TRACE_RECORDS=shared). */
#include "args.h"
#include "handles.h"
#include "record.h"

void trace_record_prepare_shared(struct trace_args *a, struct call_record *r, int kind, uint32_t have)
{
    record_prepare(a, r, kind, have);
}

void trace_record_finish_shared(struct trace_args *a, struct call_record *r, int kind, uint32_t have, int failed)
{
    record_finish(a, r, kind, have, failed);
}

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

/* Called only when trace_args_begin said 1 (TRACE_SET_FREED). */
void trace_args_freed(struct trace_args *a, int kind, const void *handle, size_t size)
{
    const struct cache_slot *s = trace_lookup(a->t.in, a->t.tb, kind, handle, size, NULL);
    a->freed_kind = kind;
    a->freed_bits = trace_handle_bits(handle, size);
    a->freed_id = s->id;
}

/* An array of counts (and of datatypes: the w collectives), one per peer, in bytes. */
int64_t trace_side_bytes(struct traced *t, const int *counts, const MPI_Count *counts_c, MPI_Datatype type,
                         const MPI_Datatype *types, int peers, int *type_id)
{
    int64_t total = 0;
    int i, size = types != NULL ? 0 : trace_type_size(t, type, type_id);
    for (i = 0; i < peers; i++) {
        int64_t n = counts != NULL ? counts[i] : (int64_t)counts_c[i];
        total += n * (types != NULL ? trace_type_size(t, types[i], NULL) : size);
    }
    return total;
}

/* What a status says about a receive: its source (a world rank), tag and bytes. Only a
 * request's status can say cancelled (the Wait/Test family, trace_requests.c): a probe's,
 * a blocking receive's or a Sendrecv's cannot. */
int trace_record_status(struct traced *t, const struct trace_args *a)
{
    const MPI_Status *status = a->status;
    int bytes = 0, cancelled = 0;
    if (a->kind == TRACE_KIND_file_read) { /* the bytes read, as the MPI counted them */
        if (PMPI_Get_count(status, MPI_BYTE, &bytes) != MPI_SUCCESS || bytes == MPI_UNDEFINED)
            return 0; /* more than an int: the bytes asked for stay */
        t->r.recv_bytes = bytes;
        t->r.flags |= CALL_STATUS_BYTES;
        return 1;
    }
    if (status->MPI_SOURCE == MPI_ANY_SOURCE) /* not filled (TRACE_SET_STATUS) */
        return 0;
    if (a->kind == TRACE_KIND_completion && PMPI_Test_cancelled(status, &cancelled) == MPI_SUCCESS && cancelled)
        return 0;
    if (status->MPI_SOURCE >= 0) {
        t->r.source = trace_world_rank(t->comm, status->MPI_SOURCE);
        if (a->kind == TRACE_KIND_sendrecv)
            t->r.recv_tag = status->MPI_TAG;
        else
            t->r.tag = status->MPI_TAG;
    }
    if (PMPI_Get_count(status, MPI_BYTE, &bytes) == MPI_SUCCESS && bytes != MPI_UNDEFINED)
        t->r.recv_bytes = bytes;
    return 1;
}

void trace_remember_message(struct traced *t, MPI_Message message)
{
    unsigned slot = next_message++ % MESSAGES;
    messages[slot].bits = trace_handle_bits(&message, sizeof message);
    messages[slot].comm = t->comm;
}

int trace_take_message(struct traced *t, MPI_Message message)
{
    uint64_t bits = trace_handle_bits(&message, sizeof message);
    unsigned i;
    for (i = 0; i < MESSAGES; i++)
        if (messages[i].comm != NULL && messages[i].bits == bits) {
            t->comm = messages[i].comm;
            messages[i].comm = NULL;
            return 1;
        }
    return 0;
}

/* MPI_File_delete: a file named, with no handle (an id of its own, forgotten at once). */
int trace_deleted_file_id(struct traced *t, const char *name)
{
    struct definition d = {name, -1, NULL};
    uint64_t unique = (uint64_t)-1 - (uint64_t)t->in->next_id[R_FILE];
    int id = trace_handle_id(t, R_FILE, &unique, sizeof unique, &d);
    trace_forget(t->in, R_FILE, &unique, sizeof unique);
    return id;
}

/* The handles a call made, and the one it freed forgotten (later handles with the same
 * value are new objects). */
void trace_record_made(struct traced *t, const struct trace_args *a, int failed)
{
    uint32_t have = a->have;
    if (failed)
        return;
    if (have & HAVE_new_file) {
        MPI_Offset size = 0;
        struct definition d = {have & HAVE_file_name ? a->file_name : NULL, 0, NULL};
        PMPI_File_get_size(*a->new_file, &size); /* the size the file had when it was opened */
        d.file_size = size;
        t->r.file = t->r.created = trace_handle_id(t, R_FILE, a->new_file, sizeof *a->new_file, &d);
        t->r.offset = size;
    }
    if (have & HAVE_new_window) {
        struct definition d = {NULL, 0, t->comm};
        t->r.window = t->r.created = trace_handle_id(t, R_WINDOW, a->new_window, sizeof *a->new_window, &d);
    }
    if (have & HAVE_new_type)
        t->r.created = trace_handle_id(t, R_TYPE, a->new_type, sizeof *a->new_type, NULL);
    if ((have & HAVE_new_comm) && *a->new_comm != MPI_COMM_NULL)
        t->r.created = trace_handle_id(t, R_COMM, a->new_comm, sizeof *a->new_comm, NULL);
    if (a->freed_kind != 0)
        trace_forget(t->in, a->freed_kind, &a->freed_bits, sizeof a->freed_bits);
}
