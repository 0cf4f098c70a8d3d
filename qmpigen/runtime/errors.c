/* errors.c: the core's one error line, and allocation that stops the job when it fails.
 * Needs no MPI: stopping the job is stop_job.c's. */
#define _GNU_SOURCE
#include "qmpi_runtime.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

QMPI_HIDDEN void qmpi_fatal(const char *message)
{
    qmpi_fatalf("%s", message);
}

/* The length of the valid UTF-8 sequence of a printable character at `text`, 0 if
 * there is none (a control character, C1 included, or a byte that is not UTF-8). */
static size_t qmpi_printable_length(const unsigned char *text, size_t length)
{
    unsigned char c = text[0], low = 0x80, high = 0xbf;
    size_t need, i;

    if (c >= 0x20 && c < 0x7f)
        return 1;
    if (c >= 0xc2 && c <= 0xdf)
        need = 1;
    else if (c >= 0xe0 && c <= 0xef)
        need = 2;
    else if (c >= 0xf0 && c <= 0xf4)
        need = 3;
    else
        return 0; /* controls, DEL, continuation bytes, overlong leads, beyond U+10FFFF */
    if (need >= length)
        return 0;
    if (c == 0xe0)
        low = 0xa0; /* overlong */
    else if (c == 0xed)
        high = 0x9f; /* surrogates */
    else if (c == 0xf0)
        low = 0x90; /* overlong */
    else if (c == 0xf4)
        high = 0x8f; /* beyond U+10FFFF */
    if (text[1] < low || text[1] > high)
        return 0;
    for (i = 2; i <= need; i++)
        if (text[i] < 0x80 || text[i] > 0xbf)
            return 0;
    if (c == 0xc2 && text[1] < 0xa0)
        return 0; /* C1 controls, U+0080..U+009F */
    return need + 1;
}

/* Writes every byte that is not part of a printable UTF-8 character as \xHH: a newline
 * in TOOLS must not split the line, nor a path's raw bytes reach the terminal.
 * `out` has room for 4 bytes per byte of `text`. */
QMPI_HIDDEN size_t qmpi_escape(char *out, const char *text, size_t length)
{
    static const char hex[] = "0123456789abcdef";
    const unsigned char *in = (const unsigned char *)text;
    size_t written = 0, i = 0;

    while (i < length) {
        size_t n = qmpi_printable_length(in + i, length - i);
        if (n == 0) {
            out[written++] = '\\';
            out[written++] = 'x';
            out[written++] = hex[in[i] >> 4];
            out[written++] = hex[in[i] & 15];
            i++;
            continue;
        }
        memcpy(out + written, in + i, n);
        written += n;
        i += n;
    }
    return written;
}

/* The one writer of the core's lines: "<prefix><message>" on stderr, escaped, in one
 * write, so lines of different ranks do not interleave. */
static void qmpi_write_line(const char *prefix, const char *format, va_list args)
{
    size_t prefix_length = strlen(prefix);
    va_list again;
    int length;
    char *message = NULL, *line = NULL;

    va_copy(again, args); /* vsnprintf consumes a va_list: one to measure, one to print */
    length = vsnprintf(NULL, 0, format, args);
    if (length >= 0 && (size_t)length < (SIZE_MAX - prefix_length - 2) / 4) {
        message = malloc((size_t)length + 1);
        line = malloc(prefix_length + 4 * (size_t)length + 1); /* prefix, escaped message, '\n' */
    }
    if (message != NULL && line != NULL) {
        size_t size = prefix_length;

        vsnprintf(message, (size_t)length + 1, format, again);
        memcpy(line, prefix, size);
        size += qmpi_escape(line + size, message, (size_t)length);
        line[size++] = '\n';
        if (write(STDERR_FILENO, line, size) < 0)
            (void)0;
    } else {
        fprintf(stderr, "%s(message lost: out of memory)\n", prefix);
    }
    va_end(again);
    free(message);
    free(line);
}

QMPI_HIDDEN void qmpi_write_error(const char *format, va_list args)
{
    qmpi_write_line("qmpi: error: ", format, args);
}

QMPI_HIDDEN void qmpi_write_warning(const char *format, va_list args)
{
    qmpi_write_line("qmpi: warning: ", format, args);
}

/* A line that does not stop the job: "qmpi: warning: ...". */
QMPI_HIDDEN void qmpi_warnf(const char *format, ...)
{
    va_list args;

    va_start(args, format);
    qmpi_write_line("qmpi: warning: ", format, args);
    va_end(args);
}

QMPI_HIDDEN void qmpi_fatalf(const char *format, ...)
{
    va_list args;

    va_start(args, format);
    qmpi_write_error(format, args);
    va_end(args);
    qmpi_stop_job();
}

/* What a file that is not a regular file is, for a refusal: "a FIFO". */
QMPI_HIDDEN const char *qmpi_file_kind(unsigned int mode)
{
    if (S_ISDIR(mode))
        return "a directory";
    if (S_ISFIFO(mode))
        return "a FIFO";
    if (S_ISCHR(mode))
        return "a character device";
    if (S_ISBLK(mode))
        return "a block device";
    if (S_ISSOCK(mode))
        return "a socket";
    return S_ISREG(mode) ? "a regular file" : "not a file";
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
