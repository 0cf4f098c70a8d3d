/* trace: records MPI calls with their times and arguments into binary per-thread buffers,
 * written per rank and thread to QMPI_TRACE_DIR (the PIOsim MPI wrapper's design, seed
 * 004). `qmpigen trace DIR -o OUT` merges the files into OTF2, Perfetto JSON, pictures
 * and a summary. Format: docs/trace-format.md (sample_tools/trace_format.h, generated).
 *
 * The library is four C files and the wrappers qmpigen generates from trace_roles.qmpi:
 *   trace.c           files, buffers, handles (communicators, datatypes, files, windows),
 *                     clocks, MPI_Init and MPI_Finalize, which wrapper the core installs;
 *   trace_requests.c  the Wait/Test/Start/Request_free/Cancel family: what happened to
 *                     each request (no parameter role says it);
 *   trace_record.h    a call record from a generated wrapper's arguments by role, inline
 *                     in each wrapper; trace_args.c its rare and long parts;
 *   trace_roles.qmpi  (generated) a wrapper for every function of the `operations`
 *                     group, recording its arguments by role; trace_all.qmpi (generated)
 *                     a bare wrapper for every other function (QMPI_TRACE_FUNCTIONS=all).
 * Build: make -C sample_tools CORE=<core> OUT=<dir>
 * Run:   TOOLS=./libtrace.so:./libtbcast.so:./libtrace.so mpiexec -n 4 ./app
 *
 * Stackable: one library serves every instance in the chain; each instance keeps its
 * state in slot `level` of `trace_instances` and writes its own files (the level is in
 * their names). Options (environment; read once per process):
 *   QMPI_TRACE_DIR=dir          where the files go (default qmpi-trace), created if missing
 *   QMPI_TRACE_FLUSH=full|record write when a thread's buffer is full (default) or every record
 *   QMPI_TRACE_NESTED=1|0       record calls made while a traced call of an instance above
 *                               is open on this thread (e.g. TBcast's Send/Recv) (default 1)
 *   QMPI_TRACE_FUNCTIONS=default|all  `all` adds every function of kind `other` (Comm_rank,
 *                               Type_size, ...) as a call without arguments, seed 004 3.1.4
 *   QMPI_TRACE_BUFFER=bytes     per-thread buffer, a decimal number from 4096 to 1 GiB (default
 *                               1 MiB; any other value: one line from rank 0, and the default)
 * The options are read with secure_getenv: a setuid or setgid program ignores them (no
 * file it writes can be put somewhere by its caller's environment).
 * No MPI communication happens for tracing's sake except the clock ping-pong with world
 * rank 0 right after MPI_Init and right before MPI_Finalize, through PMPI.
 * The hot path (trace_internal.h's inline trace_open and trace_lookup, trace_record.h
 * inline in each generated wrapper, then trace_end): one initial-exec TLS load per call,
 * two reads of the tick counter, each handle from its home slot in a 16-entry per-thread
 * cache (one probe), the record built once, before the call, and packed into the thread's
 * buffer after it (32 to 112 bytes, 64 for most calls with arguments: most of a call's
 * cost is the kernel's copy of them into the file); no lock, no atomic read-modify-write.
 * `make bench` measures it per role mix (docs/performance.md). */
#include "trace_internal.h"
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#define CLOCK_PINGS 8
/* A timer record at a thread's first record, then at flushes at least TIMER_GAP_NS apart
 * and at finalize. */
#define TIMER_GAP_NS 1000000u

struct instance trace_instances[MAX_LEVELS];
__thread struct thread_state trace_thread;
__thread struct thread_state *trace_thread_self __attribute__((tls_model("initial-exec")));
struct trace_options trace_options;
static pthread_once_t options_once = PTHREAD_ONCE_INIT;

#define BUFFER_DEFAULT ((size_t)1 << 20)
#define BUFFER_MIN ((size_t)4096)
#define BUFFER_MAX ((size_t)1 << 30)

/* A buffer size: decimal digits only, within [BUFFER_MIN, BUFFER_MAX] (no sign, no
 * exponent, no wrap-around: the size goes to calloc), else 0. */
static size_t parse_buffer(const char *value)
{
    size_t bytes = 0;
    const char *p;
    if (*value == '\0')
        return 0;
    for (p = value; *p; p++) {
        if (*p < '0' || *p > '9' || bytes > BUFFER_MAX)
            return 0;
        bytes = bytes * 10 + (size_t)(*p - '0');
    }
    return bytes >= BUFFER_MIN && bytes <= BUFFER_MAX ? bytes : 0;
}

void trace_read_options(void)
{
    const char *value;
    trace_options.dir = (value = secure_getenv("QMPI_TRACE_DIR")) && *value ? value : "qmpi-trace";
    trace_options.flush_every_record = (value = secure_getenv("QMPI_TRACE_FLUSH")) && strcmp(value, "record") == 0;
    trace_options.nested = !((value = secure_getenv("QMPI_TRACE_NESTED")) && strcmp(value, "0") == 0);
    trace_options.all_functions = (value = secure_getenv("QMPI_TRACE_FUNCTIONS")) && strcmp(value, "all") == 0;
    trace_options.buffer_bytes = BUFFER_DEFAULT;
    if ((value = secure_getenv("QMPI_TRACE_BUFFER")) != NULL) {
        size_t bytes = parse_buffer(value);
        if (bytes)
            trace_options.buffer_bytes = bytes;
        else
            trace_options.bad_buffer = value;
    }
}

static void complain(struct instance *in, const char *what, const char *path)
{
    fprintf(stderr, "qmpi trace (level %d, rank %d): %s %s: %s; tracing stops for this instance\n", in->level, in->rank,
            what, path, strerror(errno));
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
    r.ticks = trace_ticks();
    r.ns = trace_now_ns();
    r.ticks = (r.ticks + trace_ticks()) / 2; /* the tick count at the middle of the clock read */
    memcpy(tb->data + tb->used, &r, sizeof r);
    tb->used += sizeof r;
    tb->last_timer_ns = r.ns;
}

static void flush_locked(struct instance *in, struct thread_buffer *tb)
{
    if (tb->fd >= 0 && tb->used > 0 && write_all(tb->fd, tb->data, tb->used) != 0)
        complain(in, "cannot write a trace file in", trace_options.dir);
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
    uint64_t ns = trace_now_ns();
    if (ns - tb->last_timer_ns >= TIMER_GAP_NS)
        add_timer(tb);
    flush(in, tb);
}

/* The buffer keeps room for a timer and an END record after any record (RESERVED_BYTES);
 * a record is at most 4096 bytes (append_variable), and the buffer at least 4096 + that
 * room. trace_put, inline, appends when no flush is due. */
_Static_assert(BUFFER_MIN >= RESERVED_BYTES, "room for the largest record after a flush");

void trace_append(struct instance *in, struct thread_buffer *tb, const void *record, size_t size)
{
    if (__builtin_expect(tb->used + size + RESERVED_BYTES > trace_options.buffer_bytes, 0))
        flush_due(in, tb);
    if (__builtin_expect(tb->used + size + RESERVED_BYTES > trace_options.buffer_bytes, 0))
        return; /* cannot happen (records are at most 4096 bytes): never past the buffer */
    memcpy(tb->data + tb->used, record, size);
    tb->used += size;
    if (trace_options.flush_every_record)
        flush_due(in, tb);
}

/* A variable-size record: kind, size, then `fixed` bytes and `tail` bytes, padded to 8. */
void trace_append_variable(struct instance *in, struct thread_buffer *tb, int kind, const void *fixed,
                           size_t fixed_size, const void *tail, size_t tail_size)
{
    char record[4096];
    size_t size = (4 + fixed_size + tail_size + RECORD_ALIGNMENT - 1) & ~(size_t)(RECORD_ALIGNMENT - 1);
    uint16_t head[2] = {(uint16_t)kind, (uint16_t)size};
    if (size > sizeof record) { /* a name or member list too long: cut the tail */
        tail_size = sizeof record - 4 - fixed_size;
        size = (4 + fixed_size + tail_size) & ~(size_t)(RECORD_ALIGNMENT - 1);
        tail_size = size - 4 - fixed_size;
        head[1] = (uint16_t)size;
    }
    memset(record, 0, size);
    memcpy(record, head, 4);
    memcpy(record + 4, fixed, fixed_size);
    memcpy(record + 4 + fixed_size, tail, tail_size);
    trace_append(in, tb, record, size);
}

static void thread_exit(void *buffer)
{
    struct thread_buffer *tb = buffer;
    int level;
    for (level = 0; level < MAX_LEVELS && trace_thread.buffers[level] != tb; level++)
        ;
    if (level < MAX_LEVELS) {
        add_timer(tb);
        flush(&trace_instances[level], tb);
    }
}

static void write_preamble(struct instance *in, struct thread_buffer *tb)
{
    char host[256] = "unknown";
    char process[512];
    struct process_fixed pad = {0};
    size_t length;
    gethostname(host, sizeof host - 1);
    host[sizeof host - 1] = '\0';
    /* program and host, each NUL-terminated */
    length = (size_t)snprintf(process, sizeof process, "%s%c%s", program_invocation_short_name, '\0', host);
    trace_append_variable(in, tb, R_PROCESS, &pad, sizeof pad, process, length + 1);
}

/* The calling thread's buffer for `in`, created (with its file) on first use. */
struct thread_buffer *trace_thread_buffer(struct instance *in)
{
    struct thread_buffer *tb = trace_thread.buffers[in->level];
    struct file_header header;
    char host[256] = "unknown", path[4096];
    int length;
    if (tb != NULL)
        return tb;
    tb = calloc(1, sizeof *tb + trace_options.buffer_bytes);
    if (tb == NULL) {
        complain(in, "cannot allocate a buffer in", trace_options.dir);
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
    length = snprintf(path, sizeof path, "%s/%s_%s_%d_%d.L%d.qtr", trace_options.dir, program_invocation_short_name,
                      host, in->rank, tb->thread, in->level);
    /* a cut name would be the same for every rank: each would overwrite the others' file */
    tb->fd = length > 0 && (size_t)length < sizeof path ? open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644)
                                                        : (errno = ENAMETOOLONG, -1);
    trace_thread.buffers[in->level] = tb;
    pthread_setspecific(in->thread_key, tb);
    if (tb->fd < 0) {
        complain(in, "cannot create", path);
        return NULL;
    }
    memset(&header, 0, sizeof header);
    memcpy(header.magic, TRACE_MAGIC, 8);
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
    header.run_id = in->run_id;
    if (write_all(tb->fd, (const char *)&header, sizeof header) != 0) {
        complain(in, "cannot write", path);
        return NULL;
    }
    write_preamble(in, tb);
    add_timer(tb);
    return tb;
}

/* A communicator's topology: how many neighbours a neighbourhood collective exchanges
 * with; for other collectives, its size (an intercommunicator's: the remote group). */
static void comm_peers(MPI_Comm comm, struct handle_entry *e)
{
    int topology = MPI_UNDEFINED, inter = 0, n = 0, weighted = 0;
    PMPI_Comm_rank(comm, &e->rank);
    e->peers = e->size;
    if (PMPI_Comm_test_inter(comm, &inter) == MPI_SUCCESS && inter)
        PMPI_Comm_remote_size(comm, &e->peers);
    e->in_degree = e->out_degree = e->peers;
    if (inter || PMPI_Topo_test(comm, &topology) != MPI_SUCCESS)
        return;
    if (topology == MPI_CART && PMPI_Cartdim_get(comm, &n) == MPI_SUCCESS) {
        e->in_degree = e->out_degree = 2 * n;
    } else if (topology == MPI_GRAPH) {
        if (PMPI_Graph_neighbors_count(comm, e->rank, &n) == MPI_SUCCESS)
            e->in_degree = e->out_degree = n;
    } else if (topology == MPI_DIST_GRAPH) {
        PMPI_Dist_graph_neighbors_count(comm, &e->in_degree, &e->out_degree, &weighted);
    }
}

static int combiner_index(int combiner)
{
    switch (combiner) {
#define AS_CASE(name, index)                                                                                           \
    case MPI_COMBINER_##name:                                                                                          \
        return index;
        TRACE_COMBINERS(AS_CASE)
#undef AS_CASE
    default:
        return -1;
    }
}

/* Writes the definition of a new handle entry (in this thread's file; the merger reads
 * every file's definitions before any events). */
static void define(struct instance *in, struct thread_buffer *tb, struct handle_entry *e, const void *handle,
                   const struct definition *d)
{
    if (e->kind == R_COMM) {
        MPI_Comm comm = *(const MPI_Comm *)handle;
        MPI_Group group, world_group;
        int i, *local = malloc(sizeof(int) * (size_t)e->size);
        struct comm_fixed fixed = {e->id, e->size, 0, 0};
        e->world = malloc(sizeof(int) * (size_t)e->size);
        for (i = 0; i < e->size; i++)
            local[i] = i;
        PMPI_Comm_group(comm, &group);
        PMPI_Comm_group(MPI_COMM_WORLD, &world_group);
        PMPI_Group_translate_ranks(group, e->size, local, world_group, e->world);
        PMPI_Group_free(&group);
        PMPI_Group_free(&world_group);
        free(local);
        comm_peers(comm, e);
        /* COMM_CHUNK members per record: every record fits append_variable's 4096 bytes */
        for (fixed.first = 0; fixed.first < e->size || fixed.first == 0; fixed.first += COMM_CHUNK) {
            fixed.count = e->size - fixed.first < COMM_CHUNK ? e->size - fixed.first : COMM_CHUNK;
            trace_append_variable(in, tb, R_COMM, &fixed, sizeof fixed, e->world + fixed.first,
                                  sizeof(int) * (size_t)fixed.count);
            if (fixed.count == 0)
                break;
        }
    } else if (e->kind == R_TYPE) {
        MPI_Datatype type = *(const MPI_Datatype *)handle;
        int nints = 0, naddrs = 0, ntypes = 0, combiner = 0, length = 0;
        MPI_Aint lb = 0, extent = 0;
        char name[MPI_MAX_OBJECT_NAME + 1] = "";
        struct type_fixed fixed;
        PMPI_Type_get_envelope(type, &nints, &naddrs, &ntypes, &combiner);
        PMPI_Type_get_name(type, name, &length);
        PMPI_Type_get_extent(type, &lb, &extent);
        fixed = (struct type_fixed){.id = e->id,
                                    .type_size = e->size,
                                    .named = combiner == MPI_COMBINER_NAMED,
                                    .nints = nints,
                                    .naddrs = naddrs,
                                    .ntypes = ntypes,
                                    .combiner = combiner_index(combiner),
                                    .lb = (int64_t)lb,
                                    .extent = (int64_t)extent};
        trace_append_variable(in, tb, R_TYPE, &fixed, sizeof fixed, name, strlen(name) + 1);
    } else if (e->kind == R_WINDOW) {
        struct window_record r = {R_WINDOW, sizeof r, e->id, -1, 0};
        e->parent = d != NULL ? d->comm : NULL;
        if (e->parent != NULL)
            r.comm = e->parent->id;
        trace_append(in, tb, &r, sizeof r);
    } else {
        const char *file_name = d != NULL && d->file_name != NULL ? d->file_name : "?";
        struct file_fixed fixed = {.id = e->id, .initial_size = d != NULL ? (int64_t)d->file_size : 0};
        trace_append_variable(in, tb, R_FILE, &fixed, sizeof fixed, file_name, strlen(file_name) + 1);
    }
}

/* trace_lookup's handle not in its home slot of this thread's cache (or the cache is
 * stale): from another slot (it moves home, swapping places with the entry there), else
 * the instance's table, else new (defined in this thread's file); it goes to its home
 * slot, and the entry there to the next slot in turn. */
struct handle_entry *trace_lookup_slow(struct instance *in, struct thread_buffer *tb, int kind, uint64_t bits,
                                       const void *handle, const struct definition *d)
{
    unsigned generation = __atomic_load_n(&in->generation, __ATOMIC_ACQUIRE);
    unsigned home = trace_cache_slot(kind, bits);
    struct handle_entry *e = NULL;
    int i;
    if (tb->cache_generation != generation) {
        memset(tb->cache, 0, sizeof tb->cache);
        tb->cache_generation = generation;
    }
    for (i = 0; i < CACHE_SLOTS; i++)
        if (tb->cache[i] != NULL && tb->cache[i]->handle == bits && tb->cache[i]->kind == kind) {
            e = tb->cache[i];
            tb->cache[i] = tb->cache[home];
            tb->cache[home] = e;
            return e;
        }
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
        define(in, tb, e, handle, d);
        if (in->handle_count == in->handle_capacity) {
            in->handle_capacity = in->handle_capacity ? 2 * in->handle_capacity : 16;
            in->handles = realloc(in->handles, sizeof *in->handles * (size_t)in->handle_capacity);
        }
        in->handles[in->handle_count++] = e;
    }
    pthread_mutex_unlock(&in->lock);
    if (e != NULL) {
        if (tb->cache[home] != NULL) {
            unsigned spare = tb->cache_next++ % CACHE_SLOTS;
            tb->cache[spare == home ? (spare + 1) % CACHE_SLOTS : spare] = tb->cache[home];
        }
        tb->cache[home] = e;
    }
    return e;
}

/* A handle about to be freed: later handles with the same value are new objects. */
void trace_forget(struct instance *in, int kind, const void *handle, size_t handle_size)
{
    uint64_t bits = trace_handle_bits(handle, handle_size);
    int i;
    pthread_mutex_lock(&in->lock);
    for (i = 0; i < in->handle_count; i++)
        if (in->handles[i]->live && in->handles[i]->handle == bits && in->handles[i]->kind == kind)
            in->handles[i]->live = 0;
    __atomic_add_fetch(&in->generation, 1, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&in->lock);
}

/* The FUNCTION record of core function `index`, before its first call in this file. */
void trace_name_function(struct instance *in, struct thread_buffer *tb, int index, int kind)
{
    struct function_fixed function = {index, kind};
    const char *name = QMPI_Function_name(index);
    tb->named[index / 8] |= (unsigned char)(1u << index % 8);
    trace_append_variable(in, tb, R_FUNCTION, &function, sizeof function, name, strlen(name) + 1);
}

/* Starts recording core function `index` of `kind` at `level`; 0 if this call is not to
 * be recorded (tracing is off, or nested calls are not wanted). Which functions are
 * recorded at all is decided once, by get_interceptions. */
int trace_begin(struct traced *t, int level, int index, int kind)
{
    uint8_t depth;
    if ((t->tb = trace_open(level, index, kind, &t->ts, &depth)) == NULL)
        return 0;
    t->in = &trace_instances[level];
    t->comm = NULL;
    t->r = (struct call_record){
        .kind = R_CALL, .size = sizeof t->r, .func = (uint16_t)index, .depth = depth, CALL_RECORD_DEFAULTS};
    t->r.enter = trace_ticks();
    return 1;
}

/* The call's record, packed (its fields at their defaults left out: a PACKED_CALL), straight
 * into the buffer when there is room: a file's bytes cost the most of a traced call (0.5
 * ns each on tmpfs, written out), and a copy from a record on the stack would wait for
 * the stores just made to it (no store-to-load forwarding into a wider load). */
void trace_end(struct traced *t, int failed)
{
    uint64_t leave = trace_ticks();
    struct thread_buffer *tb = t->tb;
    t->ts->open_calls--;
    if (failed)
        t->r.flags |= CALL_FAILED;
    tb->calls++;
    if (__builtin_expect(tb->used + PACKED_CALL_MAX + RESERVED_BYTES <= trace_options.buffer_bytes &&
                             !trace_options.flush_every_record,
                         1)) {
        tb->used += call_record_pack(&t->r, leave, tb->data + tb->used);
    } else {
        unsigned char packed[PACKED_CALL_MAX];
        trace_append(t->in, tb, packed, call_record_pack(&t->r, leave, packed));
    }
}

int trace_world_rank(const struct handle_entry *comm, int rank)
{
    if (rank == MPI_ANY_SOURCE)
        return PEER_ANY;
    if (comm == NULL || rank < 0 || rank >= comm->size)
        return PEER_NONE;
    return comm->world[rank];
}

/* ---- clocks: offsets to world rank 0 at init and finalize, by PMPI ping-pong ---- */

static void measure_clock(struct instance *in, uint32_t phase)
{
    struct clock_record c;
    struct thread_buffer *tb = trace_thread_buffer(in);
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
                remote = trace_now_ns();
                PMPI_Send(&remote, 1, MPI_UINT64_T, peer, ping, comm);
            } else if (in->rank == peer) {
                sent = trace_now_ns();
                PMPI_Send(&sent, 1, MPI_UINT64_T, 0, ping, comm);
                PMPI_Recv(&remote, 1, MPI_UINT64_T, 0, ping, comm, MPI_STATUS_IGNORE);
                received = trace_now_ns();
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
        c.local_ns = trace_now_ns();
        c.round_trip_ns = 0;
    }
    if (tb != NULL)
        trace_append(in, tb, &c, sizeof c);
}

/* The run's identity in every rank file's header: world rank 0 draws it, every rank gets
 * it (a collective on MPI_COMM_WORLD right after MPI_Init, the same on every rank). */
static uint64_t run_identity(int rank)
{
    uint64_t id = 0;
    if (rank == 0) {
        struct timespec now;
        clock_gettime(CLOCK_REALTIME, &now);
        if (getrandom(&id, sizeof id, GRND_NONBLOCK) != (ssize_t)sizeof id)
            id = ((uint64_t)now.tv_sec * 1000000000u + (uint64_t)now.tv_nsec) ^ ((uint64_t)getpid() << 32);
        if (id == 0) /* 0: no identity (files before version 3) */
            id = 1;
    }
    PMPI_Bcast(&id, 1, MPI_UINT64_T, 0, MPI_COMM_WORLD);
    return id;
}

static void start_instance(int level)
{
    struct instance *in = &trace_instances[level];
    struct timespec real;
    struct stat st;
    static int said_bad_buffer;
    pthread_once(&options_once, trace_read_options);
    in->level = level;
    pthread_mutex_init(&in->lock, NULL);
    pthread_key_create(&in->thread_key, thread_exit);
    PMPI_Comm_rank(MPI_COMM_WORLD, &in->rank);
    PMPI_Comm_size(MPI_COMM_WORLD, &in->world_size);
    in->run_id = run_identity(in->rank);
    if (trace_options.bad_buffer != NULL && in->rank == 0 &&
        !__atomic_exchange_n(&said_bad_buffer, 1, __ATOMIC_ACQ_REL))
        fprintf(stderr, "qmpi trace: QMPI_TRACE_BUFFER=%.64s is not a number of bytes from %zu to %zu; using %zu\n",
                trace_options.bad_buffer, BUFFER_MIN, BUFFER_MAX, BUFFER_DEFAULT);
    in->origin_ns = trace_now_ns();
    clock_gettime(CLOCK_REALTIME, &real);
    in->realtime_origin_ns = (uint64_t)real.tv_sec * 1000000000u + (uint64_t)real.tv_nsec;
    if (mkdir(trace_options.dir, 0755) != 0 && errno != EEXIST)
        complain(in, "cannot create directory", trace_options.dir);
    else if (stat(trace_options.dir, &st) != 0 || !S_ISDIR(st.st_mode))
        complain(in, "not a directory:", trace_options.dir);
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
        if (tb->fd >= 0) {
            /* END: the file is whole (room for both is kept: see append) */
            struct end_record end_record = {R_END, sizeof end_record, 0, tb->calls};
            add_timer(tb);
            memcpy(tb->data + tb->used, &end_record, sizeof end_record);
            tb->used += sizeof end_record;
        }
        flush_locked(in, tb);
        if (tb->fd >= 0)
            close(tb->fd);
        tb->fd = -1;
        pthread_mutex_unlock(&tb->lock);
    }
    pthread_mutex_unlock(&in->lock);
}

/* ---- MPI_Init, MPI_Finalize ---- */

static int traced_init(int index, uint64_t enter, int ret, int level)
{
    struct traced t;
    if ((unsigned)level >= MAX_LEVELS || ret != MPI_SUCCESS)
        return ret;
    start_instance(level);
    if (trace_begin(&t, level, index, TRACE_KIND_other)) {
        t.r.enter = enter;
        trace_end(&t, 0);
    }
    return ret;
}

_EXTERN_C_ int TR_Init(int *argc, char ***argv, int level, vector *v)
{
    uint64_t enter = trace_ticks();
    return traced_init(_MPI_Init, enter, QMPI_Next_Init(argc, argv, level, v), level);
}

_EXTERN_C_ int TR_Init_thread(int *argc, char ***argv, int required, int *provided, int level, vector *v)
{
    uint64_t enter = trace_ticks();
    return traced_init(_MPI_Init_thread, enter, QMPI_Next_Init_thread(argc, argv, required, provided, level, v), level);
}

_EXTERN_C_ int TR_Finalize(int level, vector *v)
{
    struct traced t;
    int traced = 0, ret;
    if ((unsigned)level < MAX_LEVELS && __atomic_load_n(&trace_instances[level].active, __ATOMIC_ACQUIRE)) {
        measure_clock(&trace_instances[level], 1);
        traced = trace_begin(&t, level, _MPI_Finalize, TRACE_KIND_other);
    }
    ret = QMPI_Next_Finalize(level, v);
    if (traced) {
        trace_end(&t, ret != MPI_SUCCESS);
        stop_instance(&trace_instances[level]);
    }
    return ret;
}

/* ---- which wrapper the core installs ----
 * trace_roles.qmpi and trace_all.qmpi generate the wrappers of every other function
 * (sample_tools/Makefile links their C into this library, their get_interceptions
 * renamed). MPI_Init, MPI_Init_thread and MPI_Finalize are recorded always (kind
 * `other`, but they bound the trace). trace.c built without the generated parts has
 * only its own wrappers: the weak references are NULL. */
extern char *trace_roles_get_interceptions(int i) __attribute__((weak, visibility("hidden")));
extern char *trace_all_get_interceptions(int i) __attribute__((weak, visibility("hidden")));

static int wanted(const char *name)
{
    return name != NULL && strcmp(name, "NULL") != 0;
}

_EXTERN_C_ char *get_interceptions(int i)
{
    char *name;
    pthread_once(&options_once, trace_read_options);
    switch (i) {
    case _MPI_Init:
        return "TR_Init";
    case _MPI_Init_thread:
        return "TR_Init_thread";
    case _MPI_Finalize:
        return "TR_Finalize";
    default:
        break;
    }
    if (trace_own_function(i))
        return trace_requests_interception(i);
    if (trace_roles_get_interceptions != NULL && wanted(name = trace_roles_get_interceptions(i)))
        return name;
    if (trace_options.all_functions && trace_all_get_interceptions != NULL)
        return trace_all_get_interceptions(i);
    return "NULL";
}
