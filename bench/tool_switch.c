/* tool_switch.c: the switching row of `make bench`: an empty thesis-style tool
 * whose MPI_Comm_rank wrapper continues the call at the top of the stack named by its
 * argument `stack` (QMPI_Stack_Comm_rank), or, without that argument, on its own next
 * link (QMPI_Next_Comm_rank). Both paths load the argument's handle from a static and
 * test it, so the two rows differ by the switch alone.
 *
 *   [stack default]        [stack default]
 *   instances = sw         instances = sw, t
 *   [stack other]          [sw] tool = ./libqbswitch.so
 *   instances = t          [t]  tool = ./libqbtyped.so
 *   [sw] tool = ./libqbswitch.so, stack = other
 *
 * Build: mpicc -O2 -shared -fPIC -Wall -Wextra -Werror -I<core> tool_switch.c -o libqbswitch.so */
#include "qmpi.h"

#include <stdio.h>

/* The switch target: 0 before the first call, then 1 + the stack's handle, or -1 for
 * "no stack argument: the next link". One instance per process in this bench. */
static int target;

static int resolve(int level, vector *v)
{
    const char *name = QMPI_Get_argument(v, level, "stack");
    int stack = name != NULL ? QMPI_Stack_lookup(name) : -1;

    if (name != NULL && stack < 0)
        QMPI_Argument_error(v, level, "stack", "no stack of that name");
    return name != NULL ? stack + 1 : -1;
}

_EXTERN_C_ int QBS_Comm_rank(MPI_Comm comm, int *rank, int i, vector *v)
{
    int to = target;

    if (__builtin_expect(to == 0, 0))
        target = to = resolve(i, v);
    if (to > 0)
        return QMPI_Stack_Comm_rank(comm, rank, to - 1, v);
    return QMPI_Next_Comm_rank(comm, rank, i, v);
}

_EXTERN_C_ char *get_interceptions(int i)
{
    return i == _MPI_Comm_rank ? "QBS_Comm_rank" : NULL;
}
