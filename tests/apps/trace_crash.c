/* A rank that dies without MPI_Finalize (tests/test_trace.py): MPI_Init, then
 * argv[1] MPI_Barrier calls on MPI_COMM_WORLD, a few milliseconds apart now and then,
 * then SIGKILL. Under the trace tool with QMPI_TRACE_FLUSH=record every Barrier is in
 * the rank file; with the default (a buffer written when full) none is.
 * COMPILE: mpicc trace_crash.c -o trace_crash -lqmpi   RUN: mpiexec -n 1 ./trace_crash 100 */
#include <mpi.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

int main(int argc, char **argv)
{
    int i, n = argc > 1 ? atoi(argv[1]) : 100;
    MPI_Init(&argc, &argv);
    for (i = 0; i < n; i++) {
        MPI_Barrier(MPI_COMM_WORLD);
        if (i % 25 == 0)
            usleep(3000); /* the trace tool pairs ticks with ns at flushes 1 ms apart */
    }
    printf("barriers %d\n", n);
    fflush(stdout);
    raise(SIGKILL);
    return 1;
}
