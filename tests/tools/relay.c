/* Passes calls on with the thesis's exec_func / exec_func_r and says so:
 * MPI_Initialized and MPI_Finalized (also before MPI_Init and after MPI_Finalize),
 * MPI_Wtime (a double, through exec_func_r), MPI_Comm_size (typed call). */
#include <stdio.h>
#include "qmpi.h"

static void say(int i, const char *what)
{
    printf("relay@%d %s\n", i, what);
    fflush(stdout);
}

_EXTERN_C_ int R_Initialized(int *flag, int i, vector *v)
{
    void *f = NULL;
    say(i, "MPI_Initialized");
    QMPI_TABLE_QUERY(_MPI_Initialized, &f, VECTOR_GET(v, i)->table);
    return EXEC_FUNC(f, i, _MPI_Initialized, v, flag);
}

_EXTERN_C_ int R_Finalized(int *flag, int i, vector *v)
{
    void *f = NULL;
    say(i, "MPI_Finalized");
    QMPI_TABLE_QUERY(_MPI_Finalized, &f, VECTOR_GET(v, i)->table);
    return EXEC_FUNC(f, i, _MPI_Finalized, v, flag);
}

_EXTERN_C_ double R_Wtime(int i, vector *v)
{
    void *f = NULL;
    double t = 0.0;
    QMPI_TABLE_QUERY(_MPI_Wtime, &f, VECTOR_GET(v, i)->table);
    EXEC_FUNC_R(&t, f, i, _MPI_Wtime, v);
    return t;
}

_EXTERN_C_ int R_Comm_size(MPI_Comm comm, int *size, int i, vector *v)
{
    return QMPI_Next_Comm_size(comm, size, i, v);
}

_EXTERN_C_ char *get_interceptions(int i)
{
    switch (i) {
    case _MPI_Initialized: return "R_Initialized";
    case _MPI_Finalized: return "R_Finalized";
    case _MPI_Wtime: return "R_Wtime";
    case _MPI_Comm_size: return "R_Comm_size";
    default: return NULL;
    }
}
