/* The application of `make bench`'s instruction rows (bench/trace_instructions.py): one
 * MPI call of a parameter-role mix, N times in a loop, as trace_bench.py's rows time it:
 * p2p MPI_Iprobe with no message, collective MPI_Allreduce of 1 int on MPI_COMM_SELF,
 * io MPI_File_write_at of 8 bytes at offset 0 (FILE, opened on MPI_COMM_SELF).
 * Run under callgrind twice with different N: the difference in a library's instructions,
 * over the difference in N, is what one call costs in it, start-up and finalize excluded.
 * COMPILE: mpicc trace_calls.c -o trace_calls -lqmpi
 * RUN:     TOOLS=libqbtrace.so valgrind --tool=callgrind ./trace_calls 2200 p2p run/io.dat */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv)
{
    long i, n = argc > 2 ? atol(argv[1]) : -1;
    const char *mix = argc > 2 ? argv[2] : "";
    int flag, x = 1, y;
    MPI_File fh;
    if (n < 0 || (strcmp(mix, "p2p") != 0 && strcmp(mix, "collective") != 0 && strcmp(mix, "io") != 0) ||
        (strcmp(mix, "io") == 0 && argc < 4)) {
        fprintf(stderr, "usage: trace_calls N p2p|collective|io [FILE]\n");
        return 2;
    }
    MPI_Init(&argc, &argv);
    if (strcmp(mix, "p2p") == 0)
        for (i = 0; i < n; i++)
            MPI_Iprobe(MPI_ANY_SOURCE, 7, MPI_COMM_WORLD, &flag, MPI_STATUS_IGNORE);
    else if (strcmp(mix, "collective") == 0)
        for (i = 0; i < n; i++)
            MPI_Allreduce(&x, &y, 1, MPI_INT, MPI_SUM, MPI_COMM_SELF);
    else {
        MPI_File_open(MPI_COMM_SELF, argv[3], MPI_MODE_CREATE | MPI_MODE_RDWR, MPI_INFO_NULL, &fh);
        for (i = 0; i < n; i++)
            MPI_File_write_at(fh, 0, &x, 8, MPI_BYTE, MPI_STATUS_IGNORE);
        MPI_File_close(&fh);
    }
    MPI_Finalize();
    return 0;
}
