/* MPI_Bcast calls a tool that replaces MPI_Bcast must get right (tests/test_sample_tools.py,
 * TBcast), at 2 or more ranks:
 *  inter:  over an intercommunicator between two halves of MPI_COMM_WORLD, each half
 *          broadcasting in turn (root = MPI_ROOT at its leader, MPI_PROC_NULL at the
 *          other ranks of its half, 0 in the remote half);
 *  tag:    on MPI_COMM_WORLD right after a point-to-point message of the same tag (0)
 *          between the same ranks, which the broadcast must not take;
 *  vector: with a derived datatype (every other int);
 *  zero:   with count 0;
 *  root:   with a root out of range, under MPI_ERRORS_RETURN: the MPI's MPI_ERR_ROOT;
 *  large:  MPI_Bcast_c (MPI 4) over the intercommunicator and after a message of the
 *          same tag (nothing on an older MPI).
 * Arguments name the cases to run; none: all of them. Prints "bcast_cases <rank>: ok"
 * per rank, or one line per wrong result and exits 1. */
#include <mpi.h>
#include <stdio.h>
#include <string.h>

static int rank, size, failures;

static void check(const char *what, int got, int expected)
{
    if (got != expected) {
        printf("bcast_cases %d: %s: got %d, expected %d\n", rank, what, got, expected);
        failures++;
    }
}

/* MPI_Bcast, or MPI_Bcast_c for the case "large". */
#if MPI_VERSION >= 4
static int large;
#endif
static int bcast(void *buffer, int count, MPI_Datatype datatype, int root, MPI_Comm comm)
{
#if MPI_VERSION >= 4
    if (large)
        return MPI_Bcast_c(buffer, count, datatype, root, comm);
#endif
    return MPI_Bcast(buffer, count, datatype, root, comm);
}

static void inter(void)
{
    int half = size / 2, low = rank < half, local_rank, data[4], k;
    MPI_Comm local, intercomm;

    MPI_Comm_split(MPI_COMM_WORLD, low, rank, &local);
    MPI_Comm_rank(local, &local_rank);
    MPI_Intercomm_create(local, 0, MPI_COMM_WORLD, low ? half : 0, 7, &intercomm);
    for (int from_low = 1; from_low >= 0; from_low--) {
        int sending = low == from_low, leader = sending && local_rank == 0;
        int root = !sending ? 0 : leader ? MPI_ROOT : MPI_PROC_NULL;
        for (k = 0; k < 4; k++)
            data[k] = leader ? 100 * from_low + k + 1 : -1;
        bcast(data, 4, MPI_INT, root, intercomm);
        /* The receivers get the data; the other senders' buffers stay as they were. */
        for (k = 0; k < 4; k++)
            check(from_low ? "intercomm bcast from the low half" : "intercomm bcast from the high half", data[k],
                  !sending || leader ? 100 * from_low + k + 1 : -1);
    }
    MPI_Comm_free(&intercomm);
    MPI_Comm_free(&local);
}

static void tag(void)
{
    int data = rank == 0 ? 42 : -1, message = rank == 0 ? 7 : -1;

    if (rank == 0)
        MPI_Send(&message, 1, MPI_INT, 1, 0, MPI_COMM_WORLD);
    bcast(&data, 1, MPI_INT, 0, MPI_COMM_WORLD);
    check("bcast after a message of the same tag", data, 42);
    if (rank == 1) {
        MPI_Recv(&message, 1, MPI_INT, 0, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        check("message received after the bcast", message, 7);
    }
}

static void vector(void)
{
    int strided[8], k;
    MPI_Datatype every_other;

    MPI_Type_vector(4, 1, 2, MPI_INT, &every_other);
    MPI_Type_commit(&every_other);
    for (k = 0; k < 8; k++)
        strided[k] = rank == size - 1 ? k : -1;
    MPI_Bcast(strided, 1, every_other, size - 1, MPI_COMM_WORLD);
    for (k = 0; k < 8; k++)
        check("bcast of a vector type", strided[k], k % 2 == 0 || rank == size - 1 ? k : -1);
    MPI_Type_free(&every_other);
}

static void zero(void)
{
    int data = rank;
    MPI_Bcast(&data, 0, MPI_INT, 0, MPI_COMM_WORLD);
    check("bcast of count 0", data, rank);
}

static void root(void)
{
    int data = 0, ret, error_class;
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    ret = MPI_Bcast(&data, 1, MPI_INT, size, MPI_COMM_WORLD);
    MPI_Error_class(ret, &error_class);
    check("error class of a bcast from root = size", error_class, MPI_ERR_ROOT);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL);
}

static void large_count(void)
{
#if MPI_VERSION >= 4
    large = 1;
    inter();
    tag();
    large = 0;
#endif
}

int main(int argc, char **argv)
{
    static const struct { const char *name; void (*run)(void); } cases[] = {
        {"inter", inter}, {"tag", tag}, {"vector", vector}, {"zero", zero}, {"root", root}, {"large", large_count},
    };

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        int run = argc <= 1;
        for (int a = 1; a < argc; a++)
            run |= strcmp(argv[a], cases[c].name) == 0;
        if (run)
            cases[c].run();
    }
    MPI_Barrier(MPI_COMM_WORLD);
    if (failures == 0)
        printf("bcast_cases %d: ok\n", rank);
    fflush(stdout);
    MPI_Finalize();
    return failures != 0;
}
