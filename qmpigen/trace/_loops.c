/* qmpigen trace: the merge's loops over calls, built with the package (setup.py:
 * qmpigen/trace/libqmpigen_loops.so, a plain shared library, no Python API, that
 * qmpigen/trace/loops.py loads with ctypes).
 * Python code costs about a microsecond per value; these loops take a rank file's calls
 * as numpy arrays, one C call per file: OTF2 events through the OTF2 library the otf2
 * package bundles (otf2_out.py), Chrome trace JSON text (perfetto.py), and the walk over
 * a rank file's records (read.py). No record layout is spelled here: the walk is handed
 * the kinds and sizes that qmpigen/trace/layout.py defines. */
#include <stdint.h>
#include <string.h>

/* ---- OTF2 events of one location ---- */
/* What a call adds between its Enter and Leave, and what a completion is: the values of
 * otf2_ops.py's OP_* and COMPLETE_* (tests/test_trace_layout.py compares them). The
 * columns each one reads are otf2_ops.py's CALL_FIELDS and COMPLETION_FIELDS. */
enum {
    OP_NONE,
    OP_SEND,
    OP_RECV,
    OP_ISEND,
    OP_IRECV_REQUEST,
    OP_COLLECTIVE,
    OP_IO,
    OP_SENDRECV,
    OP_ICOLLECTIVE,
    OP_IO_NONBLOCKING,
    OP_IO_CREATE,
    OP_IO_DESTROY,
    OP_IO_SEEK,
    OP_RMA,
    OP_RMA_REQUEST
};
enum {
    COMPLETE_ISEND = 1,
    COMPLETE_IRECV = 2,
    START_ISEND = 3,
    START_IRECV = 4,
    CANCELLED = 5,
    COMPLETE_COLLECTIVE = 6,
    COMPLETE_IO = 7,
    COMPLETE_RMA = 8,
    START_COLLECTIVE = 9
};
enum { RMA_PUT, RMA_GET, RMA_ATOMIC }; /* an RMA call's tag: RMA_ATOMIC + OTF2_RmaAtomicType */
enum { IO_FLAG_NON_BLOCKING = 1 };     /* OTF2_IO_OPERATION_FLAG_NON_BLOCKING */
typedef int (*time_region_fn)(void *, void *, uint64_t, uint32_t);
typedef int (*p2p_fn)(void *, void *, uint64_t, uint32_t, uint32_t, uint32_t, uint64_t);
typedef int (*ip2p_fn)(void *, void *, uint64_t, uint32_t, uint32_t, uint32_t, uint64_t, uint64_t);
typedef int (*request_fn)(void *, void *, uint64_t, uint64_t);
typedef int (*time_fn)(void *, void *, uint64_t);
typedef int (*coll_end_fn)(void *, void *, uint64_t, uint8_t, uint32_t, uint32_t, uint64_t, uint64_t);
typedef int (*coll_complete_fn)(void *, void *, uint64_t, uint8_t, uint32_t, uint32_t, uint64_t, uint64_t, uint64_t);
typedef int (*io_begin_fn)(void *, void *, uint64_t, uint32_t, uint8_t, uint32_t, uint64_t, uint64_t);
typedef int (*io_complete_fn)(void *, void *, uint64_t, uint32_t, uint64_t, uint64_t);
typedef int (*handle_request_fn)(void *, void *, uint64_t, uint32_t, uint64_t);
typedef int (*io_create_fn)(void *, void *, uint64_t, uint32_t, uint8_t, uint32_t, uint32_t);
typedef int (*io_destroy_fn)(void *, void *, uint64_t, uint32_t);
typedef int (*io_seek_fn)(void *, void *, uint64_t, uint32_t, int64_t, uint8_t, uint64_t);
typedef int (*rma_fn)(void *, void *, uint64_t, uint32_t, uint32_t, uint64_t, uint64_t);
typedef int (*rma_atomic_fn)(void *, void *, uint64_t, uint32_t, uint32_t, uint8_t, uint64_t, uint64_t, uint64_t);
typedef int (*add_int64_fn)(void *, uint32_t, int64_t);   /* OTF2_AttributeList_AddInt64 */
typedef int (*add_string_fn)(void *, uint32_t, uint32_t); /* OTF2_AttributeList_AddStringRef */
struct api {
    time_region_fn enter, leave;
    p2p_fn send, recv;
    ip2p_fn isend, irecv;
    request_fn isend_complete, irecv_request;
    time_fn coll_begin;
    coll_end_fn coll_end;
    io_begin_fn io_begin;
    io_complete_fn io_complete;
    request_fn request_cancelled;
    request_fn coll_request;
    coll_complete_fn coll_complete;
    handle_request_fn io_issued;
    io_create_fn io_create;
    io_destroy_fn io_destroy;
    io_seek_fn io_seek;
    rma_fn rma_put, rma_get;
    rma_atomic_fn rma_atomic;
    handle_request_fn rma_complete_blocking, rma_complete_nonblocking;
    add_int64_fn add_int64;
    add_string_fn add_string;
};
struct calls {
    int64_t n;
    const uint64_t *enter, *leave;
    const uint32_t *region;
    const uint8_t *op;
    const uint32_t *peer, *comm, *tag;
    const uint64_t *bytes, *request;
    const uint32_t *recv_peer, *recv_tag;
    const uint64_t *recv_bytes;
};
struct completions {
    int64_t n;
    const int64_t *call;
    const uint8_t *kind;
    const uint64_t *request;
    const uint32_t *sender, *comm, *tag;
    const uint64_t *bytes, *recv_bytes;
};
/* OTF2 attributes of calls' Enter events (otf2_out.py's attributes of file metadata
 * calls and derived datatypes), ordered by call: call i's are first[i] to first[i + 1]. */
struct attributes {
    int64_t n; /* attributes in all (0: none, and first may be NULL) */
    const int64_t *first;
    const uint32_t *ref;   /* the OTF2 Attribute */
    const uint8_t *string; /* 1: value is an OTF2 String, else an int64 */
    const int64_t *value;
    void *list; /* an OTF2_AttributeList: each event written with it empties it */
};

/* An RMA operation's event: a put, a get, or an atomic of OTF2 type tag - RMA_ATOMIC. */
static int rma_event(const struct api *f, void *w, const struct calls *c, int64_t i, uint64_t t)
{
    uint32_t type = c->tag[i];
    if (type == RMA_PUT)
        return f->rma_put(w, 0, t, c->comm[i], c->peer[i], c->bytes[i], c->request[i]);
    if (type == RMA_GET)
        return f->rma_get(w, 0, t, c->comm[i], c->peer[i], c->bytes[i], c->request[i]);
    return f->rma_atomic(w, 0, t, c->comm[i], c->peer[i], (uint8_t)(type - RMA_ATOMIC), c->bytes[i], c->recv_bytes[i],
                         c->request[i]);
}

/* The events of call i between its Enter and Leave; -1 on an OTF2 error. */
static int64_t call_events(const struct api *f, void *w, const struct calls *c, int64_t i, int *rc)
{
    uint64_t t0 = c->enter[i], t1 = c->leave[i];
    switch (c->op[i]) {
    case OP_SEND:
        *rc |= f->send(w, 0, t0, c->peer[i], c->comm[i], c->tag[i], c->bytes[i]);
        return 1;
    case OP_RECV:
        *rc |= f->recv(w, 0, t1, c->peer[i], c->comm[i], c->tag[i], c->bytes[i]);
        return 1;
    case OP_SENDRECV:
        *rc |= f->send(w, 0, t0, c->peer[i], c->comm[i], c->tag[i], c->bytes[i]);
        *rc |= f->recv(w, 0, t1, c->recv_peer[i], c->comm[i], c->recv_tag[i], c->recv_bytes[i]);
        return 2;
    case OP_ISEND:
        *rc |= f->isend(w, 0, t0, c->peer[i], c->comm[i], c->tag[i], c->bytes[i], c->request[i]);
        return 1;
    case OP_IRECV_REQUEST:
        *rc |= f->irecv_request(w, 0, t0, c->request[i]);
        return 1;
    case OP_COLLECTIVE:
        *rc |= f->coll_begin(w, 0, t0);
        *rc |= f->coll_end(w, 0, t1, (uint8_t)c->tag[i], c->comm[i], c->peer[i], c->bytes[i], c->recv_bytes[i]);
        return 2;
    case OP_ICOLLECTIVE:
        *rc |= f->coll_request(w, 0, t0, c->request[i]);
        return 1;
    case OP_IO:
        *rc |= f->io_begin(w, 0, t0, c->comm[i], (uint8_t)c->tag[i], c->recv_tag[i], c->bytes[i], c->request[i]);
        *rc |= f->io_complete(w, 0, t1, c->comm[i], c->bytes[i], c->request[i]);
        return 2;
    case OP_IO_NONBLOCKING:
        *rc |= f->io_begin(w, 0, t0, c->comm[i], (uint8_t)c->tag[i], c->recv_tag[i] | IO_FLAG_NON_BLOCKING, c->bytes[i],
                           c->request[i]);
        *rc |= f->io_issued(w, 0, t1, c->comm[i], c->request[i]);
        return 2;
    case OP_IO_CREATE:
        *rc |= f->io_create(w, 0, t1, c->comm[i], (uint8_t)c->tag[i], c->recv_tag[i], 0);
        return 1;
    case OP_IO_DESTROY:
        *rc |= f->io_destroy(w, 0, t1, c->comm[i]);
        return 1;
    case OP_IO_SEEK:
        *rc |= f->io_seek(w, 0, t1, c->comm[i], (int64_t)c->bytes[i], (uint8_t)c->tag[i], c->recv_bytes[i]);
        return 1;
    case OP_RMA:
        *rc |= rma_event(f, w, c, i, t0);
        *rc |= f->rma_complete_blocking(w, 0, t1, c->comm[i], c->request[i]);
        return 2;
    case OP_RMA_REQUEST:
        *rc |= rma_event(f, w, c, i, t0);
        return 1;
    default:
        return 0;
    }
}

static int completion_event(const struct api *f, void *w, const struct completions *k, int64_t j, uint64_t t1)
{
    switch (k->kind[j]) {
    case COMPLETE_ISEND:
        return f->isend_complete(w, 0, t1, k->request[j]);
    case COMPLETE_IRECV:
        return f->irecv(w, 0, t1, k->sender[j], k->comm[j], k->tag[j], k->bytes[j], k->request[j]);
    /* a persistent request's start: its send or receive request, as Isend/Irecv have */
    case START_ISEND:
        return f->isend(w, 0, t1, k->sender[j], k->comm[j], k->tag[j], k->bytes[j], k->request[j]);
    case START_IRECV:
        return f->irecv_request(w, 0, t1, k->request[j]);
    case COMPLETE_COLLECTIVE:
        return f->coll_complete(w, 0, t1, (uint8_t)k->tag[j], k->comm[j], k->sender[j], k->bytes[j], k->recv_bytes[j],
                                k->request[j]);
    case START_COLLECTIVE:
        return f->coll_request(w, 0, t1, k->request[j]);
    case COMPLETE_IO:
        return f->io_complete(w, 0, t1, k->comm[j], k->bytes[j], k->request[j]);
    case COMPLETE_RMA:
        return f->rma_complete_nonblocking(w, 0, t1, k->comm[j], k->request[j]);
    default:
        return f->request_cancelled(w, 0, t1, k->request[j]);
    }
}

/* Call i's attributes put in the list; the list, or NULL when it has none. */
static void *call_attributes(const struct api *f, const struct attributes *a, int64_t i, int *rc)
{
    int64_t j;
    if (a->n == 0 || a->first[i] == a->first[i + 1])
        return NULL;
    for (j = a->first[i]; j < a->first[i + 1]; j++)
        *rc |= a->string[j] ? f->add_string(a->list, a->ref[j], (uint32_t)a->value[j])
                            : f->add_int64(a->list, a->ref[j], a->value[j]);
    return a->list;
}

/* The number of events written, or -1 - (index of the call whose events failed). */
int64_t qmpi_write_events(const struct api *f, void *w, const struct calls *c, const struct completions *k,
                          const struct attributes *a)
{
    int64_t i, j = 0, events = 0;
    for (i = 0; i < c->n; i++) {
        uint64_t t0 = c->enter[i], t1 = c->leave[i];
        int rc = 0;
        void *list = call_attributes(f, a, i, &rc);
        rc |= f->enter(w, list, t0, c->region[i]);
        events += call_events(f, w, c, i, &rc);
        for (; j < k->n && k->call[j] == i; j++) {
            rc |= completion_event(f, w, k, j, t1);
            events++;
        }
        rc |= f->leave(w, 0, t1, c->region[i]);
        events += 2;
        if (rc != 0)
            return -1 - i;
    }
    return events;
}

/* ---- Chrome trace JSON (perfetto.py) ---- */

/* Text without printf: the JSON is most of the merge's work. */
static char *put_str(char *p, const char *s)
{
    size_t n = strlen(s);
    memcpy(p, s, n);
    return p + n;
}

static char *put_int(char *p, int64_t value)
{
    char digits[24];
    int n = 0;
    uint64_t v = value < 0 ? (uint64_t)0 - (uint64_t)value : (uint64_t)value;
    if (value < 0)
        *p++ = '-';
    do
        digits[n++] = (char)('0' + v % 10);
    while ((v /= 10) != 0);
    while (n > 0)
        *p++ = digits[--n];
    return p;
}

/* ns as microseconds with three decimals (a negative time keeps one sign in front: C's
 * % and / round towards zero) */
static char *put_us(char *p, int64_t ns)
{
    uint64_t v = ns < 0 ? (uint64_t)0 - (uint64_t)ns : (uint64_t)ns;
    int64_t frac = (int64_t)(v % 1000);
    if (ns < 0)
        *p++ = '-';
    p = put_int(p, (int64_t)(v / 1000));
    *p++ = '.';
    *p++ = (char)('0' + frac / 100);
    *p++ = (char)('0' + frac / 10 % 10);
    *p++ = (char)('0' + frac % 10);
    return p;
}

#define SLICE_TEXT 1024 /* perfetto.py's SLICE_TEXT */

/* One slice per call, lines joined by ",\n"; returns the bytes written, or -1 if `cap`
 * could be exceeded (the caller gives n * (longest name + SLICE_TEXT)). args: ARG_FIELDS'
 * arrays in order, each value shown unless -1 or 0; nested: depth when > 0. */
int64_t qmpi_json_slices(char *out, int64_t cap, int64_t n, const char *const *names, const int64_t *func,
                         const int64_t *enter, const int64_t *leave, const int64_t *const *args,
                         const char *const *arg_names, int nargs, const uint8_t *depth, int pid, int tid)
{
    char *p = out;
    int64_t i;
    int a;
    for (i = 0; i < n; i++) {
        int first = 1;
        if (p - out + SLICE_TEXT + (int64_t)strlen(names[func[i]]) > cap)
            return -1;
        if (i > 0)
            *p++ = ',', *p++ = '\n';
        p = put_str(p, "{\"ph\":\"X\",\"name\":");
        p = put_str(p, names[func[i]]);
        p = put_str(p, ",\"cat\":\"mpi\",\"pid\":");
        p = put_int(p, pid);
        p = put_str(p, ",\"tid\":");
        p = put_int(p, tid);
        p = put_str(p, ",\"ts\":");
        p = put_us(p, enter[i]);
        p = put_str(p, ",\"dur\":");
        p = put_us(p, leave[i] - enter[i]);
        p = put_str(p, ",\"args\":{");
        for (a = 0; a < nargs; a++) {
            int64_t value = args[a][i];
            if (value == -1 || value == 0)
                continue;
            if (!first)
                *p++ = ',';
            *p++ = '"';
            p = put_str(p, arg_names[a]);
            p = put_str(p, "\":");
            p = put_int(p, value);
            first = 0;
        }
        if (depth[i] > 0) {
            p = put_str(p, first ? "\"nested\":" : ",\"nested\":");
            p = put_int(p, depth[i]);
        }
        *p++ = '}', *p++ = '}';
    }
    return p - out;
}

/* A flow arrow per matched message: "s" at the send, "f" at the receive's completion. */
int64_t qmpi_json_flows(char *out, int64_t cap, int64_t n, int64_t first_id, const int64_t *tag, const int64_t *s_rank,
                        const int64_t *s_thread, const int64_t *s_time, const int64_t *r_rank, const int64_t *r_thread,
                        const int64_t *r_time)
{
    char *p = out;
    int64_t i;
    for (i = 0; i < n; i++) {
        if (p - out + 400 > cap)
            return -1;
        if (i > 0)
            *p++ = ',', *p++ = '\n';
        p = put_str(p, "{\"name\":\"message tag ");
        p = put_int(p, tag[i]);
        p = put_str(p, "\",\"cat\":\"message\",\"id\":");
        p = put_int(p, first_id + i);
        p = put_str(p, ",\"ph\":\"s\",\"pid\":");
        p = put_int(p, s_rank[i]);
        p = put_str(p, ",\"tid\":");
        p = put_int(p, s_thread[i]);
        p = put_str(p, ",\"ts\":");
        p = put_us(p, s_time[i]);
        p = put_str(p, "},\n{\"name\":\"message tag ");
        p = put_int(p, tag[i]);
        p = put_str(p, "\",\"cat\":\"message\",\"id\":");
        p = put_int(p, first_id + i);
        p = put_str(p, ",\"ph\":\"f\",\"bp\":\"e\",\"pid\":");
        p = put_int(p, r_rank[i]);
        p = put_str(p, ",\"tid\":");
        p = put_int(p, r_thread[i]);
        p = put_str(p, ",\"ts\":");
        p = put_us(p, r_time[i]);
        *p++ = '}';
    }
    return p - out;
}

/* ---- reading a rank file (read.py): records sorted out in one walk ---- */

/* The record kinds and sizes the walk sorts out (read.py fills it from layout.py). */
struct kinds {
    uint16_t call, call_size, packed, packed_size, completion, completion_size, alignment;
    uint16_t packed_fields;                  /* CALL fields a PACKED_CALL may carry */
    uint16_t field_at[32], field_size[32];   /* each one's offset in a CALL record and its size */
    const uint8_t *defaults;                 /* a CALL record with every field at its default */
    /* a COMPACT_CALL (version 7): its head's duration, comm and present; its fields are
     * PACKED_CALL's, then comm and leave (field_at and field_size go on) */
    uint16_t compact, compact_size, compact_fields, duration_at, comm_at, present_at;
    uint16_t bytes_field, recv_bytes_field;  /* their indices among the fields */
    uint32_t zero_extended;                  /* the fields whose 4 narrow bytes are unsigned */
    uint8_t narrow, recv_is_bytes;           /* COMPACT_* flags */
    int16_t comm_wide;
    uint32_t duration_wide;
};

struct scan {
    uint8_t *calls;         /* call records, in file order (packed ones unpacked) */
    int64_t *call_offset;   /* where each call starts in the file */
    uint8_t *completions;   /* completion records */
    int64_t *completion_at; /* 2 per completion: its offset, the index of the call before it */
    int64_t *other_at;      /* 2 per other record: its offset, the number of calls before it */
    int64_t counts[4];      /* calls, packed calls (PACKED_ and COMPACT_), completions, others */
    int64_t capacity[3];    /* with buffers: the calls, completions and others they hold */
};

struct record_head {
    uint16_t kind, size;
};

/* A field's bytes: the sizes fields have as moves of their own, not a call to memcpy. */
static inline void copy_field(uint8_t *to, const uint8_t *from, uint16_t size)
{
    switch (size) {
    case 8:
        memcpy(to, from, 8);
        break;
    case 4:
        memcpy(to, from, 4);
        break;
    case 2:
        memcpy(to, from, 2);
        break;
    case 1:
        *to = *from;
        break;
    default:
        memcpy(to, from, size);
    }
}

/* A PACKED_CALL of `size` bytes as a whole CALL record at `call` (NULL: only checked): its
 * head, then each field whose bit is set in `present`. 0 if its bits name no field, or
 * its fields do not fill its size (to the alignment). */
static int unpack_call(const uint8_t *record, uint16_t size, const struct kinds *k, uint8_t *call)
{
    uint32_t present, bits;
    int64_t at = k->packed_size;
    memcpy(&present, record + k->packed_size - sizeof present, sizeof present);
    if (present >> k->packed_fields)
        return 0;
    if (call != NULL) { /* the head is CALL's first bytes, after kind and size */
        memcpy(call, k->defaults, k->call_size);
        memcpy(call + sizeof(struct record_head), record + sizeof(struct record_head),
               k->packed_size - sizeof(struct record_head) - sizeof present);
    }
    for (bits = present; bits != 0; bits &= bits - 1) { /* the fields present, in order */
        unsigned i = (unsigned)__builtin_ctz(bits);
        if (at + k->field_size[i] > size)
            return 0;
        if (call != NULL)
            copy_field(call + k->field_at[i], record + at, k->field_size[i]);
        at += k->field_size[i];
    }
    return (at + k->alignment - 1) / k->alignment * k->alignment == size;
}

/* A COMPACT_CALL of `size` bytes as a whole CALL record at `call` (NULL: only checked):
 * its head (leave = enter + duration; 0 if entered), then each field whose bit is set in
 * `present`, a 64-bit one from 4 bytes when the record is narrow. 0 if its head and bits
 * disagree, or its fields do not fill its size (to the alignment). */
static int unpack_compact(const uint8_t *record, uint16_t size, const struct kinds *k, uint8_t *call)
{
    uint16_t present;
    uint32_t duration;
    int16_t comm;
    uint8_t flags = record[7], narrow = flags & k->narrow;
    int64_t at = k->compact_size;
    unsigned comm_bit = k->compact_fields - 2u, leave_bit = k->compact_fields - 1u;
    memcpy(&duration, record + k->duration_at, sizeof duration);
    memcpy(&comm, record + k->comm_at, sizeof comm);
    memcpy(&present, record + k->present_at, sizeof present);
    if ((duration == k->duration_wide) != (present >> leave_bit & 1) ||
        (comm == k->comm_wide) != (present >> comm_bit & 1))
        return 0;
    if (call != NULL) { /* func, depth, flags and enter are where CALL has them */
        int32_t wide_comm = comm;
        memcpy(call, k->defaults, k->call_size);
        memcpy(call + sizeof(struct record_head), record + sizeof(struct record_head),
               k->duration_at - sizeof(struct record_head));
        call[7] = flags & (uint8_t) ~(k->narrow | k->recv_is_bytes);
        memcpy(call + k->field_at[comm_bit], &wide_comm, sizeof wide_comm);
        if (duration != 0 && duration != k->duration_wide) {
            uint64_t enter, leave;
            memcpy(&enter, record + k->duration_at - sizeof enter, sizeof enter);
            leave = enter + duration;
            memcpy(call + k->field_at[leave_bit], &leave, sizeof leave);
        }
    }
    for (uint32_t bits = present; bits != 0; bits &= bits - 1) { /* the fields present, in order */
        unsigned i = (unsigned)__builtin_ctz(bits);
        uint16_t width = narrow && i < k->packed_fields && k->field_size[i] == 8 ? 4 : k->field_size[i];
        if (at + width > size)
            return 0;
        if (call != NULL && width != k->field_size[i]) { /* 4 bytes of an 8-byte field */
            uint32_t low;
            int64_t value;
            memcpy(&low, record + at, sizeof low);
            value = k->zero_extended >> i & 1 ? (int64_t)low : (int64_t)(int32_t)low;
            memcpy(call + k->field_at[i], &value, sizeof value);
        } else if (call != NULL)
            copy_field(call + k->field_at[i], record + at, width);
        at += width;
    }
    if (call != NULL && flags & k->recv_is_bytes)
        memcpy(call + k->field_at[k->recv_bytes_field], call + k->field_at[k->bytes_field], 8);
    return (at + k->alignment - 1) / k->alignment * k->alignment == size;
}

typedef int (*unpack_fn)(const uint8_t *record, uint16_t size, const struct kinds *k, uint8_t *call);

/* How a packed call record with head `h` becomes a CALL (PACKED_CALL, COMPACT_CALL); NULL
 * for another record, or one shorter than its kind's head. */
static unpack_fn unpacker(struct record_head h, const struct kinds *k)
{
    if (h.kind == k->packed && h.size >= k->packed_size)
        return unpack_call;
    if (h.kind == k->compact && h.size >= k->compact_size)
        return unpack_compact;
    return NULL;
}

/* Walks the records from `pos` to `end` and sorts them: calls (whole and packed),
 * completions (after a call) and the rest, for Python (a packed call that does not
 * unpack among them: Python says why). With NULL buffers it only counts. Returns where
 * it stopped: `end`, or the first record whose head cannot be walked (Python says why),
 * or the first that would not fit in the buffers: the bytes are the counting walk's
 * (read.py reads a file into memory), but a walk never writes past what it was given. */
int64_t qmpi_scan_records(const uint8_t *data, int64_t pos, int64_t end, const struct kinds *k, struct scan *s)
{
    int64_t *n = s->counts;
    unpack_fn unpack;
    n[0] = n[1] = n[2] = n[3] = 0;
    while (end - pos >= (int64_t)sizeof(struct record_head)) {
        struct record_head h;
        memcpy(&h, data + pos, sizeof h);
        if (h.size < k->alignment || h.size % k->alignment || pos + h.size > end)
            break;
        if (h.kind == k->call && h.size == k->call_size) {
            if (s->calls) {
                if (n[0] >= s->capacity[0])
                    break;
                s->call_offset[n[0]] = pos;
                memcpy(s->calls + (int64_t)k->call_size * n[0], data + pos, k->call_size);
            }
            n[0]++;
        } else if ((unpack = unpacker(h, k)) != NULL && unpack(data + pos, h.size, k, NULL)) {
            if (s->calls) {
                if (n[0] >= s->capacity[0])
                    break;
                s->call_offset[n[0]] = pos;
                unpack(data + pos, h.size, k, s->calls + (int64_t)k->call_size * n[0]);
            }
            n[1]++;
            n[0]++;
        } else if (h.kind == k->completion && h.size == k->completion_size && n[0] > 0) {
            if (s->calls) {
                if (n[2] >= s->capacity[1])
                    break;
                memcpy(s->completions + (int64_t)k->completion_size * n[2], data + pos, k->completion_size);
                s->completion_at[2 * n[2]] = pos;
                s->completion_at[2 * n[2] + 1] = n[0] - 1;
            }
            n[2]++;
        } else {
            if (s->calls) {
                if (n[3] >= s->capacity[2])
                    break;
                s->other_at[2 * n[3]] = pos;
                s->other_at[2 * n[3] + 1] = n[0];
            }
            n[3]++;
        }
        pos += h.size;
    }
    return pos;
}

/* The index of the first of n calls (rows of call_size bytes) that left before it
 * entered or whose function code the file does not name (valid[code] == 0), else n: one
 * pass over the rows' heads, where numpy's three strided passes over the columns read
 * every row three times. `at`: the offsets of the u16 code and the u64 enter and leave. */
int64_t qmpi_first_bad_call(const uint8_t *calls, int64_t n, int64_t call_size, const uint8_t *valid,
                            const int64_t *at)
{
    for (int64_t i = 0; i < n; i++) {
        const uint8_t *row = calls + i * call_size;
        uint16_t code;
        uint64_t enter, leave;
        memcpy(&code, row + at[0], sizeof code);
        memcpy(&enter, row + at[1], sizeof enter);
        memcpy(&leave, row + at[2], sizeof leave);
        if (leave < enter || !valid[code])
            return i;
    }
    return n;
}

/* The layout of the structs above and of every function's arguments: loops.py refuses
 * a build of another (a stale extension beside newer Python would read out of bounds). */
#define QMPI_LOOPS_ABI 6
int qmpi_loops_abi(void)
{
    return QMPI_LOOPS_ABI;
}
