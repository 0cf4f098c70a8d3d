/* coexist_app: an application that knows nothing of QMPI or of the tools around it, with
 * calls of every kind the binding-style tools count (tests/pmpi_tools/styletool.c): init,
 * MPI-IO on a shared file (COEXIST_WRITES blocks of 512 bytes per rank, read back), a
 * broadcast, an allreduce, and a message from rank 0 to rank 1. One line per rank:
 *
 *   coexist rank <r> of <n>: sum <n*(n-1)/2> read_ok 1
 *
 * COMPILE: mpicc -O2 coexist_app.c -o coexist_app [-L<core> -lqmpi -Wl,-rpath,<core>]
 * RUN:     mpiexec -n 2 ./coexist_app <file> (tests/test_coexist.py) */
#include <mpi.h>
#include <stdio.h>
#include <string.h>

#define COEXIST_WRITES 8
#define BLOCK 512

int main(int argc, char **argv)
{
    char block[BLOCK], back[BLOCK];
    int rank, size, k, value, sum = 0, read_ok = 1;
    MPI_File fh;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_File_open(MPI_COMM_WORLD, argc > 1 ? argv[1] : "coexist.dat", MPI_MODE_CREATE | MPI_MODE_RDWR,
                  MPI_INFO_NULL, &fh);
    for (k = 0; k < COEXIST_WRITES; k++) {
        MPI_Offset at = ((MPI_Offset)rank * COEXIST_WRITES + k) * BLOCK;
        memset(block, 'a' + (rank + k) % 26, sizeof block);
        MPI_File_write_at(fh, at, block, BLOCK, MPI_CHAR, MPI_STATUS_IGNORE);
        MPI_File_read_at(fh, at, back, BLOCK, MPI_CHAR, MPI_STATUS_IGNORE);
        read_ok &= memcmp(block, back, sizeof block) == 0;
    }
    MPI_File_close(&fh);
    value = rank;
    MPI_Bcast(&value, 1, MPI_INT, 0, MPI_COMM_WORLD);
    value = rank;
    MPI_Allreduce(&value, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (size > 1 && rank == 0)
        MPI_Send(&sum, 1, MPI_INT, 1, 7, MPI_COMM_WORLD);
    else if (size > 1 && rank == 1)
        MPI_Recv(&value, 1, MPI_INT, 0, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    printf("coexist rank %d of %d: sum %d read_ok %d\n", rank, size, sum, read_ok);
    fflush(stdout);
    MPI_Finalize();
    return 0;
}
