/* fuzz_stubs.c: the rest of the core for the fuzz harnesses. A fatal error returns to
 * the harness (longjmp) instead of ending the process, so that libFuzzer goes on. */
#include "../../qmpigen/runtime/qmpi_runtime.h"

#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

jmp_buf qmpi_fuzz_stop;

void qmpi_fatalf(const char *format, ...)
{
    char line[512];
    va_list args;

    va_start(args, format);
    vsnprintf(line, sizeof line, format, args); /* formats every argument, as the real one */
    va_end(args);
    longjmp(qmpi_fuzz_stop, 1);
}

void qmpi_fatal(const char *message)
{
    qmpi_fatalf("%s", message);
}

void *qmpi_alloc(size_t count, size_t size)
{
    void *memory = calloc(count ? count : 1, size ? size : 1);
    if (memory == NULL)
        qmpi_fatal("out of memory");
    return memory;
}

int qmpi_function_index(const char *name)
{
    static const char *const names[] = {"MPI_Init", "MPI_Finalize", "MPI_Send", "MPI_Recv", "MPI_Comm_rank"};
    size_t i;

    for (i = 0; i < sizeof names / sizeof *names; i++)
        if (strcmp(name, names[i]) == 0)
            return (int)i;
    return -1;
}

void qmpi_warnf(const char *format, ...)
{
    char line[512];
    va_list args;

    va_start(args, format);
    vsnprintf(line, sizeof line, format, args);
    va_end(args);
}

const char *qmpi_file_kind(unsigned int mode)
{
    (void)mode;
    return "not a regular file";
}
