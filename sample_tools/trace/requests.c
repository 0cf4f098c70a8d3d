/* requests.c: the trace tool's wrappers of the functions that start, complete,
 * cancel and free requests: MPI_Wait/Test and their any/some/all forms, MPI_Start and
 * MPI_Startall, MPI_Request_free, MPI_Cancel. No parameter role says what such a call
 * did to which request, so these are written by hand: each copies the request handles
 * before the call (MPI sets completed ones to MPI_REQUEST_NULL) and, after its call
 * record, writes a COMPLETION record per request completed (with what its status says),
 * started or let go. The merger ties each to the call that started the request (an
 * Isend, an Irecv, a nonblocking collective, I/O or one-sided call, a persistent init),
 * whatever its kind. */
#include "requests.h"
#include "calls.h"
#include "handles.h"
#include "sink.h"
#include <stdlib.h>

/* The functions wrapped here. */
#define OWN_FUNCTIONS(X)                                                                                               \
    X(Wait)                                                                                                            \
    X(Waitall)                                                                                                         \
    X(Waitany) X(Waitsome) X(Test) X(Testall) X(Testany) X(Testsome) X(Start) X(Startall) X(Request_free) X(Cancel)

static void set_request(struct traced *t, const MPI_Request *request)
{
    t->r.request = trace_handle_bits(request, sizeof *request);
    t->r.flags |= CALL_HAS_REQUEST;
}

/* A request event after the call record: completed (`status`: what it says), started
 * (REQUEST_STARTED) or let go (REQUEST_FREED), status NULL for the last two. */
static void request_event(struct traced *t, MPI_Request request, const MPI_Status *status, int flags)
{
    struct completion_record c;
    int bytes = 0, cancelled = 0;
    memset(&c, 0, sizeof c);
    c.kind = R_COMPLETION;
    c.size = sizeof c;
    c.request = trace_handle_bits(&request, sizeof request);
    c.source = PEER_NONE;
    c.flags = flags;
    if (status != NULL && PMPI_Test_cancelled(status, &cancelled) == MPI_SUCCESS && cancelled)
        c.flags |= REQUEST_CANCELLED;
    else if (status != NULL && status->MPI_SOURCE >= 0) {
        /* receives only; sends leave the status undefined and the merger ignores it */
        c.source = status->MPI_SOURCE;
        c.tag = status->MPI_TAG;
        PMPI_Get_count(status, MPI_BYTE, &bytes);
        c.bytes = bytes;
    }
    trace_append(t->in, t->tb, &c, sizeof c);
}

static void complete(struct traced *t, MPI_Request request, const MPI_Status *status)
{
    request_event(t, request, status, 0);
}

/* Completion records follow the call record they belong to; status sources are made
 * world ranks by the merger (it knows the request's communicator from Isend/Irecv). */
_EXTERN_C_ int TR_Wait(MPI_Request *request, MPI_Status *status, int level, vector *v)
{
    struct traced t;
    MPI_Status own;
    MPI_Request before;
    int ret;
    if (!trace_begin(&t, level, _MPI_Wait, TRACE_KIND_completion))
        return QMPI_Next_Wait(request, status, level, v);
    if (status == MPI_STATUS_IGNORE)
        status = &own;
    before = *request;
    ret = QMPI_Next_Wait(request, status, level, v);
    t.r.count = 1;
    set_request(&t, &before);
    trace_end(&t, ret != MPI_SUCCESS);
    if (ret == MPI_SUCCESS && before != MPI_REQUEST_NULL)
        complete(&t, before, status);
    return ret;
}

_EXTERN_C_ int TR_Waitall(int count, MPI_Request requests[], MPI_Status statuses[], int level, vector *v)
{
    struct traced t;
    MPI_Request small_before[64], *before = small_before;
    MPI_Status small_own[64], *own = NULL;
    int ret, i;
    if (!trace_begin(&t, level, _MPI_Waitall, TRACE_KIND_completion))
        return QMPI_Next_Waitall(count, requests, statuses, level, v);
    if (count > 64) {
        before = malloc(sizeof *before * (size_t)count);
        own = statuses == MPI_STATUSES_IGNORE ? malloc(sizeof *own * (size_t)count) : NULL;
    } else if (statuses == MPI_STATUSES_IGNORE) {
        own = small_own;
    }
    memcpy(before, requests, sizeof *before * (size_t)count);
    if (statuses == MPI_STATUSES_IGNORE)
        statuses = own;
    ret = QMPI_Next_Waitall(count, requests, statuses, level, v);
    t.r.count = count;
    trace_end(&t, ret != MPI_SUCCESS);
    if (ret == MPI_SUCCESS)
        for (i = 0; i < count; i++)
            if (before[i] != MPI_REQUEST_NULL)
                complete(&t, before[i], &statuses[i]);
    if (before != small_before)
        free(before);
    if (own != small_own)
        free(own);
    return ret;
}

_EXTERN_C_ int TR_Test(MPI_Request *request, int *flag, MPI_Status *status, int level, vector *v)
{
    struct traced t;
    MPI_Status own;
    MPI_Request before;
    int ret;
    if (!trace_begin(&t, level, _MPI_Test, TRACE_KIND_completion))
        return QMPI_Next_Test(request, flag, status, level, v);
    if (status == MPI_STATUS_IGNORE)
        status = &own;
    before = *request;
    ret = QMPI_Next_Test(request, flag, status, level, v);
    set_request(&t, &before);
    t.r.count = ret == MPI_SUCCESS && *flag;
    trace_end(&t, ret != MPI_SUCCESS);
    if (t.r.count && before != MPI_REQUEST_NULL)
        complete(&t, before, status);
    return ret;
}

/* The request handles a call is handed, copied before it runs (MPI sets completed ones to
 * MPI_REQUEST_NULL): on the stack up to 64, else on the heap; NULL if that fails. */
struct handles {
    MPI_Request small[64], *h;
};
static MPI_Request *save_handles(struct handles *s, int count, const MPI_Request requests[])
{
    s->h = count <= 64 ? s->small : malloc(sizeof *s->h * (size_t)count);
    if (s->h != NULL && count > 0)
        memcpy(s->h, requests, sizeof *s->h * (size_t)count);
    return s->h;
}
static void drop_handles(struct handles *s)
{
    if (s->h != s->small)
        free(s->h);
}
/* Statuses to read even when the application ignores them. */
struct statuses {
    MPI_Status small[64], *s;
};
static MPI_Status *own_statuses(struct statuses *o, int count, MPI_Status *given)
{
    if (given != MPI_STATUSES_IGNORE)
        return o->s = given;
    return o->s = count <= 64 ? o->small : malloc(sizeof *o->s * (size_t)count);
}
static void drop_statuses(struct statuses *o, MPI_Status *given)
{
    if (o->s != given && o->s != o->small)
        free(o->s);
}

_EXTERN_C_ int TR_Waitany(int count, MPI_Request requests[], int *index, MPI_Status *status, int level, vector *v)
{
    struct traced t;
    struct handles before;
    MPI_Status own;
    int ret;
    if (!trace_begin(&t, level, _MPI_Waitany, TRACE_KIND_completion))
        return QMPI_Next_Waitany(count, requests, index, status, level, v);
    if (status == MPI_STATUS_IGNORE)
        status = &own;
    save_handles(&before, count, requests);
    ret = QMPI_Next_Waitany(count, requests, index, status, level, v);
    t.r.count = ret == MPI_SUCCESS && *index != MPI_UNDEFINED;
    trace_end(&t, ret != MPI_SUCCESS);
    if (t.r.count && before.h != NULL && *index >= 0 && *index < count)
        complete(&t, before.h[*index], status);
    drop_handles(&before);
    return ret;
}

_EXTERN_C_ int TR_Testany(int count, MPI_Request requests[], int *index, int *flag, MPI_Status *status, int level,
                          vector *v)
{
    struct traced t;
    struct handles before;
    MPI_Status own;
    int ret;
    if (!trace_begin(&t, level, _MPI_Testany, TRACE_KIND_completion))
        return QMPI_Next_Testany(count, requests, index, flag, status, level, v);
    if (status == MPI_STATUS_IGNORE)
        status = &own;
    save_handles(&before, count, requests);
    ret = QMPI_Next_Testany(count, requests, index, flag, status, level, v);
    t.r.count = ret == MPI_SUCCESS && *flag && *index != MPI_UNDEFINED;
    trace_end(&t, ret != MPI_SUCCESS);
    if (t.r.count && before.h != NULL && *index >= 0 && *index < count)
        complete(&t, before.h[*index], status);
    drop_handles(&before);
    return ret;
}

/* Waitsome, Testsome: the completed requests' indices in `indices`. */
#define SOME_WRAPPER(Name)                                                                                             \
    _EXTERN_C_ int TR_##Name(int incount, MPI_Request requests[], int *outcount, int indices[], MPI_Status statuses[], \
                             int level, vector *v)                                                                     \
    {                                                                                                                  \
        struct traced t;                                                                                               \
        struct handles before;                                                                                         \
        struct statuses own;                                                                                           \
        MPI_Status *use;                                                                                               \
        int ret, i;                                                                                                    \
        if (!trace_begin(&t, level, _MPI_##Name, TRACE_KIND_completion))                                               \
            return QMPI_Next_##Name(incount, requests, outcount, indices, statuses, level, v);                         \
        save_handles(&before, incount, requests);                                                                      \
        use = own_statuses(&own, incount, statuses);                                                                   \
        ret = QMPI_Next_##Name(incount, requests, outcount, indices, use ? use : statuses, level, v);                  \
        t.r.count = ret == MPI_SUCCESS && *outcount != MPI_UNDEFINED ? *outcount : 0;                                  \
        trace_end(&t, ret != MPI_SUCCESS);                                                                             \
        for (i = 0; before.h != NULL && i < t.r.count; i++)                                                            \
            if (indices[i] >= 0 && indices[i] < incount)                                                               \
                complete(&t, before.h[indices[i]], use ? &use[i] : NULL);                                              \
        drop_handles(&before);                                                                                         \
        drop_statuses(&own, statuses);                                                                                 \
        return ret;                                                                                                    \
    }
SOME_WRAPPER(Waitsome)
SOME_WRAPPER(Testsome)

_EXTERN_C_ int TR_Testall(int count, MPI_Request requests[], int *flag, MPI_Status statuses[], int level, vector *v)
{
    struct traced t;
    struct handles before;
    struct statuses own;
    MPI_Status *use;
    int ret, i;
    if (!trace_begin(&t, level, _MPI_Testall, TRACE_KIND_completion))
        return QMPI_Next_Testall(count, requests, flag, statuses, level, v);
    save_handles(&before, count, requests);
    use = own_statuses(&own, count, statuses);
    ret = QMPI_Next_Testall(count, requests, flag, use ? use : statuses, level, v);
    t.r.count = ret == MPI_SUCCESS && *flag ? count : 0;
    trace_end(&t, ret != MPI_SUCCESS);
    for (i = 0; before.h != NULL && i < t.r.count; i++)
        if (before.h[i] != MPI_REQUEST_NULL)
            complete(&t, before.h[i], use ? &use[i] : NULL);
    drop_handles(&before);
    drop_statuses(&own, statuses);
    return ret;
}

_EXTERN_C_ int TR_Start(MPI_Request *request, int level, vector *v)
{
    struct traced t;
    MPI_Request before;
    int ret;
    if (!trace_begin(&t, level, _MPI_Start, TRACE_KIND_start))
        return QMPI_Next_Start(request, level, v);
    before = *request;
    ret = QMPI_Next_Start(request, level, v);
    t.r.count = 1;
    trace_end(&t, ret != MPI_SUCCESS);
    if (ret == MPI_SUCCESS)
        request_event(&t, before, NULL, REQUEST_STARTED);
    return ret;
}

_EXTERN_C_ int TR_Startall(int count, MPI_Request requests[], int level, vector *v)
{
    struct traced t;
    int ret, i;
    if (!trace_begin(&t, level, _MPI_Startall, TRACE_KIND_start))
        return QMPI_Next_Startall(count, requests, level, v);
    ret = QMPI_Next_Startall(count, requests, level, v); /* the handles stay as they were */
    t.r.count = count;
    trace_end(&t, ret != MPI_SUCCESS);
    for (i = 0; ret == MPI_SUCCESS && i < count; i++)
        request_event(&t, requests[i], NULL, REQUEST_STARTED);
    return ret;
}

/* MPI_Request_free (the application lets go of a request: an active one completes
 * unseen, a REQUEST_FREED record) and MPI_Cancel (marks a request for cancellation; the
 * Wait/Test that completes it says whether it was): the call record names the request. */
static int request_call(int index, int (*next)(MPI_Request *, int, vector *), int flags, MPI_Request *request,
                        int level, vector *v)
{
    struct traced t;
    MPI_Request before;
    int ret;
    if (!trace_begin(&t, level, index, TRACE_KIND_request_free))
        return next(request, level, v);
    before = *request;
    ret = next(request, level, v);
    set_request(&t, &before);
    trace_end(&t, ret != MPI_SUCCESS);
    if (ret == MPI_SUCCESS && flags != 0)
        request_event(&t, before, NULL, flags);
    return ret;
}

_EXTERN_C_ int TR_Request_free(MPI_Request *request, int level, vector *v)
{
    return request_call(_MPI_Request_free, QMPI_Next_Request_free, REQUEST_FREED, request, level, v);
}

_EXTERN_C_ int TR_Cancel(MPI_Request *request, int level, vector *v)
{
    return request_call(_MPI_Cancel, QMPI_Next_Cancel, 0, request, level, v);
}

int trace_own_function(int index)
{
    switch (index) {
#define AS_CASE(Name)                                                                                                  \
    case _MPI_##Name:                                                                                                  \
        return 1;
        OWN_FUNCTIONS(AS_CASE)
#undef AS_CASE
    default:
        return 0;
    }
}

char *trace_requests_interception(int index)
{
    switch (index) {
#define AS_CASE(Name)                                                                                                  \
    case _MPI_##Name:                                                                                                  \
        return "TR_" #Name;
        OWN_FUNCTIONS(AS_CASE)
#undef AS_CASE
    default:
        return "NULL";
    }
}
