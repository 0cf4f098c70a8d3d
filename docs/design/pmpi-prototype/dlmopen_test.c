/* dlmopen_test.c - candidate (b): load the PMPI tool into a new link-map namespace.
 * Shows what comes with it: a second libmpi (and libc) in that namespace; time; limit. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <link.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

static int count_cb(struct dl_phdr_info *info, size_t size, void *data)
{
  (void)size;
  if (strstr(info->dlpi_name, "libmpi.so")) ++*(int *)data;
  return 0;
}

int main(int argc, char **argv)
{
  int i, n = 0;
  for (i = 0; i < 20; i++) {
    struct timespec a, b;
    void *h;
    clock_gettime(CLOCK_MONOTONIC, &a);
    h = dlmopen(LM_ID_NEWLM, argc > 1 ? argv[1] : "./libpmpitool.so", RTLD_NOW | RTLD_LOCAL);
    clock_gettime(CLOCK_MONOTONIC, &b);
    if (!h) {
      printf("dlmopen #%d failed: %s\n", i + 1, dlerror());
      break;
    }
    n = 0;
    dl_iterate_phdr(count_cb, &n); /* sees only the base namespace... */
    {
      Lmid_t lm;
      struct link_map *m;
      int mpi = 0, libc = 0;
      dlinfo(h, RTLD_DI_LMID, &lm);
      dlinfo(h, RTLD_DI_LINKMAP, &m);
      while (m->l_prev) m = m->l_prev;
      for (; m; m = m->l_next) {
        mpi += strstr(m->l_name, "libmpi.so") != NULL;
        libc += strstr(m->l_name, "libc.so") != NULL;
      }
      printf("dlmopen #%d: namespace %ld, %.1f ms, that namespace holds %d libmpi and %d libc\n", i + 1, (long)lm,
             ((b.tv_sec - a.tv_sec) * 1e3 + (b.tv_nsec - a.tv_nsec) / 1e6), mpi, libc);
    }
  }
  return 0;
}
