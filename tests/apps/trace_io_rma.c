/* What a trace says happened (tests/test_trace_records.py): every rank writes 100 bytes
 * to its own file (argv[1].<rank>, opened on MPI_COMM_SELF), then reads 64 bytes at
 * offset 80 (20 come back: a short read at the end of the file) and 64 at offset 200
 * (none), and prints what MPI_Get_count said ("read 20 0"); then a lock epoch on each
 * other rank's window (MPI_Win_lock, MPI_Put, MPI_Win_unlock) and one on all
 * (MPI_Win_lock_all, MPI_Win_unlock_all).
 *
 * COMPILE: mpicc trace_io_rma.c -o trace_io_rma -lqmpi
 * RUN:     TOOLS=./libtrace.so mpiexec -n 2 ./trace_io_rma data */
#include <mpi.h>
#include <stdio.h>
#include <string.h>

static void short_reads(const char *base, int rank)
{
    char name[4096], data[100], in[64];
    MPI_File fh;
    MPI_Status status;
    int first = -1, second = -1;
    memset(data, 'x', sizeof data);
    snprintf(name, sizeof name, "%s.%d", base, rank);
    MPI_File_open(MPI_COMM_SELF, name, MPI_MODE_CREATE | MPI_MODE_RDWR, MPI_INFO_NULL, &fh);
    MPI_File_write_at(fh, 0, data, (int)sizeof data, MPI_CHAR, MPI_STATUS_IGNORE);
    MPI_File_read_at(fh, 80, in, (int)sizeof in, MPI_CHAR, &status);
    MPI_Get_count(&status, MPI_CHAR, &first);
    MPI_File_read_at(fh, 200, in, (int)sizeof in, MPI_CHAR, &status);
    MPI_Get_count(&status, MPI_CHAR, &second);
    MPI_File_close(&fh);
    printf("read %d %d %d\n", rank, first, second);
}

static void lock_epochs(int rank, int size)
{
    int window[4] = {0}, value = rank;
    MPI_Win win;
    MPI_Win_create(window, sizeof window, sizeof window[0], MPI_INFO_NULL, MPI_COMM_WORLD, &win);
    MPI_Win_lock(MPI_LOCK_SHARED, (rank + 1) % size, 0, win);
    MPI_Put(&value, 1, MPI_INT, (rank + 1) % size, 0, 1, MPI_INT, win);
    MPI_Win_unlock((rank + 1) % size, win);
    MPI_Win_lock_all(0, win);
    MPI_Win_unlock_all(win);
    MPI_Win_free(&win);
}

int main(int argc, char **argv)
{
    int rank, size;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    short_reads(argc > 1 ? argv[1] : "trace_io_rma.dat", rank);
    lock_epochs(rank, size);
    MPI_Finalize();
    return 0;
}
