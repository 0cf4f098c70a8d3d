/* services.c: services and globals between tools, the current call, the stacks' names. */
#define _GNU_SOURCE
#include "qmpi_internal.h"

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* One registered service (a function) or global (a value), per instance and name. */
struct qmpi_service {
    int level;
    char *name;
    char *signature; /* NULL for a global */
    QMPI_Service_function function;
    void *data;    /* the function's data, or the global's value */
    uint64_t hash; /* of the name and kind */
    size_t next;   /* 1 + the next entry of this hash bucket, 0 at the end */
};

/* The entries in registration order, and a chained hash table over them (bucket heads
 * are 1 + an index, 0 for none; the count of buckets is a power of two, at most 4/3 of
 * the entries): a lookup costs the same with 10 or 100,000 names registered. */
static struct qmpi_service *qmpi_service_list;
static size_t qmpi_service_count, qmpi_service_capacity;
static size_t *qmpi_service_buckets;
static size_t qmpi_service_bucket_count;
static pthread_mutex_t qmpi_service_lock = PTHREAD_MUTEX_INITIALIZER;

static char *qmpi_service_copy(const char *text)
{
    char *copy = strdup(text);
    if (copy == NULL)
        qmpi_fatal("QMPI: out of memory registering a service");
    return copy;
}

/* FNV-1a over the name, then the kind: a service and a global may share a name. */
static uint64_t qmpi_service_hash(const char *name, int global)
{
    uint64_t hash = 14695981039346656037ULL;

    for (; *name != '\0'; name++)
        hash = (hash ^ (unsigned char)*name) * 1099511628211ULL;
    return (hash ^ (uint64_t)(global != 0)) * 1099511628211ULL;
}

/* Doubles the buckets and relinks every entry (the lock is held). */
static void qmpi_service_rehash(void)
{
    size_t count = qmpi_service_bucket_count ? 2 * qmpi_service_bucket_count : 64, i;
    size_t *buckets = calloc(count, sizeof *buckets);

    if (buckets == NULL)
        qmpi_fatal("QMPI: out of memory registering a service");
    for (i = 0; i < qmpi_service_count; i++) {
        size_t b = (size_t)(qmpi_service_list[i].hash & (count - 1));
        qmpi_service_list[i].next = buckets[b];
        buckets[b] = i + 1;
    }
    free(qmpi_service_buckets);
    qmpi_service_buckets = buckets;
    qmpi_service_bucket_count = count;
}

/* The entry for `name` from `provider` (QMPI_ANY_PROVIDER: the lowest level that has
 * it, the instance nearest the application), or NULL. Walks one bucket: the names that
 * share its hash bits, and one entry per instance that registered `name`. */
static const struct qmpi_service *qmpi_service_find(const char *name, int global, int provider)
{
    const struct qmpi_service *found = NULL;
    uint64_t hash;
    size_t at;

    if (name == NULL || qmpi_service_bucket_count == 0)
        return NULL;
    hash = qmpi_service_hash(name, global);
    for (at = qmpi_service_buckets[hash & (qmpi_service_bucket_count - 1)]; at != 0;
         at = qmpi_service_list[at - 1].next) {
        const struct qmpi_service *s = &qmpi_service_list[at - 1];
        if (s->hash != hash || (s->signature == NULL) != global || strcmp(s->name, name) != 0)
            continue;
        if (provider != QMPI_ANY_PROVIDER ? s->level == provider : found == NULL || s->level < found->level)
            found = s;
    }
    return found;
}

static void qmpi_service_add(int level, const char *name, const char *signature, QMPI_Service_function function,
                             void *data)
{
    struct qmpi_service *entry;
    int global = signature == NULL;

    if (name == NULL || *name == '\0')
        qmpi_fatalf("level %d registered a %s without a name", level, global ? "global" : "service");
    pthread_mutex_lock(&qmpi_service_lock);
    if (qmpi_service_find(name, global, level) != NULL) {
        pthread_mutex_unlock(&qmpi_service_lock);
        qmpi_fatalf("level %d registered the %s '%s' twice", level, global ? "global" : "service", name);
    }
    if (qmpi_service_count == qmpi_service_capacity) {
        size_t capacity = qmpi_service_capacity ? 2 * qmpi_service_capacity : 16;
        struct qmpi_service *grown = realloc(qmpi_service_list, capacity * sizeof *grown);
        if (grown == NULL)
            qmpi_fatal("QMPI: out of memory registering a service");
        qmpi_service_list = grown;
        qmpi_service_capacity = capacity;
    }
    entry = &qmpi_service_list[qmpi_service_count];
    entry->level = level;
    entry->name = qmpi_service_copy(name);
    entry->signature = global ? NULL : qmpi_service_copy(signature);
    entry->function = function;
    entry->data = data;
    entry->hash = qmpi_service_hash(name, global);
    qmpi_service_count++;
    if (4 * qmpi_service_count > 3 * qmpi_service_bucket_count) {
        qmpi_service_rehash(); /* links the new entry too */
    } else {
        size_t b = (size_t)(entry->hash & (qmpi_service_bucket_count - 1));
        entry->next = qmpi_service_buckets[b];
        qmpi_service_buckets[b] = qmpi_service_count;
    }
    pthread_mutex_unlock(&qmpi_service_lock);
}

int QMPI_Service_register(int level, const char *name, const char *signature, QMPI_Service_function function,
                          void *data)
{
    if (signature == NULL || function == NULL)
        qmpi_fatalf("level %d registered the service '%s' without a %s", level, name ? name : "(null)",
                    signature == NULL ? "signature" : "function");
    qmpi_service_add(level, name, signature, function, data);
    return QMPI_SERVICE_OK;
}

int QMPI_Service_get(const char *name, const char *signature, int provider, QMPI_Service_function *function,
                     void **data)
{
    const struct qmpi_service *s;
    QMPI_Service_function found_function = NULL;
    void *found_data = NULL;
    int rc = QMPI_SERVICE_NOT_FOUND;

    pthread_mutex_lock(&qmpi_service_lock);
    s = qmpi_service_find(name, 0, provider);
    if (s != NULL && (signature == NULL || strcmp(s->signature, signature) != 0)) {
        char *has = qmpi_service_copy(s->signature);
        int level = s->level;
        pthread_mutex_unlock(&qmpi_service_lock);
        qmpi_fatalf("service '%s' of level %d has the signature '%s', asked for as '%s'", name, level, has,
                    signature ? signature : "(null)");
    }
    if (s != NULL) {
        found_function = s->function;
        found_data = s->data;
        rc = QMPI_SERVICE_OK;
    }
    pthread_mutex_unlock(&qmpi_service_lock);
    if (function != NULL)
        *function = found_function;
    if (data != NULL)
        *data = found_data;
    return rc;
}

int QMPI_Global_register(int level, const char *name, void *value)
{
    qmpi_service_add(level, name, NULL, NULL, value);
    return QMPI_SERVICE_OK;
}

int QMPI_Global_get(const char *name, int provider, void **value)
{
    const struct qmpi_service *s;

    pthread_mutex_lock(&qmpi_service_lock);
    s = qmpi_service_find(name, 1, provider);
    if (value != NULL)
        *value = s != NULL ? s->data : NULL;
    pthread_mutex_unlock(&qmpi_service_lock);
    return s != NULL ? QMPI_SERVICE_OK : QMPI_SERVICE_NOT_FOUND;
}

void QMPI_Record_calls(void)
{
    __atomic_store_n(&qmpi_recording, 1, __ATOMIC_RELAXED);
}

int QMPI_Call_function(void)
{
    return qmpi_current_call != NULL ? qmpi_current_call->function : -1;
}

void *QMPI_Call_site(void)
{
    return qmpi_call_site;
}

void *QMPI_Call_argument(int position)
{
    const struct qmpi_call *call = qmpi_current_call;
    return call != NULL && position >= 0 && position < call->count ? call->arguments[position] : NULL;
}

/* The stack the application's calls enter. Which stack a tool's wrapper runs on is its
 * level's (QMPI_Stack_of): a switch to another stack is an inline call in the tool,
 * which the core does not see. */
const char *QMPI_Stack_name(void)
{
    return "default";
}

/* A named stack's handle (the level of its top), -1 if there is none of that name. */
int QMPI_Stack_lookup(const char *name)
{
    int s;

    if (qmpi_current_state() == QMPI_UNBUILT)
        qmpi_build_chain();
    for (s = 0; name != NULL && s < qmpi_stack_count; s++)
        if (strcmp(qmpi_stacks[s].name, name) == 0)
            return qmpi_stacks[s].top;
    return -1;
}

/* The index in qmpi_stacks of the stack that holds `level` (or is entered at it), -1 if
 * none does. */
QMPI_HIDDEN int qmpi_stack_holding(int level)
{
    int s;

    for (s = 0; s < qmpi_stack_count; s++)
        if (level >= qmpi_stacks[s].top && level <= qmpi_stacks[s].top + qmpi_stacks[s].count)
            return s;
    return -1;
}

/* The name of the stack that holds `level` (or is entered at it), NULL if none does. */
const char *QMPI_Stack_of(int level)
{
    int s = qmpi_stack_holding(level);

    return s >= 0 ? qmpi_stacks[s].name : NULL;
}

/* The names of the stacks, ", "-separated, for a tool's error message. */
const char *QMPI_Stack_names(void)
{
    static char *names;
    size_t length = 1;
    char *text, *expected = NULL;
    int s;

    if (__atomic_load_n(&names, __ATOMIC_ACQUIRE) != NULL)
        return names;
    for (s = 0; s < qmpi_stack_count; s++)
        length += strlen(qmpi_stacks[s].name) + 2;
    text = (char *)calloc(length, 1);
    if (text == NULL)
        return "";
    for (s = 0; s < qmpi_stack_count; s++) {
        if (s)
            strcat(text, ", ");
        strcat(text, qmpi_stacks[s].name);
    }
    if (!__atomic_compare_exchange_n(&names, &expected, text, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
        free(text);
    return names;
}
