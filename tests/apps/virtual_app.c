/* The application of tests/test_virtual.py: it must see only its own ranks as
 * MPI_COMM_WORLD when sample_tools/virtual.qmpi reserves some for itself. argv[1] is the
 * world size it expects. It checks sizes and ranks, a ring of Send/Recv whose statuses
 * (MPI_SOURCE) must be world ranks of its own world, an MPI_ANY_SOURCE receive, Bcast,
 * Allreduce, Gather, the group of MPI_COMM_WORLD and MPI_Comm_compare. A failed check
 * prints "FAIL <what> rank <r>" and aborts; rank 0 prints "RESULT virtual size=<n>
 * sum=<s>" and every rank "RANK <r> ok".
 * COMPILE: mpicc virtual_app.c -o virtual_app -lqmpi   RUN: mpiexec -n 4 ./virtual_app 3 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

static int rank = -1;

static void check(int ok, const char *what)
{
    if (!ok) {
        printf("FAIL %s rank %d\n", what, rank);
        fflush(stdout);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
}

int main(int argc, char **argv)
{
    int size, expect = argc > 1 ? atoi(argv[1]) : -1, next, prev, got = -1, sum = 0, root_value = 0, result;
    int gathered[64], group_size = -1, i;
    MPI_Status status;
    MPI_Group group;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    check(size == expect && size <= 64, "world_size");
    check(rank >= 0 && rank < size, "world_rank");
    next = (rank + 1) % size;
    prev = (rank + size - 1) % size;

    /* A ring: even ranks send first; the status names the sender in this world. */
    if (rank % 2 == 0)
        MPI_Send(&rank, 1, MPI_INT, next, 11, MPI_COMM_WORLD);
    MPI_Recv(&got, 1, MPI_INT, prev, 11, MPI_COMM_WORLD, &status);
    if (rank % 2 != 0)
        MPI_Send(&rank, 1, MPI_INT, next, 11, MPI_COMM_WORLD);
    check(got == prev && status.MPI_SOURCE == prev && status.MPI_TAG == 11, "ring");

    /* Rank 0 hears from everybody else, in any order: sources are this world's ranks. */
    if (rank == 0) {
        int seen = 0;
        for (i = 1; i < size; i++) {
            MPI_Recv(&got, 1, MPI_INT, MPI_ANY_SOURCE, 12, MPI_COMM_WORLD, &status);
            check(got == status.MPI_SOURCE && got >= 1 && got < size, "any_source");
            seen |= 1 << got;
        }
        check(seen == (1 << size) - 2, "any_source_all");
    } else {
        MPI_Send(&rank, 1, MPI_INT, 0, 12, MPI_COMM_WORLD);
    }

    if (rank == 0)
        root_value = 4242;
    MPI_Bcast(&root_value, 1, MPI_INT, 0, MPI_COMM_WORLD);
    check(root_value == 4242, "bcast");
    MPI_Allreduce(&rank, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    check(sum == size * (size - 1) / 2, "allreduce");
    MPI_Gather(&rank, 1, MPI_INT, gathered, 1, MPI_INT, 0, MPI_COMM_WORLD);
    for (i = 0; rank == 0 && i < size; i++)
        check(gathered[i] == i, "gather");

    MPI_Comm_group(MPI_COMM_WORLD, &group);
    MPI_Group_size(group, &group_size);
    check(group_size == size, "group_size");
    MPI_Group_free(&group);
    MPI_Comm_compare(MPI_COMM_WORLD, MPI_COMM_WORLD, &result);
    check(result == MPI_IDENT, "compare");

    if (rank == 0)
        printf("RESULT virtual size=%d sum=%d\n", size, sum);
    printf("RANK %d ok\n", rank);
    fflush(stdout);
    MPI_Finalize();
    return 0;
}
