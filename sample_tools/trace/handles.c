/* handles.c: the communicators, datatypes, files and windows an instance knows, each
 * defined in the rank file of the thread that meets it first (handles.h). */
#include "handles.h"
#include "sink.h"
#include <stdlib.h>

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

/* A communicator's members as world ranks, in COMM_CHUNK members per record (every
 * record fits trace_append_variable's 4096 bytes). */
static void define_comm(struct instance *in, struct thread_buffer *tb, struct handle_entry *e, MPI_Comm comm)
{
    MPI_Group group;
    int i, *local = malloc(sizeof(int) * (size_t)e->size);
    struct comm_fixed fixed = {e->id, e->size, 0, 0};
    e->world = malloc(sizeof(int) * (size_t)e->size);
    /* no world group: a session's instance in its last finalize, a call a level below
     * makes there; its ranks unknown, as without memory */
    if (local == NULL || e->world == NULL || in->world_group == MPI_GROUP_NULL) {
        free(local);
        free(e->world);
        e->world = NULL; /* its ranks unknown: PEER_NONE (trace_world_rank) */
        e->size = 0;
        return;
    }
    for (i = 0; i < e->size; i++)
        local[i] = i;
    PMPI_Comm_group(comm, &group);
    PMPI_Group_translate_ranks(group, e->size, local, in->world_group, e->world);
    PMPI_Group_free(&group);
    free(local);
    comm_peers(comm, e);
    for (fixed.first = 0; fixed.first < e->size || fixed.first == 0; fixed.first += COMM_CHUNK) {
        fixed.count = e->size - fixed.first < COMM_CHUNK ? e->size - fixed.first : COMM_CHUNK;
        trace_append_variable(in, tb, R_COMM, &fixed, sizeof fixed, e->world + fixed.first,
                              sizeof(int) * (size_t)fixed.count);
        if (fixed.count == 0)
            break;
    }
}

static void define_type(struct instance *in, struct thread_buffer *tb, struct handle_entry *e, MPI_Datatype type)
{
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
}

/* Writes the definition of a new handle entry (in this thread's file; the merger reads
 * every file's definitions before any events). */
static void define(struct instance *in, struct thread_buffer *tb, struct handle_entry *e, const void *handle,
                   const struct definition *d)
{
    if (e->kind == R_COMM) {
        define_comm(in, tb, e, *(const MPI_Comm *)handle);
    } else if (e->kind == R_TYPE) {
        define_type(in, tb, e, *(const MPI_Datatype *)handle);
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

/* A new live entry in the instance's table (its lock held), defined in this thread's
 * file; NULL without memory. */
static struct handle_entry *new_entry(struct instance *in, struct thread_buffer *tb, int kind, uint64_t bits,
                                      const void *handle, const struct definition *d)
{
    struct handle_entry *e;
    if (in->handle_count == in->handle_capacity) {
        int capacity = in->handle_capacity ? 2 * in->handle_capacity : 16;
        struct handle_entry **grown = realloc(in->handles, sizeof *grown * (size_t)capacity);
        if (grown == NULL)
            return NULL;
        in->handles = grown;
        in->handle_capacity = capacity;
    }
    if ((e = calloc(1, sizeof *e)) == NULL)
        return NULL;
    e->kind = kind;
    e->handle = bits;
    e->id = in->next_id[kind]++;
    e->live = 1;
    if (kind == R_COMM)
        PMPI_Comm_size(*(const MPI_Comm *)handle, &e->size);
    else if (kind == R_TYPE)
        PMPI_Type_size(*(const MPI_Datatype *)handle, &e->size);
    define(in, tb, e, handle, d);
    in->handles[in->handle_count++] = e;
    return e;
}

const struct cache_slot trace_unknown_handle = {.handle = 0, .entry = NULL, .kind = 0, .id = -1, .size = 0};

/* trace_lookup's handle not in its home slot of this thread's cache (or the cache is
 * stale): from the other slot of the pair, else the instance's table, else new (defined
 * in this thread's file). A handle found or made goes to an empty slot of its pair, else
 * to its home slot, the handle there moving to the other: two handles whose homes are the
 * same slot both stay in the cache. */
const struct cache_slot *trace_lookup_slow(struct instance *in, struct thread_buffer *tb, int kind, uint64_t bits,
                                           const void *handle, const struct definition *d)
{
    unsigned generation = __atomic_load_n(&in->generation, __ATOMIC_ACQUIRE);
    unsigned home = trace_cache_slot(kind, bits), other = home ^ 1, slot;
    struct handle_entry *e = NULL;
    int i;
    if (tb->cache_generation != generation) {
        memset(tb->cache, 0, sizeof tb->cache);
        tb->cache_generation = generation;
    }
    if (trace_slot_holds(&tb->cache[other], kind, bits))
        return &tb->cache[other];
    pthread_mutex_lock(&in->lock);
    for (i = 0; i < in->handle_count && e == NULL; i++)
        if (in->handles[i]->live && in->handles[i]->handle == bits && in->handles[i]->kind == kind)
            e = in->handles[i];
    if (e == NULL)
        e = new_entry(in, tb, kind, bits, handle, d);
    pthread_mutex_unlock(&in->lock);
    if (e == NULL)
        return &trace_unknown_handle;
    slot = tb->cache[home].entry == NULL || tb->cache[other].entry != NULL ? home : other;
    if (slot == home && tb->cache[home].entry != NULL)
        tb->cache[other] = tb->cache[home]; /* the pair's other handle is dropped */
    tb->cache[slot] = (struct cache_slot){.handle = bits, .entry = e, .kind = kind, .id = e->id, .size = e->size};
    return &tb->cache[slot];
}

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
