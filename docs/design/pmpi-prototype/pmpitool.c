/* pmpitool.c - an unmodified, classic PMPI tool: defines MPI_X, calls PMPI_X, keeps its
 * state in globals, calls MPI_Comm_rank itself after PMPI_Init. No qmpi.h. Build:
 *   mpicc -shared -fPIC -O2 pmpitool.c -o libpmpitool.so
 */
#include <stdio.h>
#include <mpi.h>

static long n_init, n_rank, n_send, n_recv, n_barrier;   /* globals: one set per copy */
static int my_rank = -1;
static int pcontrol_seen;

static void after_init(void)
{
  /* its own MPI call: must enter the top of the chain (and be seen by every tool) */
  MPI_Comm_rank(MPI_COMM_WORLD, &my_rank);
}

int MPI_Init(int *argc, char ***argv)
{
  int rc = PMPI_Init(argc, argv);
  n_init++;
  after_init();
  return rc;
}

int MPI_Init_thread(int *argc, char ***argv, int required, int *provided)
{
  int rc = PMPI_Init_thread(argc, argv, required, provided);
  n_init++;
  after_init();
  return rc;
}

int MPI_Comm_rank(MPI_Comm comm, int *rank)
{
  __atomic_fetch_add(&n_rank, 1, __ATOMIC_RELAXED);
  return PMPI_Comm_rank(comm, rank);
}

int MPI_Send(const void *buf, int count, MPI_Datatype dt, int dest, int tag, MPI_Comm comm)
{
  __atomic_fetch_add(&n_send, 1, __ATOMIC_RELAXED);
  return PMPI_Send(buf, count, dt, dest, tag, comm);
}

int MPI_Recv(void *buf, int count, MPI_Datatype dt, int src, int tag, MPI_Comm comm, MPI_Status *st)
{
  __atomic_fetch_add(&n_recv, 1, __ATOMIC_RELAXED);
  return PMPI_Recv(buf, count, dt, src, tag, comm, st);
}

int MPI_Barrier(MPI_Comm comm)
{
  n_barrier++;
  return PMPI_Barrier(comm);
}

int MPI_Finalize(void)
{
  printf("[rank %d] pmpitool copy at %p: Init %ld Comm_rank %ld Send %ld Recv %ld Barrier %ld\n", my_rank,
         (void *)&n_rank, n_init, n_rank, n_send, n_recv, n_barrier);
  fflush(stdout);
  (void)pcontrol_seen;
  return PMPI_Finalize();
}
