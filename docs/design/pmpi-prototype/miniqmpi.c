/* miniqmpi.c - a miniature QMPI core (same shapes as qmpigen's: entry wrappers, one
 * hole-free table of cells per level, thesis-form links, end links calling PMPI) plus
 * the new level kind: an unmodified PMPI tool, loaded by pmpi_load.c.
 *
 *   level kind   its cell in the table above points at
 *   native       the tool's thesis-form wrapper  C_X(args, level, v)
 *   pmpi         qm_pmpi_as_thesis_X(args, level, v): set the thread's PMPI level,
 *                call the tool's own MPI_X(args), restore the level
 *
 * The core exports XMPI_X(args): the renamed PMPI_X imports of every PMPI copy land
 * here; it continues the chain below the thread's current PMPI level.
 */
#define _GNU_SOURCE
#include "miniqmpi.h"
#include "pmpi_load.h"
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define EXPORT __attribute__((visibility("default")))
#define HIDDEN __attribute__((visibility("hidden")))

enum { UNBUILT, DIRECT, CHAINED };
enum { NATIVE = 1, PMPI = 2 };

struct level {
  int kind;
  const char *path;
  void **native;            /* per function: the wrapper (native: thesis form, pmpi: MPI_X) */
  struct qm_pmpi_copy copy; /* pmpi levels */
  int slot;                 /* pmpi levels: its slot (own entry points), -1: shared XMPI_ + TLS */
  void (*report)(int level, int rank);
};

static struct level *levels;
static int nlevels;
static cell **tables; /* tables[level][function], levels 0..nlevels */
static vector chain;
static int state = UNBUILT, building;
static pthread_mutex_t build_lock = PTHREAD_MUTEX_INITIALIZER;

/* The PMPI level this thread is running in (0: none). Set by the adapter around a
 * PMPI tool's MPI_X, read by XMPI_X. initial-exec: one %fs-relative load. */
#ifdef QM_GLOBAL_LEVEL /* experiment only: NOT thread-safe */
static int pmpi_level;
#else
static __thread int pmpi_level __attribute__((tls_model("initial-exec")));
#endif

static const char *const names[] = {
#define NAME(N, P, A) #N,
    QM_FUNCS(NAME)
#undef NAME
};

static int name_index(const char *suffix)
{
  int i;
  for (i = 0; i < QM_NFUNCS; i++)
    if (strcmp(names[i], suffix) == 0)
      return i;
  return -1;
}

/* thesis-form type of each function */
#define T(N, P, A) typedef int (*thesis_##N)(QM_C P int level, vector *v);
QM_FUNCS(T)
#undef T

/* end links */
#define END(N, P, A)                                                                 \
  static int end_##N(QM_C P int level, vector *v)                                    \
  {                                                                                  \
    (void)level, (void)v;                                                            \
    return PMPI_##N A;                                                               \
  }
QM_FUNCS(END)
#undef END

/* PMPI level adapters: the level's cell above points here */
#define ADAPT(N, P, A)                                                               \
  static int pmpi_as_thesis_##N(QM_C P int level, vector *v)                         \
  {                                                                                  \
    int saved = pmpi_level, rc;                                                      \
    (void)v;                                                                         \
    pmpi_level = level;                                                              \
    rc = ((int (*)(QM_U P))levels[level].native[QM_##N])A;                           \
    pmpi_level = saved;                                                              \
    return rc;                                                                       \
  }
QM_FUNCS(ADAPT)
#undef ADAPT

/* A PMPI call made outside any adapter (a tool's own thread, its constructor, an MPI
 * callback): find the copy by the caller's address; 0 if it is none of them. */
static __attribute__((noinline, cold)) int pmpi_level_of(const void *caller)
{
  int l;
  for (l = 1; l <= nlevels; l++)
    if (levels[l].kind == PMPI && (uintptr_t)caller >= levels[l].copy.lo && (uintptr_t)caller < levels[l].copy.hi)
      return l;
  return 0;
}

/* XMPI_X: where every PMPI copy's PMPI_X now goes */
#define XMPI(N, P, A)                                                                \
  EXPORT int XMPI_##N(QM_U P)                                                        \
  {                                                                                  \
    int l = pmpi_level;                                                              \
    const cell *c;                                                                   \
    if (__builtin_expect(l == 0, 0)) {                                               \
      l = pmpi_level_of(__builtin_return_address(0));                                \
      if (l == 0)                                                                    \
        return PMPI_##N A;                                                           \
    }                                                                                \
    c = &tables[l][QM_##N];                                                          \
    return ((thesis_##N)c->func_ptr)(QM_C A c->level, &chain);                       \
  }
QM_FUNCS(XMPI)
#undef XMPI

/* Slot entry points: the first QM_NSLOTS PMPI copies get their own set, <letter>MPI_X,
 * which knows its level without TLS (slot_level[k], fixed once the chain is built):
 * no adapter, no thread state, correct from any thread or callback, and every
 * indirect branch has one target per copy (the shared XMPI_ path makes the core's
 * two dispatch sites polymorphic, which this CPU predicts badly beyond ~3 levels). */
#define QM_SLOTS(S) S(0, Y) S(1, Z) S(2, J) S(3, K) S(4, V) S(5, W) S(6, G) S(7, H)
#define QM_NSLOTS 8
static const char slot_letter[QM_NSLOTS] = {'Y', 'Z', 'J', 'K', 'V', 'W', 'G', 'H'};
static int slot_level[QM_NSLOTS];
#define SLOTFN(N, P, A, K, L)                                                        \
  EXPORT int L##MPI_##N(QM_U P)                                                      \
  {                                                                                  \
    const cell *c = &tables[slot_level[K]][QM_##N];                                  \
    return ((thesis_##N)c->func_ptr)(QM_C A c->level, &chain);                       \
  }
#define SLOT(K, L) QM_FUNCS_K(SLOTFN, K, L)
#define QM_FUNCS_K(M, K, L)                                                          \
  M(Init, (int *argc, char ***argv), (argc, argv), K, L)                             \
  M(Init_thread, (int *argc, char ***argv, int required, int *provided), (argc, argv, required, provided), K, L) \
  M(Finalize, (), (), K, L)                                                          \
  M(Comm_rank, (MPI_Comm comm, int *rank), (comm, rank), K, L)                       \
  M(Comm_size, (MPI_Comm comm, int *size), (comm, size), K, L)                       \
  M(Send, (const void *buf, int count, MPI_Datatype dt, int dest, int tag, MPI_Comm comm), (buf, count, dt, dest, tag, comm), K, L) \
  M(Recv, (void *buf, int count, MPI_Datatype dt, int src, int tag, MPI_Comm comm, MPI_Status *st), (buf, count, dt, src, tag, comm, st), K, L) \
  M(Barrier, (MPI_Comm comm), (comm), K, L)
QM_SLOTS(SLOT)
#undef SLOT

static void *thesis_form(int level, int f)
{
  /* a slot level's cell points straight at the tool's MPI_X: the thesis form's two extra
   * trailing arguments (level, v) are ignored by a callee that does not declare them
   * (caller-cleans-up ABIs: x86-64 SysV, AArch64, ppc64le ELFv2) */
#define F(N, P, A) if (f == QM_##N) return levels[level].kind == PMPI && levels[level].slot < 0 ? (void *)pmpi_as_thesis_##N : levels[level].native[f];
  QM_FUNCS(F)
#undef F
  return NULL;
}

static void *end_link(int f)
{
#define F(N, P, A) if (f == QM_##N) return (void *)end_##N;
  QM_FUNCS(F)
#undef F
  return NULL;
}

static void die(const char *fmt, const char *a, int b, const char *c)
{
  fprintf(stderr, fmt, a, b, c);
  fputc('\n', stderr);
  exit(1);
}

static int load_tools(void)
{
  const char *list = getenv("TOOLS");
  int verbose = getenv("QM_VERBOSE") != NULL;
  char *copy, *tok, *save = NULL, why[512];
  int level, f, next[QM_NFUNCS], pmpi_slots = 0;
  int tls_only = getenv("QM_PMPI_SHARED") != NULL; /* experiment: every PMPI copy on XMPI_ + TLS */

  if (list == NULL || *list == '\0')
    return DIRECT;
  copy = strdup(list);
  for (tok = copy, nlevels = 1; *tok; tok++)
    nlevels += *tok == ':';
  levels = calloc((size_t)nlevels + 1, sizeof *levels);
  tables = calloc((size_t)nlevels + 1, sizeof *tables);
  for (level = 0; level <= nlevels; level++)
    tables[level] = calloc(QM_NFUNCS, sizeof(cell));
  chain.tables = tables;

  for (level = 1, tok = strtok_r(copy, ":", &save); tok; tok = strtok_r(NULL, ":", &save), level++) {
    struct level *L = &levels[level];
    int kind = qm_classify(tok, name_index, why, sizeof why);
    L->path = tok;
    if (kind < 0 || kind == QM_NOT_A_TOOL)
      die("TOOLS entry %s (%d): %s", tok, level, why);
    if (kind == QM_NATIVE_TOOL) {
      void *h = dlopen(tok, RTLD_NOW | RTLD_LOCAL);
      void *(*get)(int);
      if (h == NULL)
        die("TOOLS entry %s (%d): %s", tok, level, dlerror());
      *(void **)&get = dlsym(h, "qm_get_wrapper");
      *(void **)&L->report = dlsym(h, "qm_report");
      L->kind = NATIVE;
      L->native = calloc(QM_NFUNCS, sizeof(void *));
      for (f = 0; f < QM_NFUNCS; f++)
        L->native[f] = get(f);
    } else {
      L->slot = pmpi_slots < QM_NSLOTS && !tls_only ? pmpi_slots++ : -1;
      if (L->slot >= 0)
        slot_level[L->slot] = level;
      if (qm_pmpi_load(tok, L->slot >= 0 ? slot_letter[L->slot] : 'X', name_index, QM_NFUNCS, &L->copy, why,
                       sizeof why) != 0)
        die("TOOLS entry %s (%d): %s", tok, level, why);
      L->kind = PMPI;
      L->native = L->copy.wrappers;
      if (L->copy.symbolic)
        fprintf(stderr, "qmpi: warning: %s binds its own MPI calls locally (-Bsymbolic or protected "
                        "symbols): they will not enter the top of the chain\n", tok);
    }
    if (verbose)
      fprintf(stderr, "qmpi[%d]: level %d: %s, %s%s%.3f ms\n", (int)getpid(), level, tok,
              L->kind == PMPI ? (L->slot >= 0 ? "PMPI tool, private copy, own entry points, " : "PMPI tool, private copy, XMPI_ + TLS, ") : "QMPI tool",
              L->kind == PMPI ? "" : ", ", L->kind == PMPI ? L->copy.ms : 0.0);
  }
  /* hole-free tables, bottom-up (as the real core's qmpi_fill_table) */
  for (f = 0; f < QM_NFUNCS; f++)
    next[f] = nlevels + 1;
  for (level = nlevels; level >= 0; level--) {
    for (f = 0; f < QM_NFUNCS; f++) {
      tables[level][f].level = next[f];
      tables[level][f].func_ptr = next[f] == nlevels + 1 ? end_link(f) : thesis_form(next[f], f);
    }
    if (level > 0)
      for (f = 0; f < QM_NFUNCS; f++)
        if (levels[level].native[f] != NULL)
          next[f] = level;
  }
  return CHAINED;
}

static int build(void)
{
  int s;
  if (building)
    return DIRECT; /* a tool's constructor called MPI while loading */
  pthread_mutex_lock(&build_lock);
  s = __atomic_load_n(&state, __ATOMIC_ACQUIRE);
  if (s == UNBUILT) {
    building = 1;
    s = load_tools();
    building = 0;
    __atomic_store_n(&state, s, __ATOMIC_RELEASE);
  }
  pthread_mutex_unlock(&build_lock);
  return s;
}

static void report(void)
{
  int l, rank = -1;
  PMPI_Comm_rank(MPI_COMM_WORLD, &rank);
  for (l = 1; l <= nlevels; l++)
    if (levels[l].report)
      levels[l].report(l, rank);
  fflush(stdout);
}

/* entry wrappers */
#define ENTRY(N, P, A)                                                               \
  EXPORT int MPI_##N(QM_U P)                                                         \
  {                                                                                  \
    int s = __atomic_load_n(&state, __ATOMIC_ACQUIRE);                               \
    const cell *c;                                                                   \
    if (__builtin_expect(s == DIRECT, 1))                                            \
      return PMPI_##N A;                                                             \
    if (s == UNBUILT && build() == DIRECT)                                           \
      return PMPI_##N A;                                                             \
    if (QM_##N == QM_Finalize)                                                       \
      report();                                                                      \
    c = &tables[0][QM_##N];                                                          \
    return ((thesis_##N)c->func_ptr)(QM_C A c->level, &chain);                       \
  }
QM_FUNCS(ENTRY)
#undef ENTRY
