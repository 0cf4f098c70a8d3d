/* errors.c: the core's one error line, and allocation that stops the job when it fails.
 * Needs no MPI: stopping the job is stop_job.c's. */
#define _GNU_SOURCE
#include "qmpi_runtime.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

QMPI_HIDDEN void qmpi_fatal(const char *message)
{
    qmpi_fatalf("%s", message);
}

/* Writes control characters as \xHH: a newline in TOOLS must not split the line.
 * `out` has room for 4 bytes per byte of `text`. */
static size_t qmpi_escape_controls(char *out, const char *text, size_t length)
{
    static const char hex[] = "0123456789abcdef";
    size_t written = 0, i;

    for (i = 0; i < length; i++) {
        unsigned char c = (unsigned char)text[i];
        if (c < 0x20 || c == 0x7f) {
            out[written++] = '\\';
            out[written++] = 'x';
            out[written++] = hex[c >> 4];
            out[written++] = hex[c & 15];
        } else {
            out[written++] = (char)c;
        }
    }
    return written;
}

/* The one writer of the core's error lines: "qmpi: error: <message>" on stderr, in
 * one write, so lines of different ranks do not interleave. */
QMPI_HIDDEN void qmpi_write_error(const char *format, va_list args)
{
    static const char prefix[] = "qmpi: error: ";
    va_list again;
    int length;
    char *message = NULL, *line = NULL;

    va_copy(again, args); /* vsnprintf consumes a va_list: one to measure, one to print */
    length = vsnprintf(NULL, 0, format, args);
    if (length >= 0 && (size_t)length < (SIZE_MAX - sizeof prefix) / 4) {
        message = malloc((size_t)length + 1);
        line = malloc(sizeof prefix + 4 * (size_t)length); /* prefix, escaped message, '\n' */
    }
    if (message != NULL && line != NULL) {
        size_t size = sizeof prefix - 1;

        vsnprintf(message, (size_t)length + 1, format, again);
        memcpy(line, prefix, size);
        size += qmpi_escape_controls(line + size, message, (size_t)length);
        line[size++] = '\n';
        if (write(STDERR_FILENO, line, size) < 0)
            (void)0;
    } else {
        fputs("qmpi: error: (message lost: out of memory)\n", stderr);
    }
    va_end(again);
    free(message);
    free(line);
}

QMPI_HIDDEN void qmpi_fatalf(const char *format, ...)
{
    va_list args;

    va_start(args, format);
    qmpi_write_error(format, args);
    va_end(args);
    qmpi_stop_job();
}

/* calloc, or the job stops with a line that says what was too big. */
QMPI_HIDDEN void *qmpi_alloc(size_t count, size_t size)
{
    void *memory;
    if (size != 0 && count > SIZE_MAX / size)
        qmpi_fatalf("QMPI: the chain is too long to allocate (%zu x %zu bytes)", count, size);
    memory = calloc(count ? count : 1, size ? size : 1);
    if (memory == NULL)
        qmpi_fatalf("QMPI: out of memory allocating %zu x %zu bytes for the chain", count, size);
    return memory;
}
