/* conf_parse: times the configuration file parser (the core's runtime/conf.c) on a
 * file of N sections, in one process per measurement (the parser's state is global).
 *
 *     conf_parse N FILE     writes FILE: N [sK] sections (tool = %t) and one
 *                           [stack default] naming them all; prints one JSON line,
 *                           {"sections": N, "bytes": B, "cpu_s": S, "wall_s": S}
 *
 * Built against the core's runtime (bench/Makefile): conf.c and errors.c need no MPI. */
#include "qmpi_runtime.h"

#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

void qmpi_stop_job(void)
{
    _exit(3); /* the parser refused the file: errors.c said why on stderr */
}

static double seconds(clockid_t clock)
{
    struct timespec now;
    clock_gettime(clock, &now);
    return (double)now.tv_sec + (double)now.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
    double cpu, wall;
    long n, k;
    FILE *out;
    int levels;

    if (argc != 3 || (n = strtol(argv[1], NULL, 10)) <= 0 || (out = fopen(argv[2], "w")) == NULL) {
        fprintf(stderr, "usage: conf_parse N FILE\n");
        return 2;
    }
    for (k = 0; k < n; k++)
        fprintf(out, "[s%ld]\ntool = %%t\n", k);
    fprintf(out, "[stack default]\ninstances = ");
    for (k = 0; k < n; k++)
        fprintf(out, k ? ", s%ld" : "s%ld", k);
    fprintf(out, "\n");
    fclose(out);

    cpu = seconds(CLOCK_PROCESS_CPUTIME_ID);
    wall = seconds(CLOCK_MONOTONIC);
    levels = qmpi_conf_read(argv[2]);
    cpu = seconds(CLOCK_PROCESS_CPUTIME_ID) - cpu;
    wall = seconds(CLOCK_MONOTONIC) - wall;
    if (levels != n)
        return 4;
    out = fopen(argv[2], "r");
    fseek(out, 0, SEEK_END);
    printf("{\"sections\": %ld, \"bytes\": %ld, \"cpu_s\": %.6f, \"wall_s\": %.6f}\n", n, ftell(out), cpu, wall);
    fclose(out);
    return 0;
}
