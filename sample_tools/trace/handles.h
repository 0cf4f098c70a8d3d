/* handles.h: the communicators, datatypes, files and windows an instance knows, found
 * through a 16-entry per-thread cache (inline: one probe per handle per traced call). */
#ifndef QMPI_TRACE_HANDLES_H
#define QMPI_TRACE_HANDLES_H
#include "state.h"

/* trace_lookup's handle not in its home slot of this thread's cache (handles.c). */
HIDDEN struct handle_entry *trace_lookup_slow(struct instance *in, struct thread_buffer *tb, int kind, uint64_t bits,
                                              const void *handle, const struct definition *d);
/* A handle about to be freed: later handles with the same value are new objects. */
HIDDEN void trace_forget(struct instance *in, int kind, const void *handle, size_t handle_size);
/* A rank of communicator `comm` as a world rank (PEER_ANY, PEER_NONE). */
HIDDEN int trace_world_rank(const struct handle_entry *comm, int rank);

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

/* A handle's home slot in the thread's cache (CACHE_SLOTS = 16: the top 4 bits of a
 * multiplicative hash of the handle and its kind). */
static inline __attribute__((always_inline)) unsigned trace_cache_slot(int kind, uint64_t bits)
{
    _Static_assert(CACHE_SLOTS == 16, "the hash keeps 4 bits");
    return (unsigned)(((bits ^ (bits >> 32)) + (uint64_t)kind) * 0x9E3779B97F4A7C15u >> 60);
}

/* The entry for a communicator, datatype, file or window handle: from its home slot in
 * this thread's cache, else trace_lookup_slow (the other slots, the instance's table, or
 * a new entry defined in this thread's file). */
static inline __attribute__((always_inline)) struct handle_entry *trace_lookup(struct instance *in,
                                                                               struct thread_buffer *tb, int kind,
                                                                               const void *handle, size_t handle_size,
                                                                               const struct definition *d)
{
    uint64_t bits = trace_handle_bits(handle, handle_size);
    struct handle_entry *e = tb->cache[trace_cache_slot(kind, bits)];
    if (__builtin_expect(e != NULL && e->handle == bits && e->kind == kind &&
                             tb->cache_generation == __atomic_load_n(&in->generation, __ATOMIC_ACQUIRE),
                         1))
        return e;
    return trace_lookup_slow(in, tb, kind, bits, handle, d);
}

/* The call's communicator entry into t->comm; its id, or -1 if it is not known. */
static inline __attribute__((always_inline)) int trace_set_comm(struct traced *t, MPI_Comm comm)
{
    t->comm = trace_lookup(t->in, t->tb, R_COMM, &comm, sizeof comm, NULL);
    return t->comm != NULL ? t->comm->id : -1;
}

/* A datatype's size (and its id into *id). */
static inline __attribute__((always_inline)) int trace_type_size(struct traced *t, MPI_Datatype type, int *id)
{
    struct handle_entry *e = trace_lookup(t->in, t->tb, R_TYPE, &type, sizeof type, NULL);
    if (id != NULL)
        *id = e != NULL ? e->id : -1;
    return e != NULL ? e->size : 0;
}

/* A handle's id, its entry made (and defined) if it is new. */
static inline __attribute__((always_inline)) int trace_handle_id(struct traced *t, int kind, const void *handle,
                                                                 size_t size, const struct definition *d)
{
    struct handle_entry *e = trace_lookup(t->in, t->tb, kind, handle, size, d);
    return e != NULL ? e->id : -1;
}

#endif
