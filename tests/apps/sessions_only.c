/* A program in the Sessions model only (MPI 4): no MPI_Init, so no MPI_COMM_WORLD.
 * With QMPI_VERBOSE=1 the core prints the chain once, from the process with rank 0 in
 * the mpi://WORLD process set (tests/test_verbose_chain.py).
 *
 * QMPIGEN: qmpigen build-core --mpi-header auto -o core && make -C core
 * COMPILE: mpicc sessions_only.c -o sessions_only -Lcore -lqmpi -Wl,-rpath,core
 * RUN:     QMPI_VERBOSE=1 mpiexec -n 3 ./sessions_only */
#include <mpi.h>
#include <stdio.h>

int main(void)
{
    MPI_Session session;

    if (MPI_Session_init(MPI_INFO_NULL, MPI_ERRORS_RETURN, &session) != MPI_SUCCESS) {
        fprintf(stderr, "sessions_only: MPI_Session_init failed\n");
        return 1;
    }
    printf("sessions_only: initialised\n");
    return MPI_Session_finalize(&session) == MPI_SUCCESS ? 0 : 1;
}
