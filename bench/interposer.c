/* interposer.c: the minimal hand-written PMPI interposer, the floor of any PMPI-based
 * layer: MPI_Comm_rank forwards to PMPI_Comm_rank and does nothing else. `make bench`
 * builds it like the core (-O2 -fPIC), once with -fno-plt (libqbinterp.so: the call
 * to PMPI goes through the GOT, as in the core) and once without (libqbinterpplt.so:
 * through a PLT stub), and links bench_rank with each. */
#include <mpi.h>

int MPI_Comm_rank(MPI_Comm comm, int *rank)
{
    return PMPI_Comm_rank(comm, rank);
}
