/* The bottom of a chain for MPI_Wtime: answers 1/3 + 10^6 itself, a double whose
 * low bits a conversion to int (the thesis's exec_func) would lose. */
#include "qmpi.h"

_EXTERN_C_ double F_Wtime(int i, vector *v)
{
    (void)i;
    (void)v;
    return 1.0 / 3.0 + 1e6;
}

_EXTERN_C_ char *get_interceptions(int i) { return i == _MPI_Wtime ? "F_Wtime" : NULL; }
