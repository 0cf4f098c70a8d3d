/* A callback tool that switches stacks (qmpigen's QMPI_Get_stack_function): MPI_Bcast,
 * MPI_Allreduce and MPI_Barrier on a communicator of fewer than `threshold` ranks
 * continue at the top of the stack named by its argument `stack` (QMPI_CONF); the rest
 * go to its next link. The callback-interface twin of sample_tools/switch.qmpi.
 *
 * Build: mpicc -shared -fPIC -Wall -Wextra -Werror -include qmpi.h cbswitch.c -o libcbswitch.so
 * Run:   QMPI_CONF=stacks.conf LD_PRELOAD=libqmpi.so:libcbswitch.so mpiexec -n 4 ./app
 *        ([cbswitch] tool = @cbswitch, threshold = 4, stack = heavy) */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

/* One switch per process in the tests: the stack's handle (-1 until resolved) and the
 * threshold, resolved at the first call, when the stacks exist. */
static int target_stack = -1;
static long threshold;

static void resolve(int tool_id)
{
    const char *name = QMPI_Get_tool_argument(tool_id, "stack");
    const char *limit = QMPI_Get_tool_argument(tool_id, "threshold");
    char *end = NULL;

    threshold = limit != NULL ? strtol(limit, &end, 0) : 2;
    if (limit != NULL && (*limit == '\0' || *end != '\0'))
        QMPI_Tool_argument_error(tool_id, "threshold", "not a whole number");
    if (name == NULL)
        QMPI_Tool_argument_error(tool_id, "stack", "the switch needs 'stack = NAME' in its section");
    /* An unknown name is passed on as -1: QMPI_Get_stack_function stops the job. */
    __atomic_store_n(&target_stack, QMPI_Stack_lookup(name), __ATOMIC_RELEASE);
}

/* The next function for `function_enum`: the other stack's top when `comm` is small. */
static void next_link(int tool_id, MPI_Comm comm, int function_enum, void (**fn)(void), int *next_id)
{
    static int resolved;
    int size = 0;

    if (!__atomic_load_n(&resolved, __ATOMIC_ACQUIRE)) {
        resolve(tool_id);
        __atomic_store_n(&resolved, 1, __ATOMIC_RELEASE);
    }
    if (PMPI_Comm_size(comm, &size) == MPI_SUCCESS && size < threshold)
        QMPI_Get_stack_function(tool_id, __atomic_load_n(&target_stack, __ATOMIC_ACQUIRE), function_enum, fn, next_id);
    else
        QMPI_Get_function(tool_id, function_enum, fn, next_id);
}

static int cb_Bcast(QMPI_Context context, int tool_id, void *buffer, int count, MPI_Datatype datatype, int root,
                    MPI_Comm comm)
{
    QMPI_Bcast_t *next;
    int next_id;
    next_link(tool_id, comm, MPI_BCAST_T, (void (**)(void))&next, &next_id);
    return next(context, next_id, buffer, count, datatype, root, comm);
}

static int cb_Allreduce(QMPI_Context context, int tool_id, const void *sendbuf, void *recvbuf, int count,
                        MPI_Datatype datatype, MPI_Op op, MPI_Comm comm)
{
    QMPI_Allreduce_t *next;
    int next_id;
    next_link(tool_id, comm, MPI_ALLREDUCE_T, (void (**)(void))&next, &next_id);
    return next(context, next_id, sendbuf, recvbuf, count, datatype, op, comm);
}

static int cb_Barrier(QMPI_Context context, int tool_id, MPI_Comm comm)
{
    QMPI_Barrier_t *next;
    int next_id;
    next_link(tool_id, comm, MPI_BARRIER_T, (void (**)(void))&next, &next_id);
    return next(context, next_id, comm);
}

static void cbswitch_init(int tool_id)
{
    QMPI_Register_function(tool_id, MPI_BCAST_T, (void (*)(void))cb_Bcast);
    QMPI_Register_function(tool_id, MPI_ALLREDUCE_T, (void (*)(void))cb_Allreduce);
    QMPI_Register_function(tool_id, MPI_BARRIER_T, (void (*)(void))cb_Barrier);
}

__attribute__((constructor)) static void cbswitch_register(void)
{
    QMPI_Register_tool_name("cbswitch", cbswitch_init);
}
