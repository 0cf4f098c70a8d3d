/* chain_report.c: QMPI_VERBOSE, the chain said once. The end links that call it are
 * generated (qmpi_links.c): which functions start MPI is the MPI's. */
#define _GNU_SOURCE
#include "qmpi_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* QMPI_VERBOSE set to anything but "" or "0": world rank 0 prints the chain once, on
 * stderr. Before MPI is initialised there is no rank, so the end links of the
 * functions that initialise MPI report it, right after PMPI returns: the rank of
 * MPI_COMM_WORLD after MPI_Init/MPI_Init_thread, the rank in the "mpi://WORLD" process
 * set after MPI_Session_init. With the variable unset nothing of this is reached. */
QMPI_HIDDEN int qmpi_verbose;
static int qmpi_chain_reported;
QMPI_HIDDEN char qmpi_chain_sources[4400];

static int qmpi_level_functions(int level)
{
    int i, count = 0;
    for (i = 0; i < NUM_MPI_FUNCS; i++)
        count += qmpi_levels[level].native[i] != NULL;
    return count;
}

/* How the chain report names a level's kind. */
static void qmpi_print_kind(FILE *out, int level)
{
    const struct qmpi_pmpi_copy *copy = qmpi_levels[level].pmpi;
    if (qmpi_levels[level].kind == QMPI_CALLBACK_LEVEL)
        fputs("callback", out);
    else if (qmpi_levels[level].kind == QMPI_PMPI_LEVEL)
        fprintf(out, "PMPI tool, private copy, slot %d (%cMPI_, loaded in %.2f ms)", copy->slot + 1,
                qmpi_pmpi_letters[copy->slot], copy->load_ms);
    else
        fputs("thesis-style", out);
}

/* User-supplied text (paths, QMPI_CONF's value), escaped as in error lines (errors.c). */
static const char *qmpi_escaped(const char *text, char **buffer)
{
    size_t length = strlen(text);

    free(*buffer);
    *buffer = length < SIZE_MAX / 4 ? (char *)malloc(4 * length + 1) : NULL;
    if (*buffer == NULL)
        return "(out of memory)";
    (*buffer)[qmpi_escape(*buffer, text, length)] = '\0';
    return *buffer;
}

static void qmpi_report_chain(int rank)
{
    int tools = qmpi_chain.total - qmpi_stack_count, levels = qmpi_chain.total - 1, level, s = 0;
    char *text = NULL, *escaped = NULL, neighbours[1024];
    size_t size = 0;
    FILE *out;

    if (rank != 0 || __atomic_exchange_n(&qmpi_chain_reported, 1, __ATOMIC_ACQ_REL))
        return;
    out = open_memstream(&text, &size);
    if (out == NULL)
        return;
    if (qmpi_verbose && tools == 0 && qmpi_chain_sources[0] == '\0')
        fprintf(out, "qmpi: chain: no tools listed in QMPI_TOOLS, TOOLS or QMPI_TOOL_LIST; %s, enumeration %s\n",
                QMPI_MPI_LIBRARY, QMPI_ENUM_HASH);
    else if (qmpi_verbose)
        fprintf(out, "qmpi: chain: %d tool%s from %s; %s, enumeration %s\n", tools, tools == 1 ? "" : "s",
                qmpi_escaped(qmpi_chain_sources, &escaped), QMPI_MPI_LIBRARY, QMPI_ENUM_HASH);
    qmpi_outer_names(neighbours, sizeof neighbours);
    if (qmpi_verbose && neighbours[0] != '\0')
        fprintf(out, "qmpi: ahead of the chain: %s, preloaded ahead of the core: their PMPI_ calls enter it\n",
                qmpi_escaped(neighbours, &escaped));
    for (level = 1; level <= levels && qmpi_verbose; level++) {
        const char *path = qmpi_chain.items[level]->path;
        int kind = qmpi_levels[level].kind, instance = 1, below;
        if (qmpi_stack_count > 1 && level == 1)
            fprintf(out, "qmpi: stack default (top 0, the application's calls): %d tool%s\n", qmpi_stacks[0].count,
                    qmpi_stacks[0].count == 1 ? "" : "s");
        if (s + 1 < qmpi_stack_count && level == qmpi_stacks[s + 1].top) {
            s++;
            fprintf(out, "qmpi: stack %s (top %d): %d tool%s\n", qmpi_stacks[s].name, level, qmpi_stacks[s].count,
                    qmpi_stacks[s].count == 1 ? "" : "s");
            continue;
        }
        for (below = 1; below < level; below++)
            instance += qmpi_levels[below].kind == kind && strcmp(qmpi_chain.items[below]->path, path) == 0;
        fprintf(out, "qmpi: level %d: %s%s, ", level, kind == QMPI_CALLBACK_LEVEL ? "@" : "",
                qmpi_escaped(path, &escaped));
        qmpi_print_kind(out, level);
        int functions = qmpi_level_functions(level);
        fprintf(out, ", instance %d, intercepts %d function%s\n", instance, functions, functions == 1 ? "" : "s");
    }
    qmpi_inner_names(neighbours, sizeof neighbours);
    if (qmpi_verbose && neighbours[0] != '\0')
        fprintf(out, "qmpi: level %d: %s, preloaded after the core: its MPI_ functions end the chain, then PMPI "
                     "(%s)%s\n",
                levels + 1, qmpi_escaped(neighbours, &escaped), QMPI_MPI_LIBRARY,
                qmpi_stack_count > 1 ? ", the end of every stack" : "");
    else if (qmpi_verbose)
        fprintf(out, "qmpi: level %d: PMPI (%s)%s\n", levels + 1, QMPI_MPI_LIBRARY,
                qmpi_stack_count > 1 ? ", the end of every stack" : "");
    /* Said whether or not QMPI_VERBOSE is set: the tool works, but not as it would alone. */
    for (level = 1; level <= levels; level++)
        if (qmpi_levels[level].kind == QMPI_PMPI_LEVEL && qmpi_levels[level].pmpi->symbolic)
            fprintf(out,
                    "qmpi: warning: level %d (%s): a PMPI tool linked with -Bsymbolic or with protected MPI_ "
                    "symbols: its own calls of the MPI functions it defines stay inside it and skip the %d "
                    "level%s above it\n",
                    level, qmpi_escaped(qmpi_chain.items[level]->path, &escaped), level - 1, level == 2 ? "" : "s");
    if (fclose(out) == 0 && size > 0 && write(STDERR_FILENO, text, size) < 0) /* one write: no interleaving */
        (void)0;
    free(text);
    free(escaped);
}

QMPI_HIDDEN int qmpi_world_rank(void)
{
    int rank = -1;
    if (qmpi_own_comm_rank != NULL) /* not the tool's after the core (neighbours.c) */
        qmpi_own_comm_rank(MPI_COMM_WORLD, &rank);
    else
        PMPI_Comm_rank(MPI_COMM_WORLD, &rank);
    return rank;
}

QMPI_HIDDEN void qmpi_report_chain_world(void)
{
    int rank = qmpi_world_rank();
    if (rank >= 0)
        qmpi_report_chain(rank);
}

#ifdef QMPI_SESSION_REPORT
/* The rank in the "mpi://WORLD" process set (MPI 4.0 sessions). */
QMPI_HIDDEN void qmpi_report_chain_session(MPI_Session session)
{
    MPI_Group world;
    int rank = -1;
    if (PMPI_Group_from_session_pset(session, "mpi://WORLD", &world) != MPI_SUCCESS)
        return;
    if (PMPI_Group_rank(world, &rank) == MPI_SUCCESS)
        qmpi_report_chain(rank);
    PMPI_Group_free(&world);
}
#endif
