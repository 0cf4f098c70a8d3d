/* ns per MPI_Comm_rank through whatever chain TOOLS builds: the best of 61 short timed
 * loops (short, so that on a loaded machine some run without being preempted).
 * COMPILE: mpicc -O2 rank_loop.c -o rank_loop -L<core> -lqmpi -Wl,-rpath,<core>
 * RUN:     TOOLS=... mpiexec -n 1 ./rank_loop [calls]   (bench_pmpi.py) */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e9 + (double)t.tv_nsec;
}

int main(int argc, char **argv)
{
    long calls = argc > 1 ? atol(argv[1]) : 200000, i;
    double best = 1e300;
    int rank = 0, round;

    MPI_Init(&argc, &argv);
    for (i = 0; i < calls * 4; i++) /* warm up */
        MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    for (round = 0; round < 61; round++) {
        double start = now_ns(), ns;
        for (i = 0; i < calls; i++)
            MPI_Comm_rank(MPI_COMM_WORLD, &rank);
        ns = (now_ns() - start) / (double)calls;
        if (ns < best)
            best = ns;
    }
    printf("ns_per_call %.3f\n", best);
    MPI_Finalize();
    return 0;
}
