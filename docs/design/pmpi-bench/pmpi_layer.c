/* A PMPI tool that only passes MPI_Comm_rank on, as any PMPI tool would.
 * COMPILE: mpicc -shared -fPIC -O2 pmpi_layer.c -o libpmpi_layer.so */
#include <mpi.h>

int MPI_Comm_rank(MPI_Comm comm, int *rank)
{
    return PMPI_Comm_rank(comm, rank);
}
