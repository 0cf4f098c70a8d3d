/* say.c: the trace tool's lines on stderr (say.h). */
#include "say.h"
#include <errno.h>
#include <stdio.h>

void trace_complain(struct instance *in, const char *what, const char *path)
{
    fprintf(stderr, "qmpi trace (level %d, rank %d): %s %s: %s; tracing stops for this instance\n", in->level, in->rank,
            what, path, strerror(errno));
    __atomic_store_n(&in->active, 0, __ATOMIC_RELEASE);
}
