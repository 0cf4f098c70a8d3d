/* TBcast: MPI_Bcast reimplemented with MPI_Comm_rank, MPI_Comm_size, MPI_Send and
 * MPI_Recv called through its own function table (thesis section 3.3.2, listing
 * 3.13). Tools below it see those calls instead of MPI_Bcast (thesis 4.5.3). On MPI 4
 * it replaces MPI_Bcast_c as well, with MPI_Send_c and MPI_Recv_c (mpi4py, for one,
 * calls the large-count functions wherever the MPI has them).
 *
 * A tool that replaces a call must be right for every valid call, so TBcast replaces
 * only the broadcasts it implements exactly: on an intracommunicator of two or more
 * ranks, from a root inside it. Everything else continues unchanged to the next link,
 * which performs it or reports the MPI's own error: intercommunicators (root =
 * MPI_ROOT, MPI_PROC_NULL or a rank of the remote group), MPI_COMM_NULL, a root out
 * of range, MPI_IN_PLACE (not allowed for MPI_Bcast), a negative count,
 * MPI_DATATYPE_NULL. Derived datatypes and count 0 need nothing: the Sends and Recvs
 * take the broadcast's (count, datatype) as they are.
 *
 * The Sends and Recvs travel on a duplicate of `comm`, made at the first broadcast on
 * it (a collective call, so every rank makes it there) and freed with it (the world's
 * at MPI_Finalize): on `comm`
 * itself they could match the application's own messages (same tag, MPI_ANY_TAG),
 * which an MPI collective never does. The duplicate is made and looked up with PMPI_
 * calls: tools below see TBcast's messages, not its bookkeeping.
 *
 * Build: mpicc -shared -fPIC -Wall -Wextra -Werror -I<core> tbcast.c -o libtbcast.so
 * Run:   TOOLS=./libcounter.so:./libtbcast.so:./libcounter.so mpiexec -n 3 ./app */
#include <mpi.h>
#include <pthread.h>
#include <string.h>
#include "qmpi.h"

/* MPI 4's large-count MPI_Bcast_c is replaced too, by MPI_Send_c and MPI_Recv_c. */
#define TB_LARGE_COUNT (MPI_VERSION >= 4)
/* tb_bcast's answer when it leaves the call to the next link (not an MPI error code). */
#define TB_NOT_REPLACED (-1)

/* The duplicate is kept in the attribute value itself (MPI_Comm is an int or a pointer). */
_Static_assert(sizeof(MPI_Comm) <= sizeof(void *), "MPI_Comm fits an attribute value");

static int tb_keyval = MPI_KEYVAL_INVALID, tb_self_keyval = MPI_KEYVAL_INVALID;
static pthread_once_t tb_keyval_once = PTHREAD_ONCE_INIT;

/* Called by MPI when the application frees `comm` (or at MPI_Finalize for MPI_COMM_SELF). */
static int tb_free_duplicate(MPI_Comm comm, int keyval, void *value, void *extra)
{
    MPI_Comm duplicate;
    (void)comm;
    (void)keyval;
    (void)extra;
    memcpy(&duplicate, &value, sizeof duplicate);
    return PMPI_Comm_free(&duplicate);
}

/* MPI_Finalize deletes MPI_COMM_SELF's attributes first, never MPI_COMM_WORLD's: an
 * attribute on MPI_COMM_SELF frees the world's duplicate then. */
static int tb_free_world_duplicate(MPI_Comm comm, int keyval, void *value, void *extra)
{
    (void)comm;
    (void)keyval;
    (void)value;
    (void)extra;
    return PMPI_Comm_delete_attr(MPI_COMM_WORLD, tb_keyval);
}

static void tb_create_keyval(void)
{
    /* MPI_COMM_NULL_COPY_FN: a copy of `comm` gets its own duplicate when it broadcasts. */
    if (PMPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, tb_free_duplicate, &tb_keyval, NULL) != MPI_SUCCESS)
        tb_keyval = MPI_KEYVAL_INVALID;
    if (PMPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, tb_free_world_duplicate, &tb_self_keyval, NULL) != MPI_SUCCESS)
        tb_self_keyval = MPI_KEYVAL_INVALID;
}

/* TBcast's communicator for broadcasts on `comm` into *duplicate. Collective on the
 * first call for a communicator. */
static int tb_duplicate(MPI_Comm comm, MPI_Comm *duplicate)
{
    void *value = NULL;
    int found = 0, ret;

    ret = PMPI_Comm_get_attr(comm, tb_keyval, &value, &found);
    if (ret == MPI_SUCCESS && found) {
        memcpy(duplicate, &value, sizeof *duplicate);
        return MPI_SUCCESS;
    }
    /* Without the application's info hints: mpi_assert_allow_overtaking would let one
     * broadcast's message match the Recv of an earlier one. */
    ret = PMPI_Comm_dup_with_info(comm, MPI_INFO_NULL, duplicate);
    if (ret != MPI_SUCCESS)
        return ret;
    value = NULL;
    memcpy(&value, duplicate, sizeof *duplicate);
    ret = PMPI_Comm_set_attr(comm, tb_keyval, value);
    if (ret == MPI_SUCCESS && comm == MPI_COMM_WORLD && tb_self_keyval != MPI_KEYVAL_INVALID)
        PMPI_Comm_set_attr(MPI_COMM_SELF, tb_self_keyval, NULL);
    return ret;
}

/* Whether TBcast replaces this broadcast without asking anything of the chain; the
 * same answer on every rank of a correct program. */
static int tb_replaces(const void *buffer, MPI_Count count, MPI_Datatype datatype, MPI_Comm comm)
{
    int inter = 1;

    if (comm == MPI_COMM_NULL || buffer == MPI_IN_PLACE || count < 0 || datatype == MPI_DATATYPE_NULL)
        return 0;
    if (PMPI_Comm_test_inter(comm, &inter) != MPI_SUCCESS || inter)
        return 0;
    pthread_once(&tb_keyval_once, tb_create_keyval);
    return tb_keyval != MPI_KEYVAL_INVALID;
}

/* The broadcast as the root's Sends and the other ranks' Recv, on comm's duplicate;
 * with MPI_Send_c and MPI_Recv_c for MPI_Bcast_c. */
static int tb_bcast(void *buffer, MPI_Count count, MPI_Datatype datatype, int root, MPI_Comm comm, int large, int i,
                    vector *v)
{
    int ret = MPI_SUCCESS;
    void *f = NULL;
    int rank = 0, comm_size = 0, index;
    MPI_Comm duplicate = MPI_COMM_NULL;

    MPI_TABLE_QUERY(_MPI_Comm_rank, &f, (*(VECTOR_GET(v, i))).table);
    ret = EXEC_FUNC(f, i, _MPI_Comm_rank, v, comm, &rank);
    if (ret != MPI_SUCCESS)
        return ret;
    MPI_TABLE_QUERY(_MPI_Comm_size, &f, (*(VECTOR_GET(v, i))).table);
    ret = EXEC_FUNC(f, i, _MPI_Comm_size, v, comm, &comm_size);
    if (ret != MPI_SUCCESS)
        return ret;
    /* A root out of range is the MPI's error to report (MPI_ERR_ROOT); one rank has
     * nothing to send, and the MPI still checks the buffer and datatype. */
    if (root < 0 || root >= comm_size || comm_size == 1)
        return TB_NOT_REPLACED;
    ret = tb_duplicate(comm, &duplicate);
    if (ret != MPI_SUCCESS)
        return ret;

    if (rank == root) {
        for (index = 0; index < comm_size && ret == MPI_SUCCESS; index++) {
            if (index == root)
                continue;
#if TB_LARGE_COUNT
            if (large) {
                MPI_TABLE_QUERY(_MPI_Send_c, &f, (*(VECTOR_GET(v, i))).table);
                ret = EXEC_FUNC(f, i, _MPI_Send_c, v, (const void *)buffer, count, datatype, index, 0, duplicate);
                continue;
            }
#endif
            MPI_TABLE_QUERY(_MPI_Send, &f, (*(VECTOR_GET(v, i))).table);
            ret = EXEC_FUNC(f, i, _MPI_Send, v, (const void *)buffer, (int)count, datatype, index, 0, duplicate);
        }
        return ret;
    }
#if TB_LARGE_COUNT
    if (large) {
        MPI_TABLE_QUERY(_MPI_Recv_c, &f, (*(VECTOR_GET(v, i))).table);
        return EXEC_FUNC(f, i, _MPI_Recv_c, v, buffer, count, datatype, root, 0, duplicate, MPI_STATUS_IGNORE);
    }
#endif
    (void)large;
    MPI_TABLE_QUERY(_MPI_Recv, &f, (*(VECTOR_GET(v, i))).table);
    return EXEC_FUNC(f, i, _MPI_Recv, v, buffer, (int)count, datatype, root, 0, duplicate, MPI_STATUS_IGNORE);
}

_EXTERN_C_ int TB_Bcast(void *buffer, int count, MPI_Datatype datatype, int root, MPI_Comm comm, int i, vector *v)
{
    int ret = TB_NOT_REPLACED;
    if (tb_replaces(buffer, count, datatype, comm))
        ret = tb_bcast(buffer, count, datatype, root, comm, 0, i, v);
    return ret != TB_NOT_REPLACED ? ret : QMPI_Next_Bcast(buffer, count, datatype, root, comm, i, v);
}

#if TB_LARGE_COUNT
/* MPI_Bcast_c (MPI 4): what mpi4py calls wherever the MPI has it. */
_EXTERN_C_ int TB_Bcast_c(void *buffer, MPI_Count count, MPI_Datatype datatype, int root, MPI_Comm comm, int i,
                          vector *v)
{
    int ret = TB_NOT_REPLACED;
    if (tb_replaces(buffer, count, datatype, comm))
        ret = tb_bcast(buffer, count, datatype, root, comm, 1, i, v);
    return ret != TB_NOT_REPLACED ? ret : QMPI_Next_Bcast_c(buffer, count, datatype, root, comm, i, v);
}
#endif

_EXTERN_C_ char *get_interceptions(int i)
{
#if TB_LARGE_COUNT
    if (i == _MPI_Bcast_c)
        return "TB_Bcast_c";
#endif
    return i == _MPI_Bcast ? "TB_Bcast" : "NULL";
}
