/* stubs.c: what the runtime's MPI-free files need from the rest of the core, for unit
 * tests without MPI: stopping the job ends the test's process with CHECK_STOPPED, and
 * a few MPI function names are "the enumeration". */
#include "../../qmpigen/runtime/qmpi_runtime.h"

#include <string.h>
#include <unistd.h>

void qmpi_stop_job(void)
{
    _exit(86); /* CHECK_STOPPED */
}

static const char *const enumeration[] = {"MPI_Init", "MPI_Finalize", "MPI_Send", "MPI_Recv", "MPI_Comm_rank"};

int qmpi_function_index(const char *name)
{
    int i;

    for (i = 0; i < (int)(sizeof enumeration / sizeof *enumeration); i++)
        if (strcmp(name, enumeration[i]) == 0)
            return i;
    return -1;
}
