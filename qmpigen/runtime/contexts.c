/* contexts.c: the contexts of tool instances (thesis 2.5.5), set whole or initialized once. */
#define _GNU_SOURCE
#include "qmpi_internal.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

static pthread_mutex_t qmpi_context_lock = PTHREAD_MUTEX_INITIALIZER;

static void *qmpi_copy_context(vector *v, int index, const void *cntxt, size_t size)
{
    void *copy;

    if (index < 0 || index >= v->total)
        qmpi_fatalf("QMPI_Set_context: no tool instance at level %d (0..%d)", index, v->total - 1);
    copy = malloc(size ? size : 1);
    if (copy == NULL)
        qmpi_fatalf("QMPI_Set_context: out of memory (%zu bytes) for level %d", size, index);
    if (size)
        memcpy(copy, cntxt, size);
    return copy;
}

QMPI_HIDDEN void qmpi_set_context(vector *v, int index, const void *cntxt, size_t size)
{
    void *copy = qmpi_copy_context(v, index, cntxt, size), *old;

    pthread_mutex_lock(&qmpi_context_lock);
    old = v->items[index]->context;
    __atomic_store_n(&v->items[index]->context, copy, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&qmpi_context_lock);
    free(old);
}

QMPI_HIDDEN void *qmpi_init_context(vector *v, int index, const void *cntxt, size_t size)
{
    void *context;

    pthread_mutex_lock(&qmpi_context_lock);
    context = v->items[index]->context;
    if (context == NULL) {
        context = qmpi_copy_context(v, index, cntxt, size);
        __atomic_store_n(&v->items[index]->context, context, __ATOMIC_RELEASE);
    }
    pthread_mutex_unlock(&qmpi_context_lock);
    return context;
}
