/* files.h: the trace directory and the rank files in it. */
#ifndef QMPI_TRACE_FILES_H
#define QMPI_TRACE_FILES_H
#include "state.h"

/* The trace directory, created if missing and checked (files.c); 0 if it is usable, else
 * one line and the instance stays off. */
HIDDEN int trace_open_dir(struct instance *in);
/* A thread's rank file, created (never an existing file); its descriptor, and its name
 * (malloc'd) in *name; -1 and one line if it cannot be. */
HIDDEN int trace_create_file(struct instance *in, int thread, char **name);

#endif
