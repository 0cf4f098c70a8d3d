/* say.c: the trace tool's lines on stderr (say.h). */
#include "say.h"
#include "options.h"
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <unistd.h>

#define LINE_MAX_BYTES 1024

/* Writes `text` into `out` (room for 4 bytes per byte), every byte outside printable ASCII
 * as \xHH; returns the bytes written. */
static size_t escape(char *out, const char *text, size_t length)
{
    static const char hex[] = "0123456789abcdef";
    size_t i, n = 0;
    for (i = 0; i < length; i++) {
        unsigned char c = (unsigned char)text[i];
        if (c >= 0x20 && c < 0x7f) {
            out[n++] = (char)c;
            continue;
        }
        out[n++] = '\\';
        out[n++] = 'x';
        out[n++] = hex[c >> 4];
        out[n++] = hex[c & 15];
    }
    return n;
}

/* "PREFIX" and the formatted text, escaped, as one line in one write. */
static void say_line(const char *prefix, const char *format, va_list args)
{
    char text[LINE_MAX_BYTES], line[32 + 4 * LINE_MAX_BYTES + 1];
    int length = vsnprintf(text, sizeof text, format, args);
    size_t n = strlen(prefix);
    if (length < 0)
        return;
    if ((size_t)length >= sizeof text)
        length = (int)sizeof text - 1; /* cut: the line stays one line */
    memcpy(line, prefix, n);
    n += escape(line + n, text, (size_t)length);
    line[n++] = '\n';
    if (write(STDERR_FILENO, line, n) < 0)
        (void)0;
}

void trace_say(const char *format, ...)
{
    va_list args;
    va_start(args, format);
    say_line("qmpi trace: ", format, args);
    va_end(args);
}

/* "qmpi trace (level L, rank R...": the lines about one instance or thread. */
static void say_where(const char *format, ...) __attribute__((format(printf, 1, 2)));
static void say_where(const char *format, ...)
{
    va_list args;
    va_start(args, format);
    say_line("qmpi trace (", format, args);
    va_end(args);
}

void trace_complain(struct instance *in, const char *what, const char *path)
{
    const char *reason = strerror(errno);
    say_where("level %d, rank %d): %s %s: %s; tracing stops for this instance", in->level, in->rank, what, path,
              reason);
    __atomic_store_n(&in->active, 0, __ATOMIC_RELEASE);
}

void trace_say_thread(struct instance *in, int thread, const char *what, const char *name, uint64_t calls)
{
    const char *reason = strerror(errno);
    say_where("level %d, rank %d, thread %d): %s %s/%s: %s; tracing of this thread stops after %llu calls (the run "
              "goes on)",
              in->level, in->rank, thread, what, trace_options.dir, name, reason, (unsigned long long)calls);
}
