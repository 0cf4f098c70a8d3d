/* An unmodified PMPI tool for `make bench`: the shape every classic
 * PMPI tool has, MPI_X calling PMPI_X, built with plain mpicc -shared and no qmpi.h.
 * TOOLS=./p.so:./p.so:... stacks private copies of it (README: Unmodified PMPI tools). */
#include <mpi.h>

int MPI_Comm_rank(MPI_Comm comm, int *rank)
{
    return PMPI_Comm_rank(comm, rank);
}
