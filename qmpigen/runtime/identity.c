/* identity.c: the core stops, with one line, when the MPI library its PMPI calls reach is
 * of another ABI than the MPI it was generated for, or when a second MPI library is
 * loaded beside it. Both happen to an application built with another MPI's compiler
 * driver (the linker only warns); without this check it crashes in its first call,
 * inside MPI, with the other MPI's handles.
 *
 * A check that stops jobs must never stop a good one. So an MPI library is what a tool
 * cannot look like (neighbours.c: it defines the PMPI_ function of nearly every MPI
 * function; Darshan and Recorder, preloaded at many sites, define a few), and another
 * ABI is recognised by a symbol only that ABI's libraries define (quirks.ABI_SYMBOLS),
 * not by the wording of MPI_Get_library_version, which MPICH's derivatives change. */
#define _GNU_SOURCE
#include "qmpi_internal.h"

#include <dlfcn.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static const char *qmpi_object_name(const struct qmpi_object *object)
{
    return object->name[0] ? object->name : "the program";
}

/* The first line of MPI_Get_library_version (callable before MPI_Init), or "". */
static void qmpi_library_version(char *out, size_t size)
{
    out[0] = '\0';
#ifdef QMPI_HAS_LIBRARY_VERSION
    char version[MPI_MAX_LIBRARY_VERSION_STRING];
    int length = 0;

    if (PMPI_Get_library_version(version, &length) != MPI_SUCCESS)
        return;
    version[length > 0 && length < (int)sizeof version ? length : (int)sizeof version - 1] = '\0';
    snprintf(out, size, "%.*s", (int)strcspn(version, "\r\n"), version);
#else
    (void)size;
#endif
}

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

/* Is the MPI library `mpi` of this core's ABI? 0, or the ABI it is of. */
static const char *qmpi_other_abi(const struct qmpi_object *mpi)
{
#ifdef QMPI_FOREIGN_ABI_SYMBOLS
    static const char *const foreign[][2] = QMPI_FOREIGN_ABI_SYMBOLS;
    size_t k;

    for (k = 0; k < sizeof foreign / sizeof *foreign; k++)
        if (qmpi_loaded_lookup(mpi, foreign[k][0]) != NULL)
            return foreign[k][1];
#endif
#ifdef QMPI_ABI_SYMBOL
    if (qmpi_loaded_lookup(mpi, QMPI_ABI_SYMBOL) == NULL)
        return "another MPI";
#endif
    (void)mpi;
    return NULL;
}

QMPI_HIDDEN void qmpi_check_mpi_library(const struct qmpi_survey *survey)
{
    const struct qmpi_object *mpi = &survey->mpi[0];
    const char *other;
    char version[256];

    /* None: the MPI is linked into the program or the core statically, with nothing
     * beside it to mistake it for. */
    if (survey->nmpi == 0)
        return;
    other = qmpi_other_abi(mpi);
    if (other != NULL) {
        qmpi_library_version(version, sizeof version);
        qmpi_identity_error("this QMPI core was generated for %s, but its MPI calls reach %s (%s%s%s): build the "
                            "application with %s, the driver the core was generated with, or generate a core for "
                            "this MPI",
                            QMPI_MPI_LIBRARY, qmpi_object_name(mpi), other, version[0] ? ": " : "", version,
                            QMPI_DRIVER_PATH);
    }
    if (survey->nmpi > 1)
        qmpi_identity_error("this QMPI core was generated for %s and calls it in %s, but another MPI library, %s, "
                            "is loaded too: build the application with %s, the driver the core was generated with",
                            QMPI_MPI_LIBRARY, qmpi_object_name(mpi), qmpi_object_name(&survey->mpi[1]),
                            QMPI_DRIVER_PATH);
}

/* At load: an MPI library of another ABI ahead of the core takes the application's calls,
 * which the core then never sees: the job would crash in its first call. A process the
 * launcher made a rank stops here with the same line; any other process loading the core
 * (a launcher started with the variable exported) goes on. */
QMPI_HIDDEN void qmpi_check_mpi_ahead(const struct qmpi_object *mpi)
{
    const char *other = qmpi_other_abi(mpi);

    if (other != NULL && qmpi_launched())
        qmpi_identity_error("this QMPI core was generated for %s, but %s (%s) is loaded ahead of it and takes the "
                            "application's MPI calls: build the application with %s, the driver the core was "
                            "generated with, and do not preload another MPI",
                            QMPI_MPI_LIBRARY, qmpi_object_name(mpi), other, QMPI_DRIVER_PATH);
}
