/* bench_rank: the timed application of `make bench` (docs/performance.md).
 *
 *   bench_rank rank [--pair-ref N --pair-layout L]
 *       ns per MPI_Comm_rank(MPI_COMM_WORLD, &r) in a tight loop, one rank. Linked with
 *       nothing else (direct PMPI), a minimal interposer, or libqmpi (+ tools). With
 *       --pair-ref, samples of the reference chain of N layers in layout L
 *       (bench/ref_chain.h) are taken in turn with those of MPI_Comm_rank.
 *   bench_rank ref --levels 0,1,2,...
 *       the reference chain alone, every layout, every N, in one process.
 *   bench_rank entry --libs a.so,b.so,...
 *       entry points compared in one process: PMPI_Comm_rank and MPI_Comm_rank of each
 *       library (dlopen'ed RTLD_LOCAL), all called through a function pointer.
 *   bench_rank call --call iprobe|allreduce|write_at|seek [--file PATH] [--pair-pmpi]
 *       ns per call of one MPI function of each parameter-role mix (the trace tool's
 *       per-call rows): MPI_Iprobe, MPI_Allreduce, MPI_File_write_at and MPI_File_seek
 *       (a file PATH opened on MPI_COMM_SELF). With
 *       --pair-pmpi, samples of the same call to PMPI_ directly are taken in turn.
 *   bench_rank threads [--repeats R]
 *       R threads one after the other (MPI_THREAD_SERIALIZED), each timing its first
 *       MPI_Iprobe and the mean of its next 1,000: what a thread's first traced call
 *       costs (the trace tool makes the thread's rank file and tail file there).
 *   bench_rank pingpong [--sizes 0,1024]
 *       2 ranks: one-way latency (half the round trip) of MPI_Send/MPI_Recv: the
 *       median over batches of 16 round trips (robust to preemption), and the mean.
 *   Common: [--repeats R] [--min-ms M]
 *
 * Each measurement calls its loop n times per sample, n chosen so that a sample lasts
 * at least M ms (default 50); one warm-up sample is dropped. Measurements of one
 * process are sampled in turn (A B A B ...), so that slow phases of a busy machine hit
 * them alike. Single-rank loops are timed in CPU time of the thread
 * (CLOCK_THREAD_CPUTIME_ID: time spent preempted by other processes is not counted),
 * ping-pong in wall-clock time (waiting is part of latency); both are printed.
 * Output: one JSON object per measurement on stdout (rank 0 only).
 *
 * Build (bench/Makefile): mpicc -O2 -c bench_rank.c; link with -lqbref [-lqbinterp | -lqmpi ...]
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <mpi.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "ref_chain.h"

#define MAX_SAMPLES 64
#define MAX_LIST 64
#define MAX_SET 8

static int repeats = 9;
static double min_ns = 50e6;
static volatile int sink;

/* ---- clocks and /proc ------------------------------------------------------------ */

static clockid_t sample_clock = CLOCK_THREAD_CPUTIME_ID;
static double wall_start, last_wall_ns;

static double clock_ns(clockid_t id)
{
    struct timespec t;
    clock_gettime(id, &t);
    return (double)t.tv_sec * 1e9 + (double)t.tv_nsec;
}

static double begin(void)
{
    wall_start = clock_ns(CLOCK_MONOTONIC);
    return clock_ns(sample_clock);
}

static double end(double t0)
{
    double t1 = clock_ns(sample_clock);
    last_wall_ns = clock_ns(CLOCK_MONOTONIC) - wall_start;
    return t1 - t0;
}

/* VmRSS / VmHWM / VmStk of this process, in kB (-1 if unknown). */
static long proc_status_kb(const char *key)
{
    char line[256];
    size_t length = strlen(key);
    long value = -1;
    FILE *f = fopen("/proc/self/status", "r");

    if (f == NULL)
        return -1;
    while (fgets(line, sizeof line, f) != NULL) {
        if (strncmp(line, key, length) == 0 && line[length] == ':') {
            value = strtol(line + length + 1, NULL, 10);
            break;
        }
    }
    fclose(f);
    return value;
}

static int parse_list(const char *text, long *out)
{
    int n = 0;
    char *stop;
    while (*text && n < MAX_LIST) {
        out[n++] = strtol(text, &stop, 10);
        if (stop == text)
            break;
        text = *stop == ',' ? stop + 1 : stop;
    }
    return n;
}

/* ---- stack depth of one call (high-water mark) ------------------------------------ */

#define STACK_PATTERN 0xA5
static size_t probe_bytes;
static unsigned char *probe_low;

/* Fills the stack below the caller with a pattern, where the frames of the next call
 * land. Leaves 512 KiB of the limit unused; at most 7.5 MiB. */
__attribute__((noinline)) static void stack_paint(void)
{
    struct rlimit limit;
    size_t bytes = (size_t)7680 * 1024;
    if (getrlimit(RLIMIT_STACK, &limit) == 0 && limit.rlim_cur != RLIM_INFINITY &&
        limit.rlim_cur < bytes + 512 * 1024)
        bytes = limit.rlim_cur > 512 * 1024 ? (size_t)limit.rlim_cur - 512 * 1024 : 0;
    {
        unsigned char *area = __builtin_alloca(bytes + 1);
        memset(area, STACK_PATTERN, bytes);
        __asm__ volatile("" : : "r"(area) : "memory");
        probe_low = area;
        probe_bytes = bytes;
    }
}

/* Bytes of stack used below `top` since stack_paint; -1 if the call went deeper than
 * the painted area. */
__attribute__((noinline)) static long stack_used(uintptr_t top)
{
    size_t i = 0;
    while (i < probe_bytes && probe_low[i] == STACK_PATTERN)
        i++;
    if (i == 0)
        return -1;
    return (long)(top - (uintptr_t)(probe_low + i));
}

/* ---- the timed loops ------------------------------------------------------------ */

typedef double (*loop_fn)(long n, long arg);
typedef int (*rank_fn)(MPI_Comm comm, int *rank);
static rank_fn entries[MAX_SET];
static char *pp_buf;

static double loop_rank(long n, long arg)
{
    int r = 0, acc = 0;
    double t0;
    (void)arg;
    t0 = begin();
    for (long i = 0; i < n; i++) {
        MPI_Comm_rank(MPI_COMM_WORLD, &r);
        acc += r;
    }
    t0 = end(t0);
    sink = acc;
    return t0;
}

static double loop_ref(long n, long arg)
{
    int r = 0, acc = 0;
    double t0;
    (void)arg;
    t0 = begin();
    for (long i = 0; i < n; i++) {
        qref_call(MPI_COMM_WORLD, &r);
        acc += r;
    }
    t0 = end(t0);
    sink = acc;
    return t0;
}

static double loop_entry(long n, long which)
{
    int r = 0, acc = 0;
    double t0;
    rank_fn fn = entries[which];
    t0 = begin();
    for (long i = 0; i < n; i++) {
        fn(MPI_COMM_WORLD, &r);
        acc += r;
    }
    t0 = end(t0);
    sink = acc;
    return t0;
}

/* One call of each parameter-role mix (the trace tool's per-call rows, trace_bench.py),
 * chosen so that the MPI's own cost is small and the same in the traced row and its
 * floor: p2p MPI_Iprobe(MPI_ANY_SOURCE, 7, MPI_COMM_WORLD, &flag, MPI_STATUS_IGNORE)
 * (nothing is ever sent: no message matches); collective MPI_Allreduce of 1 int on
 * MPI_COMM_SELF; I/O MPI_File_write_at of 8 bytes at offset 0 of a file opened on
 * MPI_COMM_SELF (--file, on tmpfs); and MPI_File_seek(fh, 0, MPI_SEEK_SET) of the same
 * file, an I/O call without a system call. arg 0: through MPI_ (the chain), 1: PMPI_
 * (the MPI alone, for --pair-pmpi). */
enum { CALL_IPROBE, CALL_ALLREDUCE, CALL_WRITE_AT, CALL_SEEK, CALLS };
static const char *const call_names[CALLS] = { "iprobe", "allreduce", "write_at", "seek" };
static MPI_File call_file = MPI_FILE_NULL;

#define CALL_LOOP(name, call)                                                                                      \
    static double name(long n, long pmpi)                                                                          \
    {                                                                                                              \
        int flag = 0, acc = 0, in = 1, out = 0;                                                                    \
        char data[8] = "qmpibnch";                                                                                 \
        double t0;                                                                                                 \
        (void)flag, (void)in, (void)out, (void)data;                                                               \
        t0 = begin();                                                                                              \
        if (pmpi)                                                                                                  \
            for (long i = 0; i < n; i++) {                                                                         \
                PMPI_##call;                                                                                       \
                acc += flag + out;                                                                                 \
            }                                                                                                      \
        else                                                                                                       \
            for (long i = 0; i < n; i++) {                                                                         \
                MPI_##call;                                                                                        \
                acc += flag + out;                                                                                 \
            }                                                                                                      \
        t0 = end(t0);                                                                                              \
        sink = acc;                                                                                                \
        return t0;                                                                                                 \
    }
CALL_LOOP(loop_iprobe, Iprobe(MPI_ANY_SOURCE, 7, MPI_COMM_WORLD, &flag, MPI_STATUS_IGNORE))
CALL_LOOP(loop_allreduce, Allreduce(&in, &out, 1, MPI_INT, MPI_SUM, MPI_COMM_SELF))
CALL_LOOP(loop_write_at, File_write_at(call_file, 0, data, (int)sizeof data, MPI_CHAR, MPI_STATUS_IGNORE))
CALL_LOOP(loop_seek, File_seek(call_file, 0, MPI_SEEK_SET))
static const loop_fn call_loops[CALLS] = { loop_iprobe, loop_allreduce, loop_write_at, loop_seek };

/* ---- a thread's first call ---------------------------------------------------------- */

#define LATER_CALLS 1000
struct first_call {
    double first, later;
};

static void *time_first_call(void *arg)
{
    struct first_call *out = arg;
    int flag = 0;
    double t0 = clock_ns(CLOCK_THREAD_CPUTIME_ID);
    MPI_Iprobe(MPI_ANY_SOURCE, 7, MPI_COMM_WORLD, &flag, MPI_STATUS_IGNORE);
    out->first = clock_ns(CLOCK_THREAD_CPUTIME_ID) - t0;
    t0 = clock_ns(CLOCK_THREAD_CPUTIME_ID);
    for (int i = 0; i < LATER_CALLS; i++)
        MPI_Iprobe(MPI_ANY_SOURCE, 7, MPI_COMM_WORLD, &flag, MPI_STATUS_IGNORE);
    out->later = (clock_ns(CLOCK_THREAD_CPUTIME_ID) - t0) / LATER_CALLS;
    sink = flag;
    return NULL;
}

/* `repeats` threads, one after the other: their first call's ns and the mean of the next. */
static void measure_first_calls(int rank)
{
    struct first_call calls[MAX_SAMPLES];
    for (int s = 0; s < repeats; s++) {
        pthread_t thread;
        pthread_create(&thread, NULL, time_first_call, &calls[s]);
        pthread_join(thread, NULL);
    }
    if (rank != 0)
        return;
    printf("{\"kind\": \"first\", \"arg\": 0, \"clock\": \"thread-cputime\", \"samples_ns\": [");
    for (int s = 0; s < repeats; s++)
        printf("%s%.1f", s ? ", " : "", calls[s].first);
    printf("], \"later_ns\": [");
    for (int s = 0; s < repeats; s++)
        printf("%s%.2f", s ? ", " : "", calls[s].later);
    printf("]}\n");
    fflush(stdout);
}

/* Ping-pong: rank 0 also times batches of PP_BATCH round trips; a sample's value is
 * the median batch, so round trips that wait for a preempted rank on a busy machine do
 * not count (the mean over the sample is printed as wall_ns). */
#define PP_BATCH 16
static double *pp_batches;
static long pp_capacity;
static double pp_median = -1; /* of the last loop, per round trip; -1: not measured */

static int compare_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double loop_pingpong(long n, long size)
{
    int rank;
    long batches = n / PP_BATCH, b = 0;
    double t0, tb = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (batches > pp_capacity) {
        free(pp_batches);
        pp_batches = malloc((size_t)batches * sizeof *pp_batches);
        pp_capacity = pp_batches ? batches : 0;
    }
    MPI_Barrier(MPI_COMM_WORLD);
    t0 = begin();
    for (long i = 0; i < n; i++) {
        if (rank == 0) {
            if (i % PP_BATCH == 0)
                tb = clock_ns(CLOCK_MONOTONIC);
            MPI_Send(pp_buf, (int)size, MPI_CHAR, 1, 7, MPI_COMM_WORLD);
            MPI_Recv(pp_buf, (int)size, MPI_CHAR, 1, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            if (i % PP_BATCH == PP_BATCH - 1 && b < pp_capacity)
                pp_batches[b++] = (clock_ns(CLOCK_MONOTONIC) - tb) / PP_BATCH;
        } else if (rank == 1) {
            MPI_Recv(pp_buf, (int)size, MPI_CHAR, 0, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            MPI_Send(pp_buf, (int)size, MPI_CHAR, 0, 7, MPI_COMM_WORLD);
        }
    }
    t0 = end(t0);
    pp_median = -1;
    if (rank == 0 && b > 0) {
        qsort(pp_batches, (size_t)b, sizeof *pp_batches, compare_double);
        pp_median = pp_batches[b / 2];
    }
    return t0;
}

/* ---- measuring a set of loops in turn ---------------------------------------------- */

struct measurement {
    const char *kind;
    loop_fn loop;
    long arg;
    double per;        /* calls (or one-way messages) per loop iteration */
    void (*setup)(long arg); /* once, before its calibration, or NULL */
    char extra[256];   /* more JSON members, or "" */
    long n;
    double samples[MAX_SAMPLES], wall[MAX_SAMPLES];
};

static void ref_compact(long levels)
{
    if (qref_setup((int)levels, 0) != 0)
        MPI_Abort(MPI_COMM_WORLD, 2);
}

static void ref_frames(long levels)
{
    if (qref_setup((int)levels, 2) != 0)
        MPI_Abort(MPI_COMM_WORLD, 2);
}

/* One sample of m: n iterations, in ns per call. Rank 0's time decides in pingpong
 * (collective: both ranks must run the same n). */
static double sample(struct measurement *m, long n, int collective)
{
    double t = m->loop(n, m->arg);
    if (collective)
        MPI_Bcast(&t, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);
    return t;
}

static void measure_set(struct measurement *set, int count, int rank, int collective)
{
    for (int k = 0; k < count; k++) {
        struct measurement *m = &set[k];
        long n = 1;
        double t;
        if (m->setup)
            m->setup(m->arg);
        /* grow n until a sample takes >= 1/8 of the target, then scale to the target */
        for (;;) {
            t = sample(m, n, collective);
            if (t >= min_ns / 8 || n > (1L << 40))
                break;
            n *= 2;
        }
        m->n = (long)((double)n * min_ns / (t > 0 ? t : 1) * 1.05) + 1;
        sample(m, m->n, collective); /* warm-up, dropped */
    }
    for (int s = 0; s < repeats; s++) {
        for (int k = 0; k < count; k++) {
            struct measurement *m = &set[k];
            m->samples[s] = sample(m, m->n, collective) / ((double)m->n * m->per);
            m->wall[s] = last_wall_ns / ((double)m->n * m->per);
            if (m->loop == loop_pingpong && pp_median >= 0)
                m->samples[s] = pp_median / m->per;
        }
    }
    if (rank != 0)
        return;
    for (int k = 0; k < count; k++) {
        struct measurement *m = &set[k];
        printf("{\"kind\": \"%s\", \"arg\": %ld, \"iterations\": %ld, \"clock\": \"%s\", \"samples_ns\": [", m->kind,
               m->arg, m->n, m->loop == loop_pingpong ? "wall, median of batches" : "thread-cputime");
        for (int s = 0; s < repeats; s++)
            printf("%s%.4f", s ? ", " : "", m->samples[s]);
        printf("], \"wall_ns\": [");
        for (int s = 0; s < repeats; s++)
            printf("%s%.4f", s ? ", " : "", m->wall[s]);
        printf("], \"vmrss_kb\": %ld, \"vmhwm_kb\": %ld%s%s}\n", proc_status_kb("VmRSS"), proc_status_kb("VmHWM"),
               m->extra[0] ? ", " : "", m->extra);
    }
    fflush(stdout);
}

/* Ranks of a ping-pong each on their own CPU of the allowed set, when there are enough. */
static void pin_to_rank_cpu(int rank)
{
    cpu_set_t allowed, one;
    int seen = 0;
    if (sched_getaffinity(0, sizeof allowed, &allowed) != 0 || CPU_COUNT(&allowed) < 2)
        return;
    for (int cpu = 0; cpu < CPU_SETSIZE; cpu++) {
        if (!CPU_ISSET(cpu, &allowed))
            continue;
        if (seen++ == rank) {
            CPU_ZERO(&one);
            CPU_SET(cpu, &one);
            sched_setaffinity(0, sizeof one, &one);
            return;
        }
    }
}

/* ---- main ------------------------------------------------------------------------- */

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "rank";
    static struct measurement set[MAX_SET];
    long list[MAX_LIST], pair_levels = -1;
    int nlist = 0, rank = 0, size = 1, count = 0, frames = 0, call = -1, pair_pmpi = 0;
    char *libs = NULL, *file = NULL;
    uintptr_t top = (uintptr_t)__builtin_frame_address(0);

    for (int a = 2; a < argc; a++) {
        if (strcmp(argv[a], "--repeats") == 0 && a + 1 < argc)
            repeats = atoi(argv[++a]);
        else if (strcmp(argv[a], "--min-ms") == 0 && a + 1 < argc)
            min_ns = atof(argv[++a]) * 1e6;
        else if ((strcmp(argv[a], "--sizes") == 0 || strcmp(argv[a], "--levels") == 0) && a + 1 < argc)
            nlist = parse_list(argv[++a], list);
        else if (strcmp(argv[a], "--libs") == 0 && a + 1 < argc)
            libs = argv[++a];
        else if (strcmp(argv[a], "--pair-ref") == 0 && a + 1 < argc)
            pair_levels = atol(argv[++a]);
        else if (strcmp(argv[a], "--pair-layout") == 0 && a + 1 < argc)
            frames = strcmp(argv[++a], "frames") == 0;
        else if (strcmp(argv[a], "--call") == 0 && a + 1 < argc) {
            for (call = CALLS - 1; call >= 0 && strcmp(argv[a + 1], call_names[call]) != 0; call--)
                ;
            a++;
        } else if (strcmp(argv[a], "--file") == 0 && a + 1 < argc)
            file = argv[++a];
        else if (strcmp(argv[a], "--pair-pmpi") == 0)
            pair_pmpi = 1;
        else {
            fprintf(stderr, "bench_rank: unknown argument '%s'\n", argv[a]);
            return 2;
        }
    }
    if (repeats < 1 || repeats > MAX_SAMPLES) {
        fprintf(stderr, "bench_rank: --repeats must be 1..%d\n", MAX_SAMPLES);
        return 2;
    }

    /* With tools, MPI_Init is the first MPI call: the chain is built inside it. */
    if (strcmp(mode, "threads") == 0) {
        int provided = 0;
        MPI_Init_thread(&argc, &argv, MPI_THREAD_SERIALIZED, &provided);
    } else {
        MPI_Init(&argc, &argv);
    }
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);

    if (strcmp(mode, "rank") == 0) {
        long rss_init = proc_status_kb("VmRSS"), depth;
        int r;
        /* the stack depth of one MPI_Comm_rank, before the timing (painting the stack
         * raises VmRSS) */
        stack_paint();
        MPI_Comm_rank(MPI_COMM_WORLD, &r);
        depth = stack_used(top);
        set[count] = (struct measurement){ .kind = "rank", .loop = loop_rank, .per = 1.0 };
        snprintf(set[count].extra, sizeof set[count].extra, "\"vmrss_init_kb\": %ld, \"stack_bytes\": %ld", rss_init,
                 depth);
        count++;
        if (pair_levels >= 0) {
            set[count] = (struct measurement){ .kind = "pair-ref", .loop = loop_ref, .arg = pair_levels, .per = 1.0,
                                               .setup = frames ? ref_frames : ref_compact };
            snprintf(set[count].extra, sizeof set[count].extra, "\"layout\": \"%s\"",
                     qref_layout_name(frames ? 2 : 0));
            count++;
        }
        measure_set(set, count, rank, 0);
    } else if (strcmp(mode, "call") == 0) {
        int io = call == CALL_WRITE_AT || call == CALL_SEEK;
        if (call < 0 || (io && file == NULL)) {
            if (rank == 0)
                fprintf(stderr, "bench_rank call: --call iprobe|allreduce|write_at|seek (write_at, seek: --file PATH)\n");
            MPI_Abort(MPI_COMM_WORLD, 2);
        }
        if (io &&
            MPI_File_open(MPI_COMM_SELF, file, MPI_MODE_CREATE | MPI_MODE_RDWR | MPI_MODE_DELETE_ON_CLOSE,
                          MPI_INFO_NULL, &call_file) != MPI_SUCCESS) {
            fprintf(stderr, "bench_rank call: cannot open %s\n", file);
            MPI_Abort(MPI_COMM_WORLD, 2);
        }
        set[count] = (struct measurement){ .kind = "call", .loop = call_loops[call], .arg = 0, .per = 1.0 };
        snprintf(set[count].extra, sizeof set[count].extra, "\"call\": \"%s\"", call_names[call]);
        count++;
        if (pair_pmpi) {
            set[count] = (struct measurement){ .kind = "pair-pmpi", .loop = call_loops[call], .arg = 1, .per = 1.0 };
            snprintf(set[count].extra, sizeof set[count].extra, "\"call\": \"%s\"", call_names[call]);
            count++;
        }
        measure_set(set, count, rank, 0);
        if (call_file != MPI_FILE_NULL)
            MPI_File_close(&call_file);
    } else if (strcmp(mode, "ref") == 0) {
        if (nlist == 0)
            list[nlist++] = 0;
        for (int layout = 0; layout < QREF_LAYOUTS; layout++) {
            for (int i = 0; i < nlist; i++) {
                struct measurement *m = &set[0];
                int r;
                long depth;
                if (qref_setup((int)list[i], layout) != 0) {
                    fprintf(stderr, "bench_rank ref: cannot set up %ld levels\n", list[i]);
                    MPI_Abort(MPI_COMM_WORLD, 2);
                }
                qref_call(MPI_COMM_WORLD, &r);
                stack_paint();
                qref_call(MPI_COMM_WORLD, &r);
                depth = stack_used(top);
                *m = (struct measurement){ .kind = "ref", .loop = loop_ref, .arg = list[i], .per = 1.0 };
                snprintf(m->extra, sizeof m->extra, "\"layout\": \"%s\", \"stack_bytes\": %ld",
                         qref_layout_name(layout), depth);
                measure_set(set, 1, rank, 0);
            }
        }
    } else if (strcmp(mode, "entry") == 0) {
        char *path = libs ? strtok(libs, ",") : NULL;
        entries[count] = PMPI_Comm_rank;
        set[count] = (struct measurement){ .kind = "entry", .loop = loop_entry, .arg = count, .per = 1.0 };
        snprintf(set[count].extra, sizeof set[count].extra, "\"lib\": \"PMPI_Comm_rank\"");
        count++;
        for (; path != NULL && count < MAX_SET; path = strtok(NULL, ",")) {
            void *handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
            void *fn = handle ? dlsym(handle, "MPI_Comm_rank") : NULL;
            if (fn == NULL) {
                fprintf(stderr, "bench_rank entry: %s: %s\n", path, dlerror());
                MPI_Abort(MPI_COMM_WORLD, 2);
            }
            *(void **)&entries[count] = fn;
            set[count] = (struct measurement){ .kind = "entry", .loop = loop_entry, .arg = count, .per = 1.0 };
            snprintf(set[count].extra, sizeof set[count].extra, "\"lib\": \"%s\"", path);
            count++;
        }
        for (int e = 0; e < count; e++)
            entries[e](MPI_COMM_WORLD, &rank); /* first call: libqmpi builds its (empty) chain */
        measure_set(set, count, rank, 0);
    } else if (strcmp(mode, "threads") == 0) {
        measure_first_calls(rank);
    } else if (strcmp(mode, "pingpong") == 0) {
        long max = 0;
        if (size != 2) {
            if (rank == 0)
                fprintf(stderr, "bench_rank pingpong: needs exactly 2 ranks, got %d\n", size);
            MPI_Abort(MPI_COMM_WORLD, 2);
        }
        pin_to_rank_cpu(rank);
        sample_clock = CLOCK_MONOTONIC;
        if (nlist == 0)
            list[nlist++] = 0;
        for (int i = 0; i < nlist && count < MAX_SET; i++) {
            max = list[i] > max ? list[i] : max;
            set[count++] = (struct measurement){ .kind = "pingpong", .loop = loop_pingpong, .arg = list[i], .per = 2.0 };
        }
        pp_buf = calloc((size_t)max + 1, 1);
        measure_set(set, count, rank, 1);
    } else {
        if (rank == 0)
            fprintf(stderr, "bench_rank: unknown mode '%s'\n", mode);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }

    MPI_Finalize();
    return 0;
}
