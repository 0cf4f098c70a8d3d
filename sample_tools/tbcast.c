/* TBcast: MPI_Bcast reimplemented with MPI_Comm_rank, MPI_Comm_size, MPI_Send and
 * MPI_Recv called through its own function table (thesis section 3.3.2, listing
 * 3.13). Tools below it see those calls instead of MPI_Bcast (thesis 4.5.3).
 *
 * Build: mpicc -shared -fPIC -Wall -Wextra -Werror -I<core> tbcast.c -o libtbcast.so
 * Run:   TOOLS=./libcounter.so:./libtbcast.so:./libcounter.so mpiexec -n 3 ./app */
#include <mpi.h>
#include "qmpi.h"

_EXTERN_C_ int TB_Bcast(void *buffer, int count, MPI_Datatype datatype, int root, MPI_Comm comm, int i, vector *v)
{
    int ret = MPI_SUCCESS;
    void *f = NULL;
    int rank = 0, comm_size = 0, index;

    MPI_TABLE_QUERY(_MPI_Comm_rank, &f, (*(VECTOR_GET(v, i))).table);
    EXEC_FUNC(f, i, _MPI_Comm_rank, v, comm, &rank);
    MPI_TABLE_QUERY(_MPI_Comm_size, &f, (*(VECTOR_GET(v, i))).table);
    EXEC_FUNC(f, i, _MPI_Comm_size, v, comm, &comm_size);

    if (rank == root) {
        for (index = 0; index < comm_size && ret == MPI_SUCCESS; index++) {
            if (index != root) {
                MPI_TABLE_QUERY(_MPI_Send, &f, (*(VECTOR_GET(v, i))).table);
                ret = EXEC_FUNC(f, i, _MPI_Send, v, (const void *)buffer, count, datatype, index, 0, comm);
            }
        }
    } else {
        MPI_TABLE_QUERY(_MPI_Recv, &f, (*(VECTOR_GET(v, i))).table);
        ret = EXEC_FUNC(f, i, _MPI_Recv, v, buffer, count, datatype, root, 0, comm, MPI_STATUS_IGNORE);
    }
    return ret;
}

_EXTERN_C_ char *get_interceptions(int i)
{
    return i == _MPI_Bcast ? "TB_Bcast" : "NULL";
}
