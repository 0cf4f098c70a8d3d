/* service_lookup.c: the service-lookup row of `make bench`: ns per
 * QMPI_Service_get with N names registered, N = 16, 256 and 4096, looking up the same
 * number of them (LOOKED_UP, spread over the registry, in a scrambled order) at every N:
 * the rows then differ by the registry's size alone. (Looking up all N names instead
 * also grows the working set past the caches: 1.9-2.2x from 16 to 4096 here, from
 * cache misses, where a list would be a few hundred times.)
 *
 * Run: mpiexec -n 1 ./service_lookup N [--repeats R] [--min-ms M]
 * Prints one JSON line: {"kind": "service", "arg": N, "samples_ns": [...]} */
#include "qmpi.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define LOOKED_UP 16

static void service(void) {}

static double now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e9 + t.tv_nsec;
}

int main(int argc, char **argv)
{
    int names = argc > 1 ? atoi(argv[1]) : 0, repeats = 9, r, i;
    double min_ms = 50;
    char (*name)[32];
    int *order;
    long misses = 0;

    for (i = 2; i + 1 < argc; i += 2) {
        if (strcmp(argv[i], "--repeats") == 0)
            repeats = atoi(argv[i + 1]);
        else if (strcmp(argv[i], "--min-ms") == 0)
            min_ms = atof(argv[i + 1]);
    }
    if (names < 1 || repeats < 1) {
        fprintf(stderr, "usage: service_lookup N [--repeats R] [--min-ms M]\n");
        return 2;
    }
    MPI_Init(&argc, &argv);
    name = malloc((size_t)names * sizeof *name);
    order = malloc(LOOKED_UP * sizeof *order);
    if (name == NULL || order == NULL)
        return 1;
    for (i = 0; i < names; i++) {
        snprintf(name[i], sizeof name[i], "bench.service.%d", i);
        QMPI_Service_register(0, name[i], "void(void)", service, NULL);
    }
    /* LOOKED_UP names spread over the registry, in a scrambled order */
    for (i = 0; i < LOOKED_UP; i++)
        order[i] = (int)(((unsigned long)((i * 7) % LOOKED_UP) * (unsigned long)names) / LOOKED_UP);
    printf("{\"kind\": \"service\", \"arg\": %d, \"samples_ns\": [", names);
    for (r = 0; r < repeats; r++) {
        long lookups = 0;
        double start = now_ns(), elapsed;
        do {
            for (i = 0; i < 1024; i++) {
                QMPI_Service_function f = NULL;
                QMPI_Service_get(name[order[i % LOOKED_UP]], "void(void)", QMPI_ANY_PROVIDER, &f, NULL);
                misses += f == NULL;
            }
            lookups += 1024;
            elapsed = now_ns() - start;
        } while (elapsed < min_ms * 1e6);
        printf("%s%.2f", r ? ", " : "", elapsed / lookups);
    }
    printf("]}\n");
    if (misses)
        fprintf(stderr, "service_lookup: %ld lookups did not find their service\n", misses);
    MPI_Finalize();
    free(name);
    free(order);
    return misses != 0;
}
