/* options.h: the trace tool's options, from the environment (lifecycle.c documents them). */
#ifndef QMPI_TRACE_OPTIONS_H
#define QMPI_TRACE_OPTIONS_H
#include "state.h"

#define BUFFER_DEFAULT ((size_t)1 << 20)
#define BUFFER_MIN ((size_t)4096)
#define BUFFER_MAX ((size_t)1 << 30)

/* The options, read once per process (secure_getenv: a setuid or setgid program ignores
 * them); every entry point calls it first. */
HIDDEN void trace_options_once(void);

#endif
