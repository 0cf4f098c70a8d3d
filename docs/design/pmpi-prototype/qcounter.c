/* qcounter.c - a native (QMPI-style, thesis-form) tool for the mini core: counts
 * calls per instance (per level) and continues with a typed call of the next cell. */
#include <stdio.h>
#include "miniqmpi.h"

static long counts[256][QM_NFUNCS];

#define W(N, P, A)                                                                  \
  int C_##N(QM_C P int level, vector *v)                                           \
  {                                                                                \
    const cell *c = &v->tables[level][QM_##N];                                     \
    __atomic_fetch_add(&counts[level][QM_##N], 1, __ATOMIC_RELAXED);               \
    return ((int (*)(QM_C P int, vector *))c->func_ptr)(QM_C A c->level, v);       \
  }
QM_FUNCS(W)
#undef W

/* what this tool intercepts (the real core: get_interceptions) */
void *qm_get_wrapper(int f)
{
#define G(N, P, A) if (f == QM_##N) return (void *)C_##N;
  QM_FUNCS(G)
#undef G
  return NULL;
}

void qm_report(int level, int rank)
{
  printf("[rank %d] qcounter level %d: Init %ld Comm_rank %ld Send %ld Recv %ld Barrier %ld\n", rank, level,
         counts[level][QM_Init] + counts[level][QM_Init_thread], counts[level][QM_Comm_rank], counts[level][QM_Send],
         counts[level][QM_Recv], counts[level][QM_Barrier]);
}
