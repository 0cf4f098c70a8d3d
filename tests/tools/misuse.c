/* After MPI_Init, on rank 1 only, asks exec_func for MPI_Wtime's double (which it
 * cannot return): the core must stop the whole job, not leave rank 0 in a barrier. */
#include "qmpi.h"

_EXTERN_C_ int M_Barrier(MPI_Comm comm, int i, vector *v)
{
    int rank = 0;
    QMPI_Next_Comm_rank(MPI_COMM_WORLD, &rank, i, v);
    if (rank == 1) {
        void *f = NULL;
        QMPI_TABLE_QUERY(_MPI_Wtime, &f, VECTOR_GET(v, i)->table);
        EXEC_FUNC(f, i, _MPI_Wtime, v);
    }
    return QMPI_Next_Barrier(comm, i, v);
}

_EXTERN_C_ char *get_interceptions(int i) { return i == _MPI_Barrier ? "M_Barrier" : NULL; }
