/* A thesis-style layer that only passes MPI_Comm_rank on, with the typed next call.
 * COMPILE: mpicc -shared -fPIC -O2 -I<core> typed_layer.c -o libtyped_layer.so */
#include "qmpi.h"

int L_Comm_rank(MPI_Comm comm, int *rank, int i, vector *v)
{
    return QMPI_Next_Comm_rank(comm, rank, i, v);
}

char *get_interceptions(int i)
{
    return i == _MPI_Comm_rank ? (char *)"L_Comm_rank" : NULL;
}
