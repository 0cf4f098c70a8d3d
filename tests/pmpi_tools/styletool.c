/* styletool: one small PMPI tool per way deployed tools bind to MPI, chosen when it is
 * compiled (-DSTYLE_<NAME>). Each counts the calls of the application in
 * tests/apps/coexist_app.c it intercepts, and the bytes it writes and reads, and prints
 * one line on stderr in its MPI_Finalize (or, delayed, at exit):
 *
 *   styletool <style> rank <r>: MPI_Init=1 MPI_File_open=1 MPI_File_write_at=8 ... written=4096 read=4096
 *
 * The styles, after the tools that bind that way:
 *   IMPORTS    MPI_X defined, PMPI_X called (mpiP, IPM, mpitrace)
 *   ALIASES    one wrapper defined as both MPI_X and PMPI_X (alias attribute); the next
 *              function from dlsym(RTLD_NEXT, "PMPI_X") into exported __real_PMPI_X
 *              pointers; PMPI_Reduce called at finalize (Darshan 3.x, DARSHAN_WRAPPER_MAP)
 *   OWNPMPI    its own PMPI_Init and PMPI_Finalize beside MPI_Init and MPI_Finalize; the
 *              next function from dlsym(RTLD_NEXT) (Recorder 2.x)
 *   DEFAULT    the next function from dlsym(RTLD_DEFAULT, "PMPI_X")
 *   HANDLE     the next function from dlsym(dlopen(<the MPI library>, RTLD_NOLOAD), "PMPI_X")
 *   DLVSYM     the next function from dlvsym(RTLD_NEXT, "PMPI_X", "MPI")
 *   REAL       exported pointers __real_PMPI_X initialised with PMPI_X itself (imports
 *              whose names are the tails of the pointers' names)
 *   GOTCHA     no MPI_X of its own: its constructor points the GOT slots of MPI_X in
 *              every other loaded library at its wrappers (Caliper's GOTCHA)
 *   EXITFIN    IMPORTS, but MPI_Finalize returns at once and PMPI_Finalize is called
 *              from an exit handler (IPM with DELAYED_MPI_FINALIZE)
 *
 * COMPILE: mpicc -shared -fPIC -O2 -DSTYLE_ALIASES styletool.c -o libstyle_aliases.so -ldl
 * RUN:     LD_PRELOAD=./libstyle_aliases.so mpiexec -n 2 ./coexist_app   (tests/test_coexist.py) */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <link.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#if defined(STYLE_IMPORTS)
#define STYLE "imports"
#elif defined(STYLE_ALIASES)
#define STYLE "aliases"
#elif defined(STYLE_OWNPMPI)
#define STYLE "ownpmpi"
#elif defined(STYLE_DEFAULT)
#define STYLE "default"
#elif defined(STYLE_HANDLE)
#define STYLE "handle"
#elif defined(STYLE_DLVSYM)
#define STYLE "dlvsym"
#elif defined(STYLE_REAL)
#define STYLE "real"
#elif defined(STYLE_GOTCHA)
#define STYLE "gotcha"
#elif defined(STYLE_EXITFIN)
#define STYLE "exitfin"
#define STYLE_IMPORTS 1
#else
#error "define one STYLE_<NAME>"
#endif

enum { INIT, INIT_THREAD, FILE_OPEN, FILE_WRITE_AT, FILE_READ_AT, FILE_CLOSE, BCAST, ALLREDUCE, SEND, RECV, FINALIZE, N };
static const char *const names[N] = {"MPI_Init",      "MPI_Init_thread", "MPI_File_open", "MPI_File_write_at",
                                     "MPI_File_read_at", "MPI_File_close",  "MPI_Bcast",     "MPI_Allreduce",
                                     "MPI_Send",      "MPI_Recv",        "MPI_Finalize"};
static long counts[N], written, read_bytes, dlvsym_answers __attribute__((unused));
static int reported;

static void count(int which)
{
    __atomic_fetch_add(&counts[which], 1, __ATOMIC_RELAXED);
}

static long bytes(int n, MPI_Datatype type)
{
    int size = 0;
    PMPI_Type_size(type, &size);
    return (long)n * size;
}

static void report(void)
{
    char line[1024];
    int used, k, rank = -1, finalized = 0;

    if (reported++)
        return;
    PMPI_Finalized(&finalized);
    if (!finalized)
        PMPI_Comm_rank(MPI_COMM_WORLD, &rank);
    used = snprintf(line, sizeof line, "styletool %s rank %d:", STYLE, rank);
    for (k = 0; k < N; k++)
        if (counts[k] != 0)
            used += snprintf(line + used, sizeof line - (size_t)used, " %s=%ld", names[k], counts[k]);
    used += snprintf(line + used, sizeof line - (size_t)used, " written=%ld read=%ld", written, read_bytes);
#if defined(STYLE_DLVSYM)
    used += snprintf(line + used, sizeof line - (size_t)used, " dlvsym_answers=%ld", dlvsym_answers);
#endif
    snprintf(line + used, sizeof line - (size_t)used, "\n");
    if (write(STDERR_FILENO, line, strlen(line)) < 0)
        (void)0;
}

/* ---- how each style reaches the next function ---------------------------------------- */

#if defined(STYLE_IMPORTS)
#define NEXT(name) P##name
#define DECLARE_NEXT(ret, name, args)

#elif defined(STYLE_REAL)
/* Exported, initialised with the imports: the linker stores "PMPI_X" as their names' tails. */
#define NEXT(name) __real_P##name
#define DECLARE_NEXT(ret, name, args) ret(*__real_P##name) args = P##name;

#elif defined(STYLE_GOTCHA)
#define NEXT(name) original_##name
#define DECLARE_NEXT(ret, name, args) static ret(*original_##name) args;

#else /* looked up by name, once */
static void *next_function(const char *name)
{
    void *found;
#if defined(STYLE_DEFAULT)
    found = dlsym(RTLD_DEFAULT, name);
#elif defined(STYLE_HANDLE)
    const char *library = getenv("STYLETOOL_MPI_LIBRARY");
    void *handle = library != NULL ? dlopen(library, RTLD_LAZY | RTLD_NOLOAD) : NULL;
    found = handle != NULL ? dlsym(handle, name) : NULL;
#elif defined(STYLE_DLVSYM)
    /* MPI libraries version no symbol: the MPI's own answer is NULL, and the tool falls
     * back to dlsym; dlvsym_answers says how many dlvsym answered. */
    found = dlvsym(RTLD_NEXT, name, "MPI");
    if (found != NULL)
        __atomic_fetch_add(&dlvsym_answers, 1, __ATOMIC_RELAXED);
    else
        found = dlsym(RTLD_NEXT, name);
#else
    found = dlsym(RTLD_NEXT, name);
#endif
    if (found == NULL) {
        fprintf(stderr, "styletool %s: cannot find %s\n", STYLE, name);
        exit(3);
    }
    return found;
}

/* The pointer of `name`'s next function, looked up on first use. */
static void **next_slot(void **slot, const char *name)
{
    if (__atomic_load_n(slot, __ATOMIC_ACQUIRE) == NULL)
        __atomic_store_n(slot, next_function(name), __ATOMIC_RELEASE);
    return slot;
}
#if defined(STYLE_ALIASES)
#define DECLARE_NEXT(ret, name, args) ret(*__real_P##name) args;
#define NEXT(name) (*(__typeof__(__real_P##name) *)next_slot((void **)&__real_P##name, "P" #name))
#else
#define DECLARE_NEXT(ret, name, args) static ret(*real_P##name) args;
#define NEXT(name) (*(__typeof__(real_P##name) *)next_slot((void **)&real_P##name, "P" #name))
#endif
#endif

DECLARE_NEXT(int, MPI_Init, (int *, char ***))
DECLARE_NEXT(int, MPI_Init_thread, (int *, char ***, int, int *))
DECLARE_NEXT(int, MPI_File_open, (MPI_Comm, const char *, int, MPI_Info, MPI_File *))
DECLARE_NEXT(int, MPI_File_write_at, (MPI_File, MPI_Offset, const void *, int, MPI_Datatype, MPI_Status *))
DECLARE_NEXT(int, MPI_File_read_at, (MPI_File, MPI_Offset, void *, int, MPI_Datatype, MPI_Status *))
DECLARE_NEXT(int, MPI_File_close, (MPI_File *))
DECLARE_NEXT(int, MPI_Bcast, (void *, int, MPI_Datatype, int, MPI_Comm))
DECLARE_NEXT(int, MPI_Allreduce, (const void *, void *, int, MPI_Datatype, MPI_Op, MPI_Comm))
DECLARE_NEXT(int, MPI_Send, (const void *, int, MPI_Datatype, int, int, MPI_Comm))
DECLARE_NEXT(int, MPI_Recv, (void *, int, MPI_Datatype, int, int, MPI_Comm, MPI_Status *))
DECLARE_NEXT(int, MPI_Finalize, (void))

/* ---- the wrappers -------------------------------------------------------------------- */

#if defined(STYLE_ALIASES)
/* Both names of the wrapper, as DARSHAN_WRAPPER_MAP makes them for MPI-IO, MPI_Init
 * and MPI_Finalize; the other functions are plain MPI_X (Darshan wraps only those). */
#define WRAPPER(name) styletool_##name
#define MAP(ret, name, args)                                                                                          \
    ret name args __attribute__((alias("styletool_" #name)));                                                         \
    ret P##name args __attribute__((alias("styletool_" #name)));
#define PLAIN(ret, name, args) ret name args __attribute__((alias("styletool_" #name)));
#elif defined(STYLE_GOTCHA)
#define WRAPPER(name) styletool_##name
#define MAP(ret, name, args)
#else
#define WRAPPER(name) name
#define MAP(ret, name, args)
#endif
#ifndef PLAIN
#define PLAIN MAP
#endif

int WRAPPER(MPI_Init)(int *argc, char ***argv)
{
    count(INIT);
    return NEXT(MPI_Init)(argc, argv);
}
MAP(int, MPI_Init, (int *argc, char ***argv))

int WRAPPER(MPI_Init_thread)(int *argc, char ***argv, int required, int *provided)
{
    count(INIT_THREAD);
    return NEXT(MPI_Init_thread)(argc, argv, required, provided);
}
MAP(int, MPI_Init_thread, (int *argc, char ***argv, int required, int *provided))

#if defined(STYLE_OWNPMPI)
/* Recorder defines these too, for bindings that call PMPI_Init themselves. */
int PMPI_Init(int *argc, char ***argv)
{
    return NEXT(MPI_Init)(argc, argv);
}

int PMPI_Finalize(void)
{
    return NEXT(MPI_Finalize)();
}
#endif

int WRAPPER(MPI_File_open)(MPI_Comm comm, const char *file, int mode, MPI_Info info, MPI_File *fh)
{
    count(FILE_OPEN);
    return NEXT(MPI_File_open)(comm, file, mode, info, fh);
}
MAP(int, MPI_File_open, (MPI_Comm comm, const char *file, int mode, MPI_Info info, MPI_File *fh))

int WRAPPER(MPI_File_write_at)(MPI_File fh, MPI_Offset offset, const void *buf, int n, MPI_Datatype type,
                               MPI_Status *status)
{
    count(FILE_WRITE_AT);
    __atomic_fetch_add(&written, bytes(n, type), __ATOMIC_RELAXED);
    return NEXT(MPI_File_write_at)(fh, offset, buf, n, type, status);
}
MAP(int, MPI_File_write_at,
    (MPI_File fh, MPI_Offset offset, const void *buf, int n, MPI_Datatype type, MPI_Status *status))

int WRAPPER(MPI_File_read_at)(MPI_File fh, MPI_Offset offset, void *buf, int n, MPI_Datatype type, MPI_Status *status)
{
    count(FILE_READ_AT);
    __atomic_fetch_add(&read_bytes, bytes(n, type), __ATOMIC_RELAXED);
    return NEXT(MPI_File_read_at)(fh, offset, buf, n, type, status);
}
MAP(int, MPI_File_read_at, (MPI_File fh, MPI_Offset offset, void *buf, int n, MPI_Datatype type, MPI_Status *status))

int WRAPPER(MPI_File_close)(MPI_File *fh)
{
    count(FILE_CLOSE);
    return NEXT(MPI_File_close)(fh);
}
MAP(int, MPI_File_close, (MPI_File * fh))

int WRAPPER(MPI_Bcast)(void *buf, int n, MPI_Datatype type, int root, MPI_Comm comm)
{
    count(BCAST);
    return NEXT(MPI_Bcast)(buf, n, type, root, comm);
}
PLAIN(int, MPI_Bcast, (void *buf, int n, MPI_Datatype type, int root, MPI_Comm comm))

int WRAPPER(MPI_Allreduce)(const void *in, void *out, int n, MPI_Datatype type, MPI_Op op, MPI_Comm comm)
{
    count(ALLREDUCE);
    return NEXT(MPI_Allreduce)(in, out, n, type, op, comm);
}
PLAIN(int, MPI_Allreduce, (const void *in, void *out, int n, MPI_Datatype type, MPI_Op op, MPI_Comm comm))

int WRAPPER(MPI_Send)(const void *buf, int n, MPI_Datatype type, int dest, int tag, MPI_Comm comm)
{
    count(SEND);
    return NEXT(MPI_Send)(buf, n, type, dest, tag, comm);
}
PLAIN(int, MPI_Send, (const void *buf, int n, MPI_Datatype type, int dest, int tag, MPI_Comm comm))

int WRAPPER(MPI_Recv)(void *buf, int n, MPI_Datatype type, int source, int tag, MPI_Comm comm, MPI_Status *status)
{
    count(RECV);
    return NEXT(MPI_Recv)(buf, n, type, source, tag, comm, status);
}
PLAIN(int, MPI_Recv, (void *buf, int n, MPI_Datatype type, int source, int tag, MPI_Comm comm, MPI_Status *status))

#if defined(STYLE_EXITFIN)
static void finalize_at_exit(void)
{
    int initialized = 0, finalized = 0;
    report();
    PMPI_Initialized(&initialized);
    PMPI_Finalized(&finalized);
    if (initialized && !finalized)
        PMPI_Finalize();
}

int MPI_Finalize(void)
{
    static int registered;
    count(FINALIZE);
    if (!registered++)
        atexit(finalize_at_exit);
    return MPI_SUCCESS;
}
#else
int WRAPPER(MPI_Finalize)(void)
{
    count(FINALIZE);
#if defined(STYLE_ALIASES)
    { /* Darshan reduces its records with PMPI_Reduce before it writes its log */
        long total = 0;
        PMPI_Reduce(&written, &total, 1, MPI_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
    }
#endif
    report();
    return NEXT(MPI_Finalize)();
}
MAP(int, MPI_Finalize, (void))
#endif

#if defined(STYLE_GOTCHA)
/* Points every other loaded library's GOT slots of the functions above at the
 * wrappers, keeping what they held as the originals: GOTCHA's way, in short. */
struct wrap {
    const char *name;
    void *wrapper;
    void **original;
};
#define WRAP(name) {#name, (void *)styletool_##name, (void **)&original_##name}
static struct wrap wraps[] = {WRAP(MPI_Init),      WRAP(MPI_Init_thread), WRAP(MPI_File_open), WRAP(MPI_File_write_at),
                              WRAP(MPI_File_read_at), WRAP(MPI_File_close), WRAP(MPI_Bcast),     WRAP(MPI_Allreduce),
                              WRAP(MPI_Send),      WRAP(MPI_Recv),        WRAP(MPI_Finalize)};

static void patch_relocations(ElfW(Addr) base, const ElfW(Rela) * r, size_t n, const ElfW(Sym) * symbols,
                              const char *strings)
{
    long page = sysconf(_SC_PAGESIZE);
    size_t i, k;

    for (i = 0; i < n; i++)
        for (k = 0; k < sizeof wraps / sizeof *wraps; k++) {
            void **slot = (void **)(base + r[i].r_offset);
            uintptr_t first = (uintptr_t)slot / (uintptr_t)page * (uintptr_t)page;
            if (strcmp(strings + symbols[ELF64_R_SYM(r[i].r_info)].st_name, wraps[k].name) != 0)
                continue;
            if (*wraps[k].original == NULL)
                *wraps[k].original = dlsym(RTLD_DEFAULT, wraps[k].name);
            mprotect((void *)first, (size_t)page, PROT_READ | PROT_WRITE);
            *slot = wraps[k].wrapper;
        }
}

static int patch_object(struct dl_phdr_info *info, size_t size, void *data)
{
    const ElfW(Dyn) *d = NULL;
    const ElfW(Sym) *symbols = NULL;
    const char *strings = NULL;
    const ElfW(Rela) *rela = NULL, *jmprel = NULL;
    size_t nrela = 0, njmprel = 0;
    int k;

    (void)size;
    (void)data;
    if (info->dlpi_name == NULL || strstr(info->dlpi_name, "linux-vdso") != NULL)
        return 0;
    for (k = 0; k < info->dlpi_phnum; k++)
        if (info->dlpi_phdr[k].p_type == PT_DYNAMIC)
            d = (const ElfW(Dyn) *)(info->dlpi_addr + info->dlpi_phdr[k].p_vaddr);
    for (; d != NULL && d->d_tag != DT_NULL; d++) {
        ElfW(Addr) v = d->d_un.d_ptr;
        if (d->d_tag == DT_SYMTAB)
            symbols = (const ElfW(Sym) *)v;
        else if (d->d_tag == DT_STRTAB)
            strings = (const char *)v;
        else if (d->d_tag == DT_RELA)
            rela = (const ElfW(Rela) *)v;
        else if (d->d_tag == DT_RELASZ)
            nrela = d->d_un.d_val / sizeof(ElfW(Rela));
        else if (d->d_tag == DT_JMPREL)
            jmprel = (const ElfW(Rela) *)v;
        else if (d->d_tag == DT_PLTRELSZ)
            njmprel = d->d_un.d_val / sizeof(ElfW(Rela));
    }
    if (symbols == NULL || strings == NULL)
        return 0;
    patch_relocations(info->dlpi_addr, rela, rela ? nrela : 0, symbols, strings);
    patch_relocations(info->dlpi_addr, jmprel, jmprel ? njmprel : 0, symbols, strings);
    return 0;
}

__attribute__((constructor)) static void styletool_gotcha(void)
{
    dl_iterate_phdr(patch_object, NULL); /* the tool itself refers to no MPI_X: its own slots are none */
}
#endif
