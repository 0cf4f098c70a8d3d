/* neighbours.c: the libraries the core shares the process with, as sites set them up.
 *
 * A site preloads its tools (Darshan, IPM, Recorder, mpiP) into every job and links the
 * core by default; which comes first in the dynamic linker's search order is an
 * accident of LD_PRELOAD and link lines. The natural meaning of that order is kept:
 *   - a PMPI tool ahead of the core (outer) is the outermost level: its PMPI_X calls,
 *     and the PMPI_X it looks up with dlsym/dlvsym, enter the chain at its top (the core
 *     re-points them at load, in its constructor: the tool may take every call, so the
 *     core may never be called otherwise);
 *   - a PMPI tool after the core (inner) is the chain's last link: the chain ends in its
 *     MPI_X instead of the MPI's (chain.c asks qmpi_inner_links when it builds);
 *   - the MPI library is told from such tools by what a tool cannot look like: it
 *     defines the PMPI_ function of nearly every MPI function (QMPI_MPI_LIBRARY_PMPI).
 * A tool whose references cannot be re-pointed, and an MPI library ahead of the core
 * (a link line with -lmpi before -lqmpi), are said in one line. */
#define _GNU_SOURCE
#include "qmpi_internal.h"

#include <dlfcn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The outer tools found at load; read afterwards only. */
static struct qmpi_object qmpi_outer[QMPI_MAX_OUTER];
static int qmpi_nouter, qmpi_outer_defines_pmpi; /* one of them defines PMPI_ functions */
static struct qmpi_object qmpi_core_object;

static int qmpi_is_mpi_function(const char *name)
{
    return strncmp(name, "MPI_", 4) == 0 && qmpi_function_index(name) >= 0;
}

static int qmpi_in(const struct qmpi_object *object, const void *address)
{
    return (uintptr_t)address >= object->low && (uintptr_t)address < object->high;
}

static int qmpi_is_mpi_library(const struct qmpi_object *object)
{
    return qmpi_loaded_count(object, qmpi_is_c_pmpi) >= QMPI_MPI_LIBRARY_PMPI;
}

/* The MPI library the survey found first (or NULL): what an object's MPI_ definitions are
 * compared with. Set and read while the survey runs (at load, or under the build lock). */
static const struct qmpi_object *qmpi_survey_mpi;

/* An MPI function another object can wrap: one the MPI library defines too. Debian's
 * MPICH 4.0 defines MPI_Status_c2f08 in its Fortran library alone (libmpichfort): that
 * object provides the function, it does not wrap it. */
static int qmpi_is_wrappable(const char *name)
{
    char pmpi[128];

    if (!qmpi_is_mpi_function(name))
        return 0;
    if (qmpi_survey_mpi == NULL || snprintf(pmpi, sizeof pmpi, "P%s", name) >= (int)sizeof pmpi)
        return 1;
    return qmpi_loaded_lookup(qmpi_survey_mpi, pmpi) != NULL;
}

static int qmpi_find_mpi_library(struct dl_phdr_info *info, size_t size, void *data)
{
    struct qmpi_object *mpi = (struct qmpi_object *)data;
    struct qmpi_object object;

    (void)size;
    if (qmpi_loaded_read(info, &object) != 0 || qmpi_in(&object, (const void *)qmpi_function_index) ||
        !qmpi_is_mpi_library(&object))
        return 0;
    *mpi = object;
    return 1;
}

/* The outer tool holding `address`, or NULL. */
static const struct qmpi_object *qmpi_outer_at(const void *address)
{
    int k;
    for (k = 0; k < qmpi_nouter; k++)
        if (qmpi_in(&qmpi_outer[k], address))
            return &qmpi_outer[k];
    return NULL;
}

/* ---- the survey: every loaded object, in load order (the search order of the objects
 * loaded at start-up, which are the ones that can come ahead of the core) ---- */

static int qmpi_survey_object(struct dl_phdr_info *info, size_t size, void *data)
{
    struct qmpi_survey *survey = (struct qmpi_survey *)data;
    struct qmpi_object object;
    size_t mpi_functions;

    (void)size;
    if (qmpi_loaded_read(info, &object) != 0)
        return 0;
    if (qmpi_in(&object, (const void *)qmpi_function_index)) {
        survey->core = object;
        survey->core_found = 1;
        return survey->stop_at_core;
    }
    if (qmpi_is_mpi_library(&object)) {
        if (survey->nmpi < 2)
            survey->mpi[survey->nmpi] = object;
        survey->nmpi++;
        survey->mpi_ahead |= !survey->core_found;
        return 0;
    }
    mpi_functions = qmpi_loaded_count(&object, qmpi_is_wrappable);
    /* Another QMPI core (a program linked with libqmpi.a, run under qmpirun, which
     * preloads libqmpi.so) defines every MPI function and no PMPI one: it is the core the
     * application uses, and this one stays out of its way, as before it was re-pointed. */
    if (mpi_functions == 0 ||
        (mpi_functions >= NUM_MPI_FUNCS * 4 / 5 && qmpi_loaded_count(&object, qmpi_is_c_pmpi) == 0))
        return 0;
    if (!survey->core_found && survey->nouter < QMPI_MAX_OUTER)
        survey->outer[survey->nouter++] = object;
    else if (survey->core_found && survey->nmpi == 0)
        survey->inner = 1; /* between the core and the MPI: reached by RTLD_NEXT from the core */
    return 0;
}

QMPI_HIDDEN void qmpi_survey(struct qmpi_survey *survey, int stop_at_core)
{
    struct qmpi_object mpi;

    memset(survey, 0, sizeof *survey);
    survey->stop_at_core = stop_at_core;
    qmpi_survey_mpi = dl_iterate_phdr(qmpi_find_mpi_library, &mpi) ? &mpi : NULL;
    dl_iterate_phdr(qmpi_survey_object, survey);
    qmpi_survey_mpi = NULL;
}

/* ---- what a re-pointed reference or look-up gets ---- */

/* The core's entry wrapper for "PMPI_X"/"MPI_X" (an enumerated function with one), or NULL. */
static void *qmpi_entry_for(const char *name)
{
    int index = qmpi_function_index(strncmp(name, "PMPI_", 5) == 0 ? name + 1 : name);
    return index >= 0 ? qmpi_entries[index] : NULL;
}

/* For an outer tool: what its reference or look-up of PMPI_X is to reach. A definition
 * in another outer tool (Darshan aliases its wrappers as PMPI_X) is kept: that tool comes
 * first anyway and reaches the core in turn; anything beyond the core becomes the core. */
static void *qmpi_outer_pmpi(const char *name, const void *bound)
{
    if (strncmp(name, "PMPI_", 5) != 0 || (bound != NULL && qmpi_outer_at(bound) != NULL))
        return NULL;
    return qmpi_entry_for(name);
}

/* The first definition of `name` in an outer tool loaded after `caller` (RTLD_NEXT as
 * the dynamic linker would answer the caller), or NULL. */
static void *qmpi_outer_next(const void *caller, const char *name)
{
    const struct qmpi_object *from = qmpi_outer_at(caller);
    int k;

    for (k = from != NULL ? (int)(from - qmpi_outer) + 1 : qmpi_nouter; k < qmpi_nouter; k++) {
        void *found = qmpi_loaded_lookup(&qmpi_outer[k], name);
        if (found != NULL)
            return found;
    }
    return NULL;
}

/* A look-up of an MPI function by a tool whose references the core re-pointed: the
 * answer for its position in the chain, or NULL for the dynamic linker's own answer. */
static void *qmpi_lookup(void *handle, const char *name, const char *version, const void *caller)
{
    const struct qmpi_pmpi_copy *copy = qmpi_pmpi_copy_at(caller);
    void *found;

    if (name == NULL || (strncmp(name, "PMPI_", 5) != 0 && strncmp(name, "MPI_", 4) != 0))
        return NULL;
    if (copy != NULL) /* a level of the chain: on below it; only MPI_X from the top is the top */
        return handle == RTLD_DEFAULT && name[0] == 'M' ? NULL : qmpi_pmpi_continuation(copy->slot, name);
    if (qmpi_outer_at(caller) == NULL || name[0] == 'M')
        return NULL;
    if (handle == RTLD_NEXT)
        found = qmpi_outer_next(caller, name);
    else
        found = version != NULL ? dlvsym(handle, name, version) : dlsym(handle, name);
    return found != NULL && qmpi_outer_at(found) != NULL ? found : qmpi_outer_pmpi(name, NULL);
}

/* The dlsym and dlvsym that re-pointed tools call. Everything but MPI names goes on to
 * the dynamic linker's, as a tail call, so that it sees the tool as its caller (RTLD_NEXT
 * means the object after the caller). */
#if defined(__clang__)
#define QMPI_SIBLING
#else
#define QMPI_SIBLING __attribute__((optimize("optimize-sibling-calls")))
#endif
QMPI_HIDDEN QMPI_SIBLING void *qmpi_dlsym(void *handle, const char *name)
{
    void *found = qmpi_lookup(handle, name, NULL, __builtin_return_address(0));
    if (found != NULL)
        return found;
    return dlsym(handle, name);
}

QMPI_HIDDEN QMPI_SIBLING void *qmpi_dlvsym(void *handle, const char *name, const char *version)
{
    void *found = qmpi_lookup(handle, name, version, __builtin_return_address(0));
    if (found != NULL)
        return found;
    return dlvsym(handle, name, version);
}

/* dlsym and dlvsym imports of a re-pointed library, by name. */
QMPI_HIDDEN void *qmpi_dl_lookup_for(const char *name)
{
    if (strcmp(name, "dlsym") == 0)
        return (void *)qmpi_dlsym;
    if (strcmp(name, "dlvsym") == 0)
        return (void *)qmpi_dlvsym;
    return NULL;
}

/* ---- at load: outer tools ---- */

static void *qmpi_outer_target(const char *name, const ElfW(Sym) * symbol, void *data)
{
    void *look_up = qmpi_dl_lookup_for(name);

    (void)data;
    if (symbol->st_shndx != SHN_UNDEF) /* its own definitions stay its own */
        return NULL;
    return look_up != NULL ? look_up : qmpi_outer_pmpi(name, dlsym(RTLD_DEFAULT, name));
}

/* The core's own PMPI_X references, and a tool library's (chain.c, loading.c): those that
 * the dynamic linker bound to an outer tool's PMPI_X would call back up into the chain;
 * they reach what comes after the core instead. */
static void *qmpi_downward_target(const char *name, const ElfW(Sym) * symbol, void *data)
{
    void *bound = dlsym(RTLD_DEFAULT, name);

    (void)data;
    if (symbol->st_shndx != SHN_UNDEF || strncmp(name, "PMPI_", 5) != 0 || bound == NULL || !qmpi_outer_at(bound))
        return NULL;
    return dlsym(RTLD_NEXT, name);
}

static char qmpi_downward_failure[QMPI_WHY + 256];

QMPI_HIDDEN void qmpi_rebind_downward(const struct qmpi_object *object, const char *what)
{
    char why[QMPI_WHY];

    if (qmpi_outer_defines_pmpi && qmpi_downward_failure[0] == '\0' &&
        qmpi_loaded_rebind(object, qmpi_downward_target, NULL, why) != 0)
        snprintf(qmpi_downward_failure, sizeof qmpi_downward_failure,
                 "%s (%s): cannot keep its PMPI_ calls below the tools preloaded ahead of the core: %s", what,
                 object->name[0] ? object->name : "the program", why);
}

/* The same for a tool library the core loads (a thesis-style tool's PMPI_X calls). */
QMPI_HIDDEN void qmpi_rebind_library_downward(void *handle, const char *what)
{
    struct link_map *map;
    struct qmpi_object object;

    if (qmpi_outer_defines_pmpi && dlinfo(handle, RTLD_DI_LINKMAP, &map) == 0 &&
        qmpi_loaded_at(map->l_ld, &object) == 0)
        qmpi_rebind_downward(&object, what);
    qmpi_check_neighbours();
}

/* At the first MPI call, where stopping the job is possible: a PMPI_ call of the core or
 * of a tool that would go back up into the chain is no job to run. */
QMPI_HIDDEN void qmpi_check_neighbours(void)
{
    if (qmpi_downward_failure[0] != '\0')
        qmpi_fatalf("%s", qmpi_downward_failure);
}

/* The rank the launcher gave this process, as far as its environment says (no MPI call
 * tells before MPI_Init): -1 for none (a launcher, a singleton, no MPI at all). */
static int qmpi_launcher_rank(void)
{
    static const char *const names[] = {"PMI_RANK", "PMIX_RANK", "OMPI_COMM_WORLD_RANK", "MV2_COMM_WORLD_RANK",
                                        "SLURM_PROCID"};
    size_t i;

    for (i = 0; i < sizeof names / sizeof *names; i++) {
        const char *value = getenv(names[i]);
        if (value != NULL && *value != '\0')
            return strcmp(value, "0") == 0 ? 0 : 1;
    }
    return -1;
}

QMPI_HIDDEN int qmpi_launched(void)
{
    return qmpi_launcher_rank() >= 0;
}

/* Lines said before MPI is initialised: by the process the launcher made rank 0, else
 * (no launcher) by the process itself. */
static int qmpi_launcher_rank_zero(void)
{
    return qmpi_launcher_rank() <= 0;
}

QMPI_HIDDEN void qmpi_warn_once_per_job(const char *format, ...)
{
    va_list args;

    if (!qmpi_launcher_rank_zero())
        return;
    va_start(args, format);
    qmpi_write_warning(format, args);
    va_end(args);
}

/* What the constructor found to say: said at the first MPI call, or, in a process whose
 * MPI calls never reach the core, when it exits having used MPI (a launcher that loads
 * the core too stays silent). */
static char qmpi_load_notes[2][QMPI_WHY + 512];
static int qmpi_notes_said;

static void qmpi_note(const char *format, ...) __attribute__((format(printf, 1, 2)));
static void qmpi_note(const char *format, ...)
{
    va_list args;
    int k;

    for (k = 0; k < 2 && qmpi_load_notes[k][0] != '\0'; k++)
        ;
    if (k == 2)
        return;
    va_start(args, format);
    vsnprintf(qmpi_load_notes[k], sizeof qmpi_load_notes[k], format, args);
    va_end(args);
}

QMPI_HIDDEN void qmpi_say_load_notes(void)
{
    int k;

    if (__atomic_exchange_n(&qmpi_notes_said, 1, __ATOMIC_ACQ_REL))
        return;
    for (k = 0; k < 2 && qmpi_load_notes[k][0] != '\0'; k++)
        qmpi_warn_once_per_job("%s", qmpi_load_notes[k]);
}

__attribute__((destructor)) static void qmpi_neighbours_at_exit(void)
{
    int used = 0;

    if (qmpi_load_notes[0][0] != '\0' && !qmpi_notes_said && PMPI_Initialized(&used) == MPI_SUCCESS && used)
        qmpi_say_load_notes();
}

__attribute__((constructor)) static void qmpi_neighbours_at_load(void)
{
    struct qmpi_survey survey;
    char why[QMPI_WHY];
    int k;

    qmpi_survey(&survey, 1);
    if (!survey.core_found)
        return;
    qmpi_core_object = survey.core;
    if (survey.mpi_ahead)
        qmpi_check_mpi_ahead(&survey.mpi[0]);
    if (survey.mpi_ahead)
        qmpi_note("%s is loaded ahead of the QMPI core (%s): the application's MPI calls reach the MPI directly and "
                  "no tool runs; link -lqmpi before the MPI library, or preload libqmpi.so",
                  survey.mpi[0].name[0] ? survey.mpi[0].name : "the program's MPI",
                  survey.core.name[0] ? survey.core.name : "the program");
    for (k = 0; k < survey.nouter; k++) {
        if (qmpi_loaded_rebind(&survey.outer[k], qmpi_outer_target, NULL, why) != 0) {
            qmpi_note("%s, preloaded ahead of the QMPI core, defines MPI functions but its calls cannot be made to "
                      "enter the chain (%s): they skip every tool; list it in TOOLS instead",
                      survey.outer[k].name[0] ? survey.outer[k].name : "the program", why);
            continue;
        }
        qmpi_outer[qmpi_nouter++] = survey.outer[k];
        qmpi_outer_defines_pmpi |= qmpi_loaded_count(&survey.outer[k], qmpi_is_c_pmpi) > 0;
    }
    qmpi_rebind_downward(&qmpi_core_object, "the QMPI core");
}

/* ---- at the first MPI call: inner tools ---- */

static char qmpi_inner[1024];

/* The MPI_X of a tool after the core, as what the core's own PMPI_X references are to
 * reach: every end of the chain, and the calls with no tools, call it instead of the
 * MPI's; it calls PMPI_X, which reaches the MPI. NULL: the MPI's own. */
static void *qmpi_inner_target(const char *name, const ElfW(Sym) * symbol, void *data)
{
    const struct qmpi_survey *survey = (const struct qmpi_survey *)data;
    int index = strncmp(name, "PMPI_", 5) == 0 ? qmpi_function_index(name + 1) : -1;
    void *next;
    int k;

    if (symbol->st_shndx != SHN_UNDEF || index < 0 || qmpi_entries[index] == NULL)
        return NULL;
    if (survey->nmpi > 0 && qmpi_loaded_lookup(&survey->mpi[0], name) == NULL)
        return NULL; /* not the MPI library's: provided beside it (qmpi_is_wrappable), not wrapped */
    next = dlsym(RTLD_NEXT, name + 1);
    if (next == NULL || qmpi_in(&survey->core, next))
        return NULL;
    for (k = 0; k < survey->nmpi && k < 2; k++)
        if (qmpi_in(&survey->mpi[k], next))
            return NULL; /* the MPI's own MPI_X, the same function as its PMPI_X */
    if (qmpi_inner[0] == '\0') {
        Dl_info where;
        snprintf(qmpi_inner, sizeof qmpi_inner, "%s",
                 dladdr(next, &where) && where.dli_fname != NULL ? where.dli_fname : "a library");
    }
    return next;
}

/* The core's own questions to the MPI (the chain report's rank) are none of the tool's:
 * they go to the MPI library itself. */
QMPI_HIDDEN int (*qmpi_own_comm_rank)(MPI_Comm comm, int *rank);

QMPI_HIDDEN void qmpi_follow_inner(const struct qmpi_survey *survey)
{
    char why[QMPI_WHY];

    if (survey->inner && survey->nmpi > 0)
        *(void **)&qmpi_own_comm_rank = qmpi_loaded_lookup(&survey->mpi[0], "PMPI_Comm_rank");
    if (survey->inner && qmpi_loaded_rebind(&survey->core, qmpi_inner_target, (void *)survey, why) != 0)
        qmpi_fatalf("the QMPI core (%s): cannot make its calls reach the PMPI tool preloaded after it: %s",
                    survey->core.name[0] ? survey->core.name : "the program", why);
}

/* The tool after the core, for the chain report, or "". */
QMPI_HIDDEN void qmpi_inner_names(char *out, size_t size)
{
    snprintf(out, size, "%s", qmpi_inner);
}

/* The outer tools, for the chain report: their names joined, or "". */
QMPI_HIDDEN void qmpi_outer_names(char *out, size_t size)
{
    size_t used = 0;
    int k;

    out[0] = '\0';
    for (k = 0; k < qmpi_nouter && used < size; k++)
        used += (size_t)snprintf(out + used, size - used, "%s%s", k ? ", " : "",
                                 qmpi_outer[k].name[0] ? qmpi_outer[k].name : "the program");
}
