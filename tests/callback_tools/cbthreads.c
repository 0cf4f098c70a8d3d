/* A callback tool that supports MPI_THREAD_FUNNELED at most and says so from its init
 * function with QMPI_Set_thread_level (tests/test_thread_limit.py). It intercepts
 * MPI_Init_thread to see the level the application asked for and the one provided:
 *   cbthreads rank <r>: required <n> provided <m>
 * Build: mpicc -shared -fPIC -Wall -Wextra -Werror -include qmpi.h cbthreads.c -o libcbthreads.so */
#include <mpi.h>
#include <stdio.h>

static int cb_Init_thread(QMPI_Context context, int tool_id, int *argc, char ***argv, int required, int *provided)
{
    QMPI_Init_thread_t *next = NULL;
    int next_id = 0, rc, rank = -1;

    QMPI_Get_function(tool_id, MPI_INIT_THREAD_T, (void (**)(void))&next, &next_id);
    rc = next(context, next_id, argc, argv, required, provided);
    PMPI_Comm_rank(MPI_COMM_WORLD, &rank);
    printf("cbthreads rank %d: required %d provided %d\n", rank, required, *provided);
    fflush(stdout);
    return rc;
}

static void cbthreads_init(int tool_id)
{
    QMPI_Set_thread_level(tool_id, MPI_THREAD_FUNNELED);
    QMPI_Register_function(tool_id, MPI_INIT_THREAD_T, (void (*)(void))cb_Init_thread);
}

__attribute__((constructor)) static void cbthreads_register(void)
{
    QMPI_Register_tool_name("cbthreads", cbthreads_init);
}
