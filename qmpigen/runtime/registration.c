/* registration.c: callback tools register (seed 002, MPICH's QMPI_Register_*). The
 * parameter lists are the MPI's own where its mpi.h declares these (qmpi_internal.h). */
#define _GNU_SOURCE
#include "qmpi_internal.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

QMPI_HIDDEN pthread_mutex_t qmpi_registry_lock = PTHREAD_MUTEX_INITIALIZER;
QMPI_HIDDEN struct qmpi_registration *qmpi_registry;
QMPI_HIDDEN int qmpi_registered;
static int qmpi_registry_capacity;
QMPI_HIDDEN int qmpi_registration_closed;
QMPI_HIDDEN int qmpi_initializing = -1;
QMPI_HIDDEN void **qmpi_pending;
QMPI_HIDDEN __thread int qmpi_opening_tool;
/* What the constructor of that TOOLS entry tried to register: a callback tool named
 * by path, which the error about the entry then names in its one line. */
QMPI_HIDDEN char qmpi_refused_name[QMPI_MAX_TOOL_NAME_LENGTH];

/* Registration errors do not stop the job (the caller gets an error code), but a
 * constructor rarely looks at it, so they are said on stderr as well. */
QMPI_HIDDEN int qmpi_refuse(int code, const char *format, ...)
{
    va_list args;

    va_start(args, format);
    qmpi_write_error(format, args);
    va_end(args);
    return code;
}

int QMPI_Register_tool_name(QMPI_REGISTER_TOOL_NAME_PARAMS)
{
    int i, rc = MPI_SUCCESS;

    if (tool_name == NULL || *tool_name == '\0' || init_function_ptr == NULL)
        return qmpi_refuse(MPI_ERR_ARG, "QMPI_Register_tool_name: a tool needs a name and an init function");
    pthread_mutex_lock(&qmpi_registry_lock);
    if (qmpi_registration_closed && qmpi_opening_tool) {
        /* No line of its own: if the library is no thesis tool, the core's error about
         * its TOOLS entry names this tool (one line); if it is one, it just loads. */
        snprintf(qmpi_refused_name, sizeof qmpi_refused_name, "%s", tool_name);
        rc = MPI_ERR_OTHER;
        goto out;
    }
    if (qmpi_registration_closed) {
        rc = qmpi_refuse(
            MPI_ERR_OTHER,
            "QMPI_Register_tool_name(\"%.300s\") after MPI was initialized: refused (register from a constructor)",
            tool_name);
        goto out;
    }
    if (strlen(tool_name) >= QMPI_MAX_TOOL_NAME_LENGTH || strchr(tool_name, ':') != NULL) {
        rc = qmpi_refuse(MPI_ERR_ARG,
                         "QMPI_Register_tool_name(\"%.64s\"): names are shorter than %d characters and have no ':'",
                         tool_name, QMPI_MAX_TOOL_NAME_LENGTH);
        goto out;
    }
    for (i = 0; i < qmpi_registered; i++) {
        if (strcmp(qmpi_registry[i].name, tool_name) == 0) {
            rc = qmpi_refuse(MPI_ERR_ARG, "QMPI_Register_tool_name(\"%s\"): a tool of that name is registered already",
                             tool_name);
            goto out;
        }
    }
    if (qmpi_registered == qmpi_registry_capacity) {
        int capacity = qmpi_registry_capacity ? 2 * qmpi_registry_capacity : 8;
        struct qmpi_registration *grown = realloc(qmpi_registry, (size_t)capacity * sizeof *grown);
        if (grown == NULL) {
            rc = qmpi_refuse(MPI_ERR_NO_MEM, "QMPI_Register_tool_name(\"%s\"): out of memory", tool_name);
            goto out;
        }
        qmpi_registry = grown;
        qmpi_registry_capacity = capacity;
    }
    qmpi_registry[qmpi_registered].name = strdup(tool_name);
    qmpi_registry[qmpi_registered].init = init_function_ptr;
    if (qmpi_registry[qmpi_registered].name == NULL)
        rc = qmpi_refuse(MPI_ERR_NO_MEM, "QMPI_Register_tool_name(\"%s\"): out of memory", tool_name);
    else
        qmpi_registered++;
out:
    pthread_mutex_unlock(&qmpi_registry_lock);
    return rc;
}

/* The enumeration index of a callback enum value, or -1 (bounds-checked). */
QMPI_HIDDEN int qmpi_forum_index(int function_enum)
{
    if (function_enum < 0 || function_enum >= MPI_LAST_FUNC_T)
        return -1;
    return qmpi_forum_slot[function_enum] - 1;
}

int QMPI_Register_tool_storage(QMPI_REGISTER_TOOL_STORAGE_PARAMS)
{
    if (tool_id != qmpi_initializing || tool_id <= 0)
        return qmpi_refuse(MPI_ERR_OTHER, "QMPI_Register_tool_storage(%d): only from that tool's init function",
                           tool_id);
    qmpi_storage[tool_id] = tool_storage;
    return MPI_SUCCESS;
}

int QMPI_Register_function(QMPI_REGISTER_FUNCTION_PARAMS)
{
    int index = qmpi_forum_index(function_enum);

    if (calling_tool_id != qmpi_initializing || calling_tool_id <= 0)
        return qmpi_refuse(MPI_ERR_OTHER, "QMPI_Register_function(%d, %d): only from that tool's init function",
                           calling_tool_id, function_enum);
    if (index < 0)
        return qmpi_refuse(MPI_ERR_ARG,
                           "QMPI_Register_function(%d, %d): not a function this core intercepts (0..%d, %s)",
                           calling_tool_id, function_enum, MPI_LAST_FUNC_T - 1, QMPI_MPI_LIBRARY);
    if (function_ptr == NULL)
        return qmpi_refuse(MPI_ERR_ARG, "QMPI_Register_function(%d, %s): NULL function", calling_tool_id,
                           QMPI_Function_name(index));
    qmpi_pending[index] = *(void **)&function_ptr;
    return MPI_SUCCESS;
}

/* O(1): the calling level's table holds the next link in the callback convention. */
int QMPI_Get_function(QMPI_GET_FUNCTION_PARAMS)
{
    int index = qmpi_forum_index(function_enum);
    const cell *link;

    if (calling_tool_id <= 0 || calling_tool_id >= qmpi_chain.total ||
        qmpi_levels[calling_tool_id].kind != QMPI_CALLBACK_LEVEL || qmpi_chain.items[calling_tool_id]->table == NULL)
        return qmpi_refuse(MPI_ERR_ARG, "QMPI_Get_function: %d is not the id of a callback tool in the chain",
                           calling_tool_id);
    if (index < 0)
        return qmpi_refuse(MPI_ERR_ARG, "QMPI_Get_function(%d, %d): not a function this core intercepts (0..%d)",
                           calling_tool_id, function_enum, MPI_LAST_FUNC_T - 1);
    link = &qmpi_chain.items[calling_tool_id]->table[index];
    *(void **)function_ptr = link->func_ptr;
    *next_tool_id = link->level;
    return MPI_SUCCESS;
}

int QMPI_Get_tool_storage(QMPI_GET_TOOL_STORAGE_PARAMS)
{
    if (tool_id <= 0 || tool_id >= qmpi_chain.total || context.storage_stack == NULL)
        return qmpi_refuse(MPI_ERR_ARG, "QMPI_Get_tool_storage: %d is not the id of a tool in the chain", tool_id);
    *storage = context.storage_stack[tool_id];
    return MPI_SUCCESS;
}

/* The return address of the application's MPI call that entered the chain. */
int QMPI_Get_calling_address(QMPI_GET_CALLING_ADDRESS_PARAMS)
{
    (void)context;
    if (address == NULL)
        return MPI_ERR_ARG;
    *address = qmpi_call_site;
    return MPI_SUCCESS;
}

/* The variadic tail of the call the core is handing to a callback tool right now
 * (MPI_Pcontrol's); NULL outside such a call. A qmpigen extension: see qmpi.h. */
int QMPI_Get_variadic_args(QMPI_Context context, va_list **args)
{
    (void)context;
    if (args == NULL)
        return MPI_ERR_ARG;
    *args = qmpi_variadic_tail;
    return MPI_SUCCESS;
}
