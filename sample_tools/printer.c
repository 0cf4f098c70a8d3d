/* printer: the thesis's T1 (listing 7.1), printing before and after each call it
 * intercepts, with its level, so a stack of printers shows the nested chain order.
 *
 * Build: mpicc -shared -fPIC -Wall -Wextra -Werror -I<core> printer.c -o libprinter.so
 * Run:   TOOLS=./libprinter.so:./libprinter.so mpiexec -n 2 ./app
 *
 * It mixes the thesis's three ways of calling the next link: QMPI_TABLE_QUERY +
 * EXEC_FUNC (listing 3.12), the typed call of listing 3.10, and QMPI_Next_<Name>. */
#include <mpi.h>
#include <stdio.h>
#include "qmpi.h"

static void say(const char *when, const char *what, int i)
{
    printf("printer@%d %s %s\n", i, when, what);
    fflush(stdout);
}

_EXTERN_C_ int T1_Init(int *argc, char ***argv, int i, vector *v)
{
    void *f = NULL;
    int ret;
    say("pre", "MPI_Init", i);
    QMPI_TABLE_QUERY(_MPI_Init, &f, (*VECTOR_GET(v, i)).table);
    ret = EXEC_FUNC(f, i, _MPI_Init, v, argc, argv);
    say("post", "MPI_Init", i);
    return ret;
}

_EXTERN_C_ int T1_Comm_rank(MPI_Comm comm, int *rank, int i, vector *v)
{
    typedef int (*comm_rank_func)(MPI_Comm comm, int *rank, int i, vector *v);
    void *f = NULL;
    int new_level, ret;
    say("pre", "MPI_Comm_rank", i);
    QMPI_TABLE_QUERY(_MPI_Comm_rank, &f, (*VECTOR_GET(v, i)).table);
    new_level = QMPI_Get_level(i, _MPI_Comm_rank, v);
    ret = ((comm_rank_func)f)(comm, rank, new_level, v);
    say("post", "MPI_Comm_rank", i);
    return ret;
}

_EXTERN_C_ int T1_Comm_size(MPI_Comm comm, int *size, int i, vector *v)
{
    int ret;
    say("pre", "MPI_Comm_size", i);
    ret = QMPI_Next_Comm_size(comm, size, i, v);
    say("post", "MPI_Comm_size", i);
    return ret;
}

_EXTERN_C_ int T1_Barrier(MPI_Comm comm, int i, vector *v)
{
    int ret;
    say("pre", "MPI_Barrier", i);
    ret = QMPI_Next_Barrier(comm, i, v);
    say("post", "MPI_Barrier", i);
    return ret;
}

_EXTERN_C_ int T1_Bcast(void *buffer, int count, MPI_Datatype datatype, int root, MPI_Comm comm, int i, vector *v)
{
    int ret;
    say("pre", "MPI_Bcast", i);
    ret = QMPI_Next_Bcast(buffer, count, datatype, root, comm, i, v);
    say("post", "MPI_Bcast", i);
    return ret;
}

_EXTERN_C_ double T1_Wtime(int i, vector *v)
{
    double t;
    say("pre", "MPI_Wtime", i);
    t = QMPI_Next_Wtime(i, v);
    say("post", "MPI_Wtime", i);
    return t;
}

_EXTERN_C_ int T1_Finalize(int i, vector *v)
{
    void *f = NULL;
    int ret;
    say("pre", "MPI_Finalize", i);
    QMPI_TABLE_QUERY(_MPI_Finalize, &f, (*VECTOR_GET(v, i)).table);
    ret = EXEC_FUNC(f, i, _MPI_Finalize, v);
    say("post", "MPI_Finalize", i);
    return ret;
}

/* MPI_Pcontrol: the core calls every tool's wrapper itself (thesis listing 3.11), so
 * this wrapper does not call a next link. The variadic tail arrives as a va_list. */
_EXTERN_C_ int T1_Pcontrol(const int level, int i, vector *v, va_list *args)
{
    (void)v;
    (void)args;
    printf("printer@%d MPI_Pcontrol level %d\n", i, level);
    fflush(stdout);
    return MPI_SUCCESS;
}

_EXTERN_C_ char *get_interceptions(int i)
{
    switch (i) {
    case _MPI_Init:
        return "T1_Init";
    case _MPI_Comm_rank:
        return "T1_Comm_rank";
    case _MPI_Comm_size:
        return "T1_Comm_size";
    case _MPI_Barrier:
        return "T1_Barrier";
    case _MPI_Bcast:
        return "T1_Bcast";
    case _MPI_Wtime:
        return "T1_Wtime";
    case _MPI_Finalize:
        return "T1_Finalize";
    case _MPI_Pcontrol:
        return "T1_Pcontrol";
    default:
        return "NULL";
    }
}
