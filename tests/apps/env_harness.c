/* The harness of tests/test_env_fuzz.py: whatever TOOLS, QMPI_TOOL_LIST and
 * MPIR_CVAR_QMPI_TOOL_LIST hold, the core either builds the chain or stops with one
 * `qmpi: error:` line. It registers two callback tools from a constructor: "fuzzcb"
 * and one whose name is as long as a name may be (QMPI_MAX_TOOL_NAME_LENGTH - 1 'n's).
 * Their instances count themselves, so a run that succeeds says how many callback
 * levels the chain has: "env harness: ok, <n> callback instances, <b> barriers".
 *
 * Build: mpicc -O2 -Wall [-D_GNU_SOURCE -include qmpi.h] env_harness.c -o env_harness -Lcore -lqmpi
 *        (on an MPI whose mpi.h lacks the callback interface, qmpi.h declares it)
 * Run:   TOOLS=... QMPI_TOOL_LIST=... ./env_harness   (a singleton; mpiexec -n 1 also works) */
#include <mpi.h>
#include <stdio.h>
#include <string.h>

static int instances, barriers;

static int fuzzcb_Barrier(QMPI_Context context, int tool_id, MPI_Comm comm)
{
    QMPI_Barrier_t *next;
    int next_id;

    barriers++;
    QMPI_Get_function(tool_id, MPI_BARRIER_T, (void (**)(void))&next, &next_id);
    return next(context, next_id, comm);
}

static void fuzzcb_init(int tool_id)
{
    instances++;
    QMPI_Register_function(tool_id, MPI_BARRIER_T, (void (*)(void))fuzzcb_Barrier);
}

__attribute__((constructor)) static void fuzzcb_register(void)
{
    char longest[QMPI_MAX_TOOL_NAME_LENGTH];

    memset(longest, 'n', sizeof longest - 1);
    longest[sizeof longest - 1] = '\0';
    QMPI_Register_tool_name("fuzzcb", fuzzcb_init);
    QMPI_Register_tool_name(longest, fuzzcb_init);
}

int main(int argc, char **argv)
{
    int flag = -1;

    /* The first MPI call builds the chain: before MPI_Init, as an application may. */
    if (MPI_Initialized(&flag) != MPI_SUCCESS || flag != 0)
        return 2;
    MPI_Init(&argc, &argv);
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Finalize();
    printf("env harness: ok, %d callback instances, %d barriers\n", instances, barriers);
    return 0;
}
