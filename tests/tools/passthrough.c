/* A silent pass-through for the calls of demo_app: stacked 1,000 times. */
#include "qmpi.h"

_EXTERN_C_ int E_Init(int *argc, char ***argv, int i, vector *v) { return QMPI_Next_Init(argc, argv, i, v); }
_EXTERN_C_ int E_Comm_rank(MPI_Comm comm, int *rank, int i, vector *v) { return QMPI_Next_Comm_rank(comm, rank, i, v); }
_EXTERN_C_ int E_Bcast(void *buffer, int count, MPI_Datatype datatype, int root, MPI_Comm comm, int i, vector *v)
{
    return QMPI_Next_Bcast(buffer, count, datatype, root, comm, i, v);
}
_EXTERN_C_ int E_Barrier(MPI_Comm comm, int i, vector *v) { return QMPI_Next_Barrier(comm, i, v); }
_EXTERN_C_ double E_Wtime(int i, vector *v) { return QMPI_Next_Wtime(i, v); }
_EXTERN_C_ int E_Finalize(int i, vector *v) { return QMPI_Next_Finalize(i, v); }

_EXTERN_C_ char *get_interceptions(int i)
{
    switch (i) {
    case _MPI_Init: return "E_Init";
    case _MPI_Comm_rank: return "E_Comm_rank";
    case _MPI_Bcast: return "E_Bcast";
    case _MPI_Barrier: return "E_Barrier";
    case _MPI_Wtime: return "E_Wtime";
    case _MPI_Finalize: return "E_Finalize";
    default: return NULL;
    }
}
