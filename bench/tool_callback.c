/* tool_callback.c: empty tools on the MPI Forum / MPICH callback interface, stacked
 * with QMPI_TOOL_LIST=qbcb:qbcb:... (or qbcbs). Both pass MPI_Comm_rank, MPI_Send and
 * MPI_Recv straight on; they differ in how a wrapper finds its next link:
 *  - qbcb (the fast path): each instance asks QMPI_Get_function once, in its init
 *    function (tables are built bottom-up, so the answer is final), and caches the
 *    typed next pointer and next id in an array indexed by its tool id;
 *  - qbcbs: the same cache kept in the instance's registered storage, found on every
 *    call with QMPI_Get_tool_storage (the interface's portable way to per-instance state).
 *
 * Build: mpicc -O2 -shared -fPIC -Wall -Wextra -Werror -I<core> tool_callback.c -o libqbcb.so
 * Link the application with -Wl,--no-as-needed -lqbcb -lqmpi (or LD_PRELOAD both). */
#include <stdlib.h>

#include "qmpi.h"

struct qb_next {
    QMPI_Comm_rank_t *comm_rank;
    QMPI_Send_t *send;
    QMPI_Recv_t *recv;
    int comm_rank_id, send_id, recv_id;
};

static struct qb_next *by_id; /* qbcb: by tool id */
static int capacity;

static void cache_next(int tool_id, struct qb_next *n)
{
    QMPI_Get_function(tool_id, MPI_COMM_RANK_T, (void (**)(void))&n->comm_rank, &n->comm_rank_id);
    QMPI_Get_function(tool_id, MPI_SEND_T, (void (**)(void))&n->send, &n->send_id);
    QMPI_Get_function(tool_id, MPI_RECV_T, (void (**)(void))&n->recv, &n->recv_id);
}

/* ---- qbcb: next links cached by tool id ---- */

static int cb_Comm_rank(QMPI_Context context, int tool_id, MPI_Comm comm, int *rank)
{
    const struct qb_next *n = &by_id[tool_id];
    return n->comm_rank(context, n->comm_rank_id, comm, rank);
}

static int cb_Send(QMPI_Context context, int tool_id, const void *buf, int count, MPI_Datatype datatype, int dest,
                   int tag, MPI_Comm comm)
{
    const struct qb_next *n = &by_id[tool_id];
    return n->send(context, n->send_id, buf, count, datatype, dest, tag, comm);
}

static int cb_Recv(QMPI_Context context, int tool_id, void *buf, int count, MPI_Datatype datatype, int source,
                   int tag, MPI_Comm comm, MPI_Status *status)
{
    const struct qb_next *n = &by_id[tool_id];
    return n->recv(context, n->recv_id, buf, count, datatype, source, tag, comm, status);
}

static void qbcb_init(int tool_id)
{
    if (tool_id >= capacity) {
        int grown = capacity ? capacity : 64;
        struct qb_next *more;
        while (grown <= tool_id)
            grown *= 2;
        more = realloc(by_id, (size_t)grown * sizeof *more);
        if (more == NULL)
            abort();
        by_id = more;
        capacity = grown;
    }
    QMPI_Register_function(tool_id, MPI_COMM_RANK_T, (void (*)(void))cb_Comm_rank);
    QMPI_Register_function(tool_id, MPI_SEND_T, (void (*)(void))cb_Send);
    QMPI_Register_function(tool_id, MPI_RECV_T, (void (*)(void))cb_Recv);
    cache_next(tool_id, &by_id[tool_id]);
}

/* ---- qbcbs: next links in the instance's storage ---- */

static int cbs_Comm_rank(QMPI_Context context, int tool_id, MPI_Comm comm, int *rank)
{
    void *s = NULL;
    const struct qb_next *n;
    QMPI_Get_tool_storage(context, tool_id, &s);
    n = (const struct qb_next *)s;
    return n->comm_rank(context, n->comm_rank_id, comm, rank);
}

static void qbcbs_init(int tool_id)
{
    struct qb_next *n = malloc(sizeof *n);
    if (n == NULL)
        abort();
    QMPI_Register_tool_storage(tool_id, n);
    QMPI_Register_function(tool_id, MPI_COMM_RANK_T, (void (*)(void))cbs_Comm_rank);
    cache_next(tool_id, n);
}

__attribute__((constructor)) static void qb_register(void)
{
    QMPI_Register_tool_name("qbcb", qbcb_init);
    QMPI_Register_tool_name("qbcbs", qbcbs_init);
}
