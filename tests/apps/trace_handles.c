/* More handles in turn than the trace tool's per-thread handle cache has slots
 * (tests/test_trace_records.py): TYPES contiguous datatypes of 1..TYPES ints, each sent
 * by MPI_Bcast on one of COMMS duplicates of MPI_COMM_SELF (type i on comm i % COMMS),
 * ROUNDS times over; before each round but the first, each of the first FREED types is
 * sent, freed, remade of (TYPES + round * FREED + i + 1) ints and sent again. It prints
 * "reused N": how many remade types got the handle of the type freed just before
 * (MPICH's do). Every Bcast's record must name its own datatype and communicator and
 * count its own bytes, whichever handles share a slot of the cache, are moved out of it
 * or died.
 *
 * COMPILE: mpicc trace_handles.c -o trace_handles -lqmpi
 * RUN:     TOOLS=./libtrace.so mpiexec -n 2 ./trace_handles */
#include <mpi.h>
#include <stdio.h>

#define TYPES 40
#define COMMS 4
#define ROUNDS 3
#define FREED 10

int main(int argc, char **argv)
{
    static int buffer[2 * TYPES];
    MPI_Datatype types[TYPES];
    MPI_Comm comms[COMMS];
    int i, round, reused = 0;
    MPI_Init(&argc, &argv);
    for (i = 0; i < COMMS; i++)
        MPI_Comm_dup(MPI_COMM_SELF, &comms[i]);
    for (i = 0; i < TYPES; i++) {
        MPI_Type_contiguous(i + 1, MPI_INT, &types[i]);
        MPI_Type_commit(&types[i]);
    }
    for (round = 0; round < ROUNDS; round++) {
        if (round > 0)
            for (i = 0; i < FREED; i++) { /* used, freed, remade and used again: its slot is warm */
                MPI_Datatype freed = types[i];
                MPI_Bcast(buffer, 1, types[i], 0, comms[i % COMMS]);
                MPI_Type_free(&types[i]);
                MPI_Type_contiguous(TYPES + round * FREED + i + 1, MPI_INT, &types[i]);
                reused += types[i] == freed;
                MPI_Type_commit(&types[i]);
                MPI_Bcast(buffer, 1, types[i], 0, comms[i % COMMS]);
            }
        for (i = 0; i < TYPES; i++)
            MPI_Bcast(buffer, 1, types[i], 0, comms[i % COMMS]);
    }
    printf("reused %d\n", reused);
    for (i = 0; i < TYPES; i++)
        MPI_Type_free(&types[i]);
    for (i = 0; i < COMMS; i++)
        MPI_Comm_free(&comms[i]);
    MPI_Finalize();
    return 0;
}
