/* A sessions-only program (MPI 4): it never calls MPI_Init, so MPI_COMM_WORLD is not
 * there to ask for a rank. It builds a communicator from the mpi://WORLD process set,
 * broadcasts over it, and prints its rank in it. With the argument `twice`, all of it
 * again after the first MPI_Session_finalize (a new session: MPI 4 allows it).
 *
 * QMPIGEN: qmpigen build-core --mpi-header auto -o core && make -C core
 * COMPILE: mpicc sessions_world.c -o sessions_world -Lcore -lqmpi -Wl,-rpath,core
 * RUN:     TOOLS=libcounter.so:libprofiler.so mpiexec -n 2 ./sessions_world
 *          (tests/test_sample_tools.py: each rank's reports carry its own rank) */
#include <mpi.h>
#include <stdio.h>
#include <string.h>

static int one_session(void)
{
    MPI_Session session;
    MPI_Group world;
    MPI_Comm comm;
    int rank = -1, size = 0, data = 0;

    if (MPI_Session_init(MPI_INFO_NULL, MPI_ERRORS_RETURN, &session) != MPI_SUCCESS ||
        MPI_Group_from_session_pset(session, "mpi://WORLD", &world) != MPI_SUCCESS ||
        MPI_Comm_create_from_group(world, "qmpigen.sessions_world", MPI_INFO_NULL, MPI_ERRORS_RETURN, &comm) !=
            MPI_SUCCESS) {
        fprintf(stderr, "sessions_world: cannot set up a communicator from mpi://WORLD\n");
        return 1;
    }
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    if (rank == 0)
        data = 42;
    MPI_Bcast(&data, 1, MPI_INT, 0, comm);
    printf("app rank %d of %d: data %d\n", rank, size, data);
    fflush(stdout);
    MPI_Comm_free(&comm);
    MPI_Group_free(&world);
    MPI_Session_finalize(&session);
    return 0;
}

int main(int argc, char **argv)
{
    int twice = argc > 1 && strcmp(argv[1], "twice") == 0;
    if (one_session() != 0)
        return 1;
    return twice ? one_session() : 0;
}
