/* identity.c: the core stops, with one line, when the MPI library its PMPI calls reach
 * is not of the implementation it was generated for, or when a second MPI library is
 * loaded beside it. Both happen to an application built with another MPI's compiler
 * driver (the linker only warns); without this check it crashes in its first call,
 * inside MPI, with the other MPI's handles. */
#define _GNU_SOURCE
#include "qmpi_internal.h"

#include <dlfcn.h>
#include <link.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

struct qmpi_other_mpi {
    const char *bound; /* the file PMPI_Init resolves to (NULL: the first that defines it) */
    char other[512];   /* the first other loaded file that defines PMPI_Init */
};

/* Does the object loaded as `name` itself define PMPI_Init? dlsym on a handle also
 * searches the object's dependencies, so the definition's own file must be `name`. */
static int qmpi_defines_pmpi_init(const char *name)
{
    Dl_info where;
    void *handle = dlopen(name, RTLD_LAZY | RTLD_NOLOAD);
    void *symbol = handle ? dlsym(handle, "PMPI_Init") : NULL;
    int defines = symbol && dladdr(symbol, &where) && where.dli_fname && strcmp(where.dli_fname, name) == 0;

    if (handle)
        dlclose(handle);
    return defines;
}

static int qmpi_find_other_mpi(struct dl_phdr_info *info, size_t size, void *data)
{
    struct qmpi_other_mpi *found = (struct qmpi_other_mpi *)data;

    (void)size;
    if (!info->dlpi_name || !info->dlpi_name[0] || (found->bound && strcmp(info->dlpi_name, found->bound) == 0))
        return 0;
    if (!qmpi_defines_pmpi_init(info->dlpi_name))
        return 0;
    if (!found->bound) { /* objects come in load order, which is the order of lookup */
        found->bound = info->dlpi_name;
        return 0;
    }
    snprintf(found->other, sizeof found->other, "%s", info->dlpi_name);
    return 1;
}

#ifdef QMPI_LIBRARY_MARKER
/* The first line of MPI_Get_library_version (callable before MPI_Init), or "". */
static void qmpi_library_version(char *out, size_t size)
{
    char version[MPI_MAX_LIBRARY_VERSION_STRING];
    int length = 0;

    out[0] = '\0';
    if (PMPI_Get_library_version(version, &length) != MPI_SUCCESS)
        return;
    version[length > 0 && length < (int)sizeof version ? length : (int)sizeof version - 1] = '\0';
    snprintf(out, size, "%.*s", (int)strcspn(version, "\r\n"), version);
}
#endif

static void qmpi_identity_error(const char *format, ...) __attribute__((format(printf, 1, 2), noreturn));
static void qmpi_identity_error(const char *format, ...)
{
    va_list args;

    va_start(args, format);
    qmpi_write_error(format, args);
    va_end(args);
    /* Not qmpi_stop_job: MPI_Init or MPI_Abort of a mismatched library is what would
     * crash. Every rank of such a job fails alike, so the launcher sees all exit. */
    _exit(1);
}

QMPI_HIDDEN void qmpi_check_mpi_library(void)
{
    struct qmpi_other_mpi found;
    struct link_map *object = NULL;
    Dl_info bound;

    if (!dladdr1((void *)PMPI_Init, &bound, (void **)&object, RTLD_DL_LINKMAP) || !object)
        return;
    /* The main program's own name is "": an MPI linked into it statically, or its PLT
     * entry standing for PMPI_Init; then the first loaded file defining it is the one. */
    found.bound = object->l_name[0] ? object->l_name : NULL;
    found.other[0] = '\0';
#ifdef QMPI_LIBRARY_MARKER
    char version[256];
    qmpi_library_version(version, sizeof version);
    if (version[0] && !strstr(version, QMPI_LIBRARY_MARKER))
        qmpi_identity_error("this QMPI core was generated for %s, but its MPI calls reach %s (%s): build the "
                            "application with the MPI the core was generated for, or generate a core for this one",
                            QMPI_MPI_LIBRARY, found.bound ? found.bound : "the program", version);
#endif
    dl_iterate_phdr(qmpi_find_other_mpi, &found);
    if (found.other[0])
        qmpi_identity_error("this QMPI core was generated for %s and calls it in %s, but another MPI library, "
                            "%s, is loaded too: build the application with the MPI the core was generated for",
                            QMPI_MPI_LIBRARY, found.bound, found.other);
}
