/* tool_frames.c: tool_typed's MPI_Comm_rank, but keeping its frame (work after the
 * next call, so no tail call): one stack frame per tool instance, as a real tool that
 * measures or logs after the call. Used to check deep chains on the default stack. */
#include "qmpi.h"

_EXTERN_C_ int QB_Comm_rank(MPI_Comm comm, int *rank, int i, vector *v)
{
    int rc = QMPI_Next_Comm_rank(comm, rank, i, v);
    __asm__ volatile("" : "+r"(rc)); /* stands for the tool's work after the call */
    return rc;
}

_EXTERN_C_ char *get_interceptions(int i)
{
    return i == _MPI_Comm_rank ? "QB_Comm_rank" : NULL;
}
