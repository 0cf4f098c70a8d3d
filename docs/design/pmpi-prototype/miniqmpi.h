/* miniqmpi.h - a stand-in for the real core's qmpi.h: a hole-free table of cells per
 * level, thesis-form wrappers (args..., int level, vector *v), typed "next" calls.
 * Only the handful of functions the prototype needs (the real core: all 700). */
#ifndef MINIQMPI_H
#define MINIQMPI_H
#include <mpi.h>

typedef struct { void *func_ptr; int level; } cell;
typedef struct { cell **tables; } vector;

/* X(Name, (parameters), (arguments)); an empty list is () */
#define QM_FUNCS(X) \
  X(Init, (int *argc, char ***argv), (argc, argv)) \
  X(Init_thread, (int *argc, char ***argv, int required, int *provided), (argc, argv, required, provided)) \
  X(Finalize, (), ()) \
  X(Comm_rank, (MPI_Comm comm, int *rank), (comm, rank)) \
  X(Comm_size, (MPI_Comm comm, int *size), (comm, size)) \
  X(Send, (const void *buf, int count, MPI_Datatype dt, int dest, int tag, MPI_Comm comm), (buf, count, dt, dest, tag, comm)) \
  X(Recv, (void *buf, int count, MPI_Datatype dt, int src, int tag, MPI_Comm comm, MPI_Status *st), (buf, count, dt, src, tag, comm, st)) \
  X(Barrier, (MPI_Comm comm), (comm))

#define QM_U(...) __VA_ARGS__                 /* (a, b) -> a, b   */
#define QM_C(...) __VA_ARGS__ __VA_OPT__(,)   /* (a, b) -> a, b,  () -> nothing */

#define QM_ENUM(N, P, A) QM_##N,
enum { QM_FUNCS(QM_ENUM) QM_NFUNCS };
#undef QM_ENUM


#endif
