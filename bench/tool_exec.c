/* tool_exec.c: an empty thesis-style tool written the thesis's convenient way
 * (listing 3.12): look the next link up with QMPI_TABLE_QUERY, call it with EXEC_FUNC
 * (variadic: the core unpacks the arguments again for every layer). */
#include "qmpi.h"

_EXTERN_C_ int QB_Comm_rank(MPI_Comm comm, int *rank, int i, vector *v)
{
    void *f = NULL;
    QMPI_TABLE_QUERY(_MPI_Comm_rank, &f, (*VECTOR_GET(v, i)).table);
    return EXEC_FUNC(f, i, _MPI_Comm_rank, v, comm, rank);
}

_EXTERN_C_ char *get_interceptions(int i)
{
    return i == _MPI_Comm_rank ? "QB_Comm_rank" : NULL;
}
