/* options.c: the trace tool's options, from the environment (options.h). */
#include "options.h"
#include <stdlib.h>

struct trace_options trace_options;
static pthread_once_t options_once = PTHREAD_ONCE_INIT;

/* A buffer size: decimal digits only, within [BUFFER_MIN, BUFFER_MAX] (no sign, no
 * exponent, no wrap-around: the size goes to calloc), else 0. */
static size_t parse_buffer(const char *value)
{
    size_t bytes = 0;
    const char *p;
    if (*value == '\0')
        return 0;
    for (p = value; *p; p++) {
        if (*p < '0' || *p > '9' || bytes > BUFFER_MAX)
            return 0;
        bytes = bytes * 10 + (size_t)(*p - '0');
    }
    return bytes >= BUFFER_MIN && bytes <= BUFFER_MAX ? bytes : 0;
}

static void read_options(void)
{
    const char *value;
    trace_options.dir = (value = secure_getenv("QMPI_TRACE_DIR")) && *value ? value : "qmpi-trace";
    value = secure_getenv("QMPI_TRACE_FLUSH");
    trace_options.flush_every_record = value != NULL && strcmp(value, "record") == 0;
    trace_options.buffered = value != NULL && strcmp(value, "full") == 0;
    trace_options.verbose = (value = secure_getenv("QMPI_VERBOSE")) != NULL && *value && strcmp(value, "0") != 0;
    trace_options.nested = !((value = secure_getenv("QMPI_TRACE_NESTED")) && strcmp(value, "0") == 0);
    trace_options.all_functions = (value = secure_getenv("QMPI_TRACE_FUNCTIONS")) && strcmp(value, "all") == 0;
    trace_options.buffer_bytes = BUFFER_DEFAULT;
    if ((value = secure_getenv("QMPI_TRACE_BUFFER")) != NULL) {
        size_t bytes = parse_buffer(value);
        if (bytes)
            trace_options.buffer_bytes = bytes;
        else
            trace_options.bad_buffer = value;
    }
}

void trace_options_once(void)
{
    pthread_once(&options_once, read_options);
}
