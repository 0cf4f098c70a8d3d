/* handles.h: the communicators, datatypes, files and windows an instance knows, found
 * through a per-thread cache of 32 slots in pairs (inline: one probe per handle per
 * traced call; a handle whose home slot another holds is in the other slot of the pair). */
#ifndef QMPI_TRACE_HANDLES_H
#define QMPI_TRACE_HANDLES_H
#include "state.h"

/* What a lookup gives for a handle it could not enter (no memory): no entry, id -1,
 * size 0. A lookup never gives NULL, so a hit reads its slot with no test. */
HIDDEN extern const struct cache_slot trace_unknown_handle;
/* trace_lookup's handle not in its home slot of this thread's cache, or the cache stale
 * (handles.c). */
HIDDEN const struct cache_slot *trace_lookup_slow(struct instance *in, struct thread_buffer *tb, int kind,
                                                  uint64_t bits, const void *handle, const struct definition *d);
/* A handle about to be freed: later handles with the same value are new objects. */
HIDDEN void trace_forget(struct instance *in, int kind, const void *handle, size_t handle_size);

/* The lookups below are always inline: left to GCC, whether a wrapper keeps them inline
 * depends on the size of the whole generated file (its unit-growth budget), and making
 * the record of the calls made once per object out of line (record.h) had them called
 * out of line in every wrapper: 13 more instructions per traced call. */
static inline __attribute__((always_inline)) uint64_t trace_handle_bits(const void *handle, size_t size)
{
    uint64_t bits = 0;
    memcpy(&bits, handle, size < sizeof bits ? size : sizeof bits);
    return bits;
}

/* A handle's home slot in the thread's cache (CACHE_SLOTS = 32: the top 5 bits of a
 * multiplicative hash of the handle and its kind). */
static inline __attribute__((always_inline)) unsigned trace_cache_slot(int kind, uint64_t bits)
{
    _Static_assert(CACHE_SLOTS == 32, "the hash keeps 5 bits");
    return (unsigned)(((bits ^ (bits >> 32)) + (uint64_t)kind) * 0x9E3779B97F4A7C15u >> 59);
}

/* Whether slot `s` holds the handle `bits` of `kind` (an empty slot's kind is 0, which no
 * handle's is). */
static inline __attribute__((always_inline)) int trace_slot_holds(const struct cache_slot *s, int kind, uint64_t bits)
{
    return s->handle == bits && s->kind == kind;
}

/* The cache slot of a communicator, datatype, file or window handle (its entry, id and
 * size): its home slot in this thread's cache, else trace_lookup_slow (the other slot of
 * the pair, the instance's table, or a new entry defined in this thread's file);
 * trace_unknown_handle without memory. */
static inline __attribute__((always_inline)) const struct cache_slot *
trace_lookup(struct instance *in, struct thread_buffer *tb, int kind, const void *handle, size_t handle_size,
             const struct definition *d)
{
    uint64_t bits = trace_handle_bits(handle, handle_size);
    const struct cache_slot *s = &tb->cache[trace_cache_slot(kind, bits)];
    if (__builtin_expect(trace_slot_holds(s, kind, bits) &&
                             tb->cache_generation == __atomic_load_n(&in->generation, __ATOMIC_ACQUIRE),
                         1))
        return s;
    return trace_lookup_slow(in, tb, kind, bits, handle, d);
}

/* A rank of communicator `comm` as a world rank (PEER_ANY, PEER_NONE). Inline: a probe
 * or receive from any source reads nothing. */
static inline __attribute__((always_inline)) int trace_world_rank(const struct handle_entry *comm, int rank)
{
    if (rank == MPI_ANY_SOURCE)
        return PEER_ANY;
    if (comm == NULL || rank < 0 || rank >= comm->size)
        return PEER_NONE;
    return comm->world[rank];
}

/* The call's communicator entry into t->comm; its id, or -1 if it is not known. */
static inline __attribute__((always_inline)) int trace_set_comm(struct traced *t, MPI_Comm comm)
{
    const struct cache_slot *s = trace_lookup(t->in, t->tb, R_COMM, &comm, sizeof comm, NULL);
    t->comm = s->entry;
    return s->id;
}

/* A datatype's size (and its id into *id). */
static inline __attribute__((always_inline)) int trace_type_size(struct traced *t, MPI_Datatype type, int *id)
{
    const struct cache_slot *s = trace_lookup(t->in, t->tb, R_TYPE, &type, sizeof type, NULL);
    if (id != NULL)
        *id = s->id;
    return s->size;
}

/* A handle's id, its entry made (and defined) if it is new. */
static inline __attribute__((always_inline)) int trace_handle_id(struct traced *t, int kind, const void *handle,
                                                                 size_t size, const struct definition *d)
{
    return trace_lookup(t->in, t->tb, kind, handle, size, d)->id;
}

#endif
