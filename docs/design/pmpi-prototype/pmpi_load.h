/* pmpi_load.h - load an unmodified PMPI tool as one level of the chain */
#ifndef PMPI_LOAD_H
#define PMPI_LOAD_H
#include <stddef.h>
#include <stdint.h>

enum qm_tool_kind { QM_NOT_A_TOOL, QM_NATIVE_TOOL, QM_PMPI_TOOL };

struct qm_pmpi_copy {
  void *handle;          /* dlopen handle of the private, patched copy */
  int memfd;             /* kept open: the copy's name /proc/<pid>/fd/<n> must stay unique */
  uintptr_t lo, hi;      /* where the copy is mapped (for the return-address fallback) */
  void **wrappers;       /* per function: the tool's MPI_X definition in this copy, or NULL */
  int renamed;           /* how many PMPI_ imports now read XMPI_ */
  int symbolic;          /* DT_SYMBOLIC/DF_SYMBOLIC or protected MPI_ definitions */
  double ms;             /* time to classify, copy, patch and dlopen */
};

/* name_to_index("Send") -> function index, or -1 if the core does not intercept it */
typedef int (*qm_index_fn)(const char *mpi_suffix);

/* What kind of tool is `path` (without loading it)?  On failure *why says why. */
enum qm_tool_kind qm_classify(const char *path, qm_index_fn index, char *why, size_t whylen);

/* Load a private copy of PMPI tool `path` whose undefined PMPI_X (X intercepted by
 * the core) are renamed <first>MPI_X (first: 'X' shared entry points, or a slot letter). Returns 0, or -1 with the reason in `why`. */
int qm_pmpi_load(const char *path, char first, qm_index_fn index, int nfuncs, struct qm_pmpi_copy *out, char *why,
                 size_t whylen);
#endif
