/* chain.c: the chain's state, and building it on the first MPI call: each level's
 * table, callback tools' init functions, bottom-up. */
#define _GNU_SOURCE
#include "qmpi_internal.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

QMPI_HIDDEN int qmpi_state = QMPI_UNBUILT;
QMPI_HIDDEN vector qmpi_chain;
QMPI_HIDDEN cell *qmpi_top;
QMPI_HIDDEN struct qmpi_level *qmpi_levels;
QMPI_HIDDEN void **qmpi_storage;
QMPI_HIDDEN __thread void *qmpi_call_site __attribute__((tls_model("initial-exec")));
QMPI_HIDDEN __thread va_list *qmpi_variadic_tail __attribute__((tls_model("initial-exec")));
QMPI_HIDDEN __thread const struct qmpi_call *qmpi_current_call __attribute__((tls_model("initial-exec")));
QMPI_HIDDEN int qmpi_recording;

/* What tools reach through their chain (qmpi.h's struct qmpi_services). */
static const struct qmpi_services qmpi_services = {qmpi_fatal,        qmpi_set_context,  qmpi_bad_exec,
                                                   qmpi_init_context, qmpi_get_argument, qmpi_argument_error};

static pthread_mutex_t qmpi_build_lock = PTHREAD_MUTEX_INITIALIZER;
static __thread int qmpi_building; /* this thread is loading tools right now */

/* Fills the table of `level`: for every function, the first level below it that
 * intercepts the function (`next[i]`, or the end of the chain), in the calling
 * convention of `level` itself. No holes (thesis figure 3.1), and each cell carries
 * the level its target runs at, so a wrapper calling another MPI function through
 * its own table continues the chain below itself (figure 2.2). */
/* The function that runs `target`'s link for function i, called in the thesis or the
 * callback convention (`end`: the end of the chain, PMPI). */
static void *qmpi_link_in_form(int target, int i, int end, int callback)
{
    if (target == end)
        return qmpi_end_link(i, callback);
    if (callback)
        return qmpi_levels[target].kind == QMPI_CALLBACK_LEVEL ? qmpi_levels[target].native[i]
                                                               : qmpi_thesis_as_callback[i];
    return qmpi_thesis_form(target, i);
}

static void qmpi_fill_table(int level, const int *next, int end)
{
    cell *table = qmpi_chain.items[level]->table;
    int callback = qmpi_levels[level].kind == QMPI_CALLBACK_LEVEL;
    int i;

    for (i = 0; i < NUM_MPI_FUNCS; i++) {
        table[i].level = next[i]; /* the end: qmpi_chain.total, whichever stack */
        table[i].func_ptr = qmpi_link_in_form(next[i], i, end, callback);
    }
}

/* Switching for callback tools (qmpigen extension): QMPI_Get_function's answer for the
 * top of `stack` (a handle from QMPI_Stack_lookup) instead of the caller's next link.
 * Misuse stops the job: the wrapper asking has no function to call. */
int QMPI_Get_stack_function(int calling_tool_id, int stack, int function_enum, void (**function_ptr)(void),
                            int *next_tool_id)
{
    int index = qmpi_forum_index(function_enum), s = qmpi_stack_holding(stack), target;

    if (calling_tool_id <= 0 || calling_tool_id >= qmpi_chain.total ||
        qmpi_levels[calling_tool_id].kind != QMPI_CALLBACK_LEVEL)
        qmpi_fatalf("QMPI_Get_stack_function: %d is not the id of a callback tool in the chain", calling_tool_id);
    if (index < 0)
        qmpi_fatalf("QMPI_Get_stack_function(%d, %d, %d): not a function this core intercepts (0..%d)", calling_tool_id,
                    stack, function_enum, MPI_LAST_FUNC_T - 1);
    if (s < 0 || qmpi_stacks[s].top != stack)
        qmpi_fatalf("QMPI_Get_stack_function(%d, %d, %s): %d is not a stack's handle (the stacks: %s)", calling_tool_id,
                    stack, QMPI_Function_name(index), stack, QMPI_Stack_names());
    if (qmpi_stack_holding(calling_tool_id) == s)
        qmpi_fatalf("QMPI_Get_stack_function(%d, %d, %s): tool %d is on stack %s: the call would come back to it",
                    calling_tool_id, stack, QMPI_Function_name(index), calling_tool_id, qmpi_stacks[s].name);
    target = qmpi_chain.items[stack]->table[index].level;
    *(void **)function_ptr = qmpi_link_in_form(target, index, qmpi_chain.total, 1);
    *next_tool_id = target;
    return MPI_SUCCESS;
}

/* Runs a callback tool's init function with its tables ready, so it may already
 * ask QMPI_Get_function for its next links (levels are initialised bottom-up). */
static void qmpi_init_callback_level(int level, const struct qmpi_registration *tool, void ***shared)
{
    void **functions = (void **)qmpi_alloc(NUM_MPI_FUNCS, sizeof *functions);

    qmpi_pending = functions;
    qmpi_initializing = level;
    tool->init(level);
    qmpi_initializing = -1;
    qmpi_pending = NULL;
    /* Instances of one tool usually register the same functions: share one copy. */
    if (*shared != NULL && memcmp(*shared, functions, NUM_MPI_FUNCS * sizeof *functions) == 0) {
        free(functions);
        functions = *shared;
    }
    *shared = functions;
    qmpi_levels[level].native = functions;
}

/* A PMPI tool's wrapper names, as thesis-style tools give theirs: "MPI_Send". */
static const char **qmpi_pmpi_names(void **wrappers)
{
    const char **names = (const char **)qmpi_alloc(NUM_MPI_FUNCS, sizeof *names);
    int i;
    for (i = 0; i < NUM_MPI_FUNCS; i++)
        names[i] = wrappers[i] != NULL ? QMPI_Function_name(i) : NULL;
    return names;
}

/* Loads the tool of one TOOLS / list / QMPI_CONF entry at `level`. */
static void qmpi_load_level(struct qmpi_entry *entry, int level, struct dynamic_lib *tool,
                            struct qmpi_library *libraries, int *distinct, int *pmpi_slots, void **no_functions,
                            const struct qmpi_registration **registration)
{
    const int *declared_thread_level;
    int d;

    tool->path = entry->text;
    if (entry->stack_top) { /* a named stack's top: a core level, like level 0 */
        qmpi_levels[level].kind = QMPI_THESIS_LEVEL;
        qmpi_levels[level].native = no_functions;
        return;
    }
    if (entry->callback) {
        registration[level] = qmpi_registered_tool(entry);
        if (registration[level] == NULL)
            qmpi_unknown_tool(entry);
        qmpi_levels[level].kind = QMPI_CALLBACK_LEVEL;
        return;
    }
    if (entry->text[0] == '%') {
        qmpi_load_static_tool(entry, level, libraries, distinct);
        return;
    }
    qmpi_check_tool_file(entry); /* before anything opens it */
    if (qmpi_load_pmpi_tool(entry, level, pmpi_slots)) {
        tool->mpi_interceptions = qmpi_pmpi_names(qmpi_levels[level].native);
        return;
    }
    qmpi_refused_name[0] = '\0';
    qmpi_opening_tool = 1;
    tool->handle = dlopen(tool->path, RTLD_NOW | RTLD_LOCAL);
    qmpi_opening_tool = 0;
    if (tool->handle == NULL)
        qmpi_fatalf("%s entry %d (%s): cannot load: %s", entry->where, entry->position, tool->path, dlerror());
    /* A repeated path is one library (dlopen returns the same handle) but a new
     * instance: resolve its wrappers once, give the instance its own table. */
    for (d = 0; d < *distinct && libraries[d].handle != tool->handle; d++)
        ;
    if (d == *distinct) {
        libraries[d].handle = tool->handle;
        qmpi_resolve(&libraries[d], entry);
        qmpi_rebind_library_downward(tool->handle, tool->path);
        ++*distinct;
    }
    tool->mpi_interceptions = libraries[d].names;
    qmpi_levels[level].kind = QMPI_THESIS_LEVEL;
    qmpi_levels[level].native = libraries[d].wrappers;
    declared_thread_level = (const int *)dlsym(tool->handle, "qmpi_thread_level");
    if (declared_thread_level != NULL)
        QMPI_Set_thread_level(level, *declared_thread_level);
}

/* Bottom-up: the table of each level from the levels below it, then (callback tools)
 * its init function, then it becomes the next link of the levels above. Each stack
 * ends in PMPI (`end`), but the functions of qmpi_every_stack, which pass through every
 * stack. */
static void qmpi_link_levels(int count, int end, const struct qmpi_registration **registration, void ***shared)
{
    int *next = (int *)qmpi_alloc(NUM_MPI_FUNCS, sizeof *next);
    int level, i, s;

    for (i = 0; i < NUM_MPI_FUNCS; i++)
        next[i] = end;
    for (s = qmpi_stack_count - 1; s >= 0; s--) {
        const struct qmpi_stack *stack = &qmpi_stacks[s];
        for (i = 0; i < NUM_MPI_FUNCS; i++)
            if (!qmpi_every_stack[i])
                next[i] = end;
        for (level = stack->top + stack->count; level >= stack->top; level--) {
            qmpi_fill_table(level, next, end);
            if (level == stack->top)
                break;
            if (qmpi_levels[level].kind == QMPI_CALLBACK_LEVEL) {
                int r = (int)(registration[level] - qmpi_registry);
                qmpi_init_callback_level(level, registration[level], &shared[r]);
            }
            for (i = 0; i < NUM_MPI_FUNCS; i++)
                if (qmpi_levels[level].native[i] != NULL)
                    next[i] = level;
        }
    }
    for (level = 1; level <= count; level++) /* PMPI tools' calls now continue below them */
        if (qmpi_levels[level].kind == QMPI_PMPI_LEVEL)
            qmpi_pmpi_tables[qmpi_levels[level].pmpi->slot] = qmpi_chain.items[level]->table;
    free(next);
}

static int qmpi_load_tools(void)
{
    const char *tools_where = NULL;
    const char *tools = qmpi_tools_variable(&tools_where);
    const char *list_where = NULL;
    const char *list = qmpi_tool_list(&list_where);
    struct qmpi_entry *entries;
    struct dynamic_lib *instances;
    struct qmpi_library *libraries;
    const struct qmpi_registration **registration;
    void ***shared;
    cell *cells;
    int from_tools = 0, from_list = 0, from_conf = 0, count, levels, distinct = 0, pmpi_slots = 0, level;
    void **no_functions;

    if (qmpi_conf_variable() != NULL) /* QMPI_CONF wins: the others are not read */
        from_conf = qmpi_conf_stack(&tools, tools_where, &list, list_where);
    if (tools != NULL && *tools != '\0')
        from_tools = qmpi_split(tools, tools_where, 0, NULL);
    if (list != NULL)
        from_list = qmpi_split(list, list_where, 1, NULL);
    pthread_mutex_lock(&qmpi_registry_lock);
    qmpi_registration_closed = 1; /* from here on the set of tools is fixed */
    pthread_mutex_unlock(&qmpi_registry_lock);
    count = from_tools + from_list + from_conf;
    if (!from_conf)
        qmpi_stacks[0].count = count; /* the default stack, the only one */
    qmpi_verbose = qmpi_flag("QMPI_VERBOSE");
    if (count == 0 && !qmpi_verbose)
        return QMPI_DIRECT;
    if (!qmpi_conf_file)
        snprintf(qmpi_chain_sources, sizeof qmpi_chain_sources, "%s%s%s", from_tools ? tools_where : "",
                 from_tools && from_list ? " and " : "", from_list ? list_where : "");

    /* TOOLS first (closest to the application), then the callback tool list. */
    entries = (struct qmpi_entry *)qmpi_alloc((size_t)count + 1, sizeof *entries);
    if (from_tools)
        qmpi_split(tools, tools_where, 0, entries);
    if (from_list)
        qmpi_split(list, list_where, 1, entries + from_tools);
    if (from_conf)
        qmpi_conf_entries(entries);

    levels = count + 1; /* the core and the tools */
    instances = (struct dynamic_lib *)qmpi_alloc((size_t)levels, sizeof *instances);
    qmpi_chain.items = (struct dynamic_lib **)qmpi_alloc((size_t)levels, sizeof *qmpi_chain.items);
    qmpi_levels = (struct qmpi_level *)qmpi_alloc((size_t)levels, sizeof *qmpi_levels);
    qmpi_storage = (void **)qmpi_alloc((size_t)levels, sizeof *qmpi_storage);
    if ((size_t)levels > SIZE_MAX / NUM_MPI_FUNCS)
        qmpi_fatalf("QMPI: the chain is too long to allocate (%d tools)", count);
    cells = qmpi_alloc_cells((size_t)levels * NUM_MPI_FUNCS);
    libraries = (struct qmpi_library *)qmpi_alloc((size_t)count + 1, sizeof *libraries);
    registration = (const struct qmpi_registration **)qmpi_alloc((size_t)levels, sizeof *registration);
    shared = (void ***)qmpi_alloc((size_t)qmpi_registered + 1, sizeof *shared);
    no_functions = (void **)qmpi_alloc(NUM_MPI_FUNCS, sizeof *no_functions);
    qmpi_levels[0].native = no_functions;

    instances[0].path = (char *)"libqmpi";
    for (level = 0; level < levels; level++) {
        instances[level].table = cells + (size_t)level * NUM_MPI_FUNCS;
        qmpi_chain.items[level] = &instances[level];
    }
    qmpi_chain.capacity = levels;
    qmpi_chain.total = levels;
    qmpi_chain.qmpi = &qmpi_services;
    qmpi_chain.cells = cells;
    qmpi_chain.exec = qmpi_exec_entries;

    /* Load thesis-style and PMPI tools; find callback tools by name. */
    for (level = 1; level <= count; level++)
        qmpi_load_level(&entries[level - 1], level, &instances[level], libraries, &distinct, &pmpi_slots,
                        no_functions, registration);
    if (from_conf)
        qmpi_conf_check_arguments(count);
    qmpi_link_levels(count, levels, registration, shared);
    qmpi_top = instances[0].table;

    free(entries);
    free(libraries);
    free(registration);
    free(shared);
    return QMPI_CHAINED;
}

/* Called by an entry wrapper that finds the chain unbuilt: the first MPI call of
 * the process, whichever it is (MPI_Initialized before MPI_Init included). */
QMPI_HIDDEN int qmpi_build_chain(void)
{
    int state;

    if (qmpi_building)
        return QMPI_DIRECT; /* a tool's constructor or init called MPI while loading */
    pthread_mutex_lock(&qmpi_build_lock);
    state = qmpi_current_state();
    if (state == QMPI_UNBUILT) {
        struct qmpi_survey survey;
        qmpi_survey(&survey, 0);
        qmpi_check_mpi_library(&survey);
        qmpi_check_neighbours();
        qmpi_say_load_notes();
        qmpi_follow_inner(&survey); /* the chain ends in a PMPI tool preloaded after the core */
        qmpi_building = 1;
        qmpi_secure_notice(); /* tool variables ignored in a set-user-ID program: said once */
        state = qmpi_load_tools();
        qmpi_building = 0;
        __atomic_store_n(&qmpi_state, state, __ATOMIC_RELEASE);
    }
    pthread_mutex_unlock(&qmpi_build_lock);
    return state;
}
