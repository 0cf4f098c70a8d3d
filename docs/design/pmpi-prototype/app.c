/* app.c - test application.
 *   app            ring Send/Recv, Barrier, Comm_rank (counts to check per tool)
 *   app threads    MPI_THREAD_MULTIPLE, 4 threads x 100000 MPI_Comm_rank + Comm_size
 *   app bench [N]  ns per MPI_Comm_rank (best of 7 runs of N calls)
 */
#include <mpi.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now(void)
{
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec * 1e-9;
}

#define NTHREADS 4
#define PER_THREAD 100000
static void *worker(void *arg)
{
  int i, r, s;
  (void)arg;
  for (i = 0; i < PER_THREAD; i++) {
    MPI_Comm_rank(MPI_COMM_WORLD, &r);
    MPI_Comm_size(MPI_COMM_WORLD, &s);
  }
  return NULL;
}

int main(int argc, char **argv)
{
  int rank, size, provided, i, token = 0;
  const char *mode = argc > 1 ? argv[1] : "test";

  if (strcmp(mode, "threads") == 0) {
    pthread_t t[NTHREADS];
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    for (i = 0; i < NTHREADS; i++)
      pthread_create(&t[i], NULL, worker, NULL);
    for (i = 0; i < NTHREADS; i++)
      pthread_join(t[i], NULL);
    if (rank == 0)
      printf("app: provided=%d, %d threads x %d Comm_rank: expect Comm_rank = %d + 2 per PMPI-tool instance's own call\n",
             provided, NTHREADS, PER_THREAD, NTHREADS * PER_THREAD + 1);
    MPI_Finalize();
    return 0;
  }
  if (strcmp(mode, "bench") == 0) {
    long n = argc > 2 ? atol(argv[2]) : 10000000, k;
    double best = 1e9;
    MPI_Init(&argc, &argv);
    for (i = 0; i < 7; i++) {
      double t0 = now();
      for (k = 0; k < n; k++)
        MPI_Comm_rank(MPI_COMM_WORLD, &rank);
      t0 = (now() - t0) / n * 1e9;
      if (t0 < best)
        best = t0;
    }
    if (rank == 0)
      printf("bench: %.2f ns per MPI_Comm_rank\n", best);
    MPI_Finalize();
    return 0;
  }
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (size > 1) {
    if (rank == 0) {
      MPI_Send(&token, 1, MPI_INT, 1, 0, MPI_COMM_WORLD);
      MPI_Recv(&token, 1, MPI_INT, size - 1, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    } else {
      MPI_Recv(&token, 1, MPI_INT, rank - 1, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      token++;
      MPI_Send(&token, 1, MPI_INT, (rank + 1) % size, 0, MPI_COMM_WORLD);
    }
  }
  MPI_Barrier(MPI_COMM_WORLD);
  if (rank == 0)
    printf("app: token %d after the ring; each rank: 1 Send, 1 Recv, 1 Barrier, 1 Comm_rank (+1 per PMPI-tool "
           "instance's own MPI_Comm_rank after Init)\n", token);
  fflush(stdout);
  MPI_Barrier(MPI_COMM_WORLD);
  MPI_Finalize();
  return 0;
}
