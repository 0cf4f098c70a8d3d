/* Reads MPI_Pcontrol's variadic tail: level 5 carries an int and a string. */
#include <stdio.h>
#include "qmpi.h"

_EXTERN_C_ int P_Pcontrol(const int level, int i, vector *v, va_list *args)
{
    (void)v;
    if (level == 5) {
        int number = va_arg(*args, int);
        const char *text = va_arg(*args, const char *);
        printf("pcontrol@%d level %d args %d %s\n", i, level, number, text);
    } else {
        printf("pcontrol@%d level %d\n", i, level);
    }
    fflush(stdout);
    return MPI_SUCCESS;
}

_EXTERN_C_ char *get_interceptions(int i) { return i == _MPI_Pcontrol ? "P_Pcontrol" : NULL; }
