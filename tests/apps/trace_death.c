/* A rank that dies (tests/test_trace_death.py): MPI_Init, then argv[2] calls of a known
 * loop (MPI_Barrier on MPI_COMM_WORLD, MPI_Allreduce of one int on MPI_COMM_SELF,
 * MPI_Iprobe matching nothing, in turn), "calls N" on stdout, then what argv[1] says:
 *   finish       MPI_Finalize (a whole trace);
 *   kill         raise(SIGKILL): between two calls, nothing can see it;
 *   segv         a store through a null pointer: SIGSEGV between two calls;
 *   abort        abort(): SIGABRT;
 *   abort-other  the others tell world rank 1 they are ready (MPI_Send) and wait in
 *                MPI_Recv from it for a message that never comes; rank 1 takes their
 *                word (MPI_Recv), waits 0.1 s and calls MPI_Abort(MPI_COMM_WORLD, 3): the
 *                launcher kills the others inside their MPI_Recv;
 *   handled      a SIGTERM handler installed before MPI_Init: raise(SIGTERM), which it
 *                catches ("handled 1"), then argv[2] more calls and MPI_Finalize;
 *   reraise      a SIGTERM handler installed before MPI_Init that restores the default
 *                and raises SIGTERM again (as Open MPI's does): raise(SIGTERM) ends the
 *                process by it, once the handler returned;
 *   resethand    the same with a handler of SA_SIGINFO | SA_RESETHAND that only raises
 *                SIGTERM again (the default is back as it runs);
 *   threads      MPI_THREAD_MULTIPLE: 3 threads each make argv[2] calls of MPI_Allreduce
 *                on a communicator of their own (MPI_Comm_dup of MPI_COMM_SELF), then
 *                raise(SIGKILL) once they are joined;
 *   storm        a SIGTERM handler installed before MPI_Init, and a thread (no MPI calls)
 *                that sends this one SIGTERM again and again while it makes calls of the
 *                loop until argv[2] signals were handled, each sent once the last was, so
 *                that signals land anywhere in the trace's wrappers, also inside a record
 *                being written; "storm CALLS HANDLED", then MPI_Finalize;
 *   storm-pending  the same, the signals sent in pairs: the second while the handler of
 *                the first runs (which waits for it), so that it waits as that handler
 *                returns, and comes before the interrupted code goes on;
 *   storm-elsewhere  the same, one at a time, but each handler on the storm's thread
 *                sends SIGTERM to the process (kill), which another thread (no MPI calls)
 *                may take: it waits as the handler returns, and this thread may never see it.
 * A death inside a call is a tool's below the trace (tests/tools/killer.c).
 *
 * COMPILE: mpicc trace_death.c -o trace_death -lqmpi -lpthread
 * RUN:     TOOLS=./libtrace.so mpiexec -n 1 ./trace_death segv 100 */
#include <mpi.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void known_call(long i)
{
    int one = 1, sum = 0, flag = 0;
    switch (i % 3) {
    case 0:
        MPI_Barrier(MPI_COMM_WORLD);
        break;
    case 1:
        MPI_Allreduce(&one, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_SELF);
        break;
    default:
        MPI_Iprobe(MPI_ANY_SOURCE, 7, MPI_COMM_WORLD, &flag, MPI_STATUS_IGNORE);
        break;
    }
}

static int handled; /* SIGTERMs handled (atomic: the storm's sender reads it) */
enum { STORM_ONE, STORM_PAIRS, STORM_ELSEWHERE };
static int storming, storm_how;
static int first_of_pair, first_waits, second_sent; /* storm-pending: the handler and the sender meet */
static int send_to_process;                         /* storm-elsewhere: the next handler on the storm's thread kills */
static pthread_t storm_target;
static long thread_calls;
static MPI_Comm thread_comm[3];
#define STORM_CALLS_PER_SIGNAL 200 /* then the storm's thread waits for the next signal */

static void on_term_reraise(int sig)
{
    signal(sig, SIG_DFL);
    raise(sig); /* blocked in the handler: delivered when it returns */
}

static void on_term_resethand(int sig, siginfo_t *info, void *context)
{
    (void)info;
    (void)context;
    raise(sig);
}

/* Counts the signal last: the sender starts the next once it sees the count (a pair's
 * second handler must not take the next pair's first). */
static void on_term(int sig)
{
    (void)sig;
    if (__atomic_exchange_n(&first_of_pair, 0, __ATOMIC_ACQ_REL)) { /* the second sent while this runs */
        __atomic_store_n(&first_waits, 1, __ATOMIC_RELEASE);
        while (!__atomic_load_n(&second_sent, __ATOMIC_ACQUIRE))
            sched_yield();
        __atomic_store_n(&second_sent, 0, __ATOMIC_RELAXED);
        __atomic_store_n(&first_waits, 0, __ATOMIC_RELEASE);
    }
    if (__atomic_exchange_n(&send_to_process, 0, __ATOMIC_ACQ_REL))
        kill(getpid(), SIGTERM); /* handled once, here after this handler or on another thread */
    __atomic_add_fetch(&handled, 1, __ATOMIC_ACQ_REL);
}

/* Sends SIGTERM to the storm's thread, each once the last was handled (a pair at a time
 * for storm-pending; storm-elsewhere: and the one its handler sends), until it says stop. */
static void *storm_loop(void *arg)
{
    sigset_t term;
    (void)arg;
    sigemptyset(&term);
    sigaddset(&term, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &term, NULL);
    while (__atomic_load_n(&storming, __ATOMIC_ACQUIRE)) {
        int before = __atomic_load_n(&handled, __ATOMIC_ACQUIRE);
        __atomic_store_n(&first_of_pair, storm_how == STORM_PAIRS, __ATOMIC_RELEASE);
        __atomic_store_n(&send_to_process, storm_how == STORM_ELSEWHERE, __ATOMIC_RELEASE);
        pthread_kill(storm_target, SIGTERM);
        if (storm_how == STORM_PAIRS) { /* the first's handler waits for the second: it always comes */
            while (!__atomic_load_n(&first_waits, __ATOMIC_ACQUIRE))
                sched_yield();
            pthread_kill(storm_target, SIGTERM);
            __atomic_store_n(&second_sent, 1, __ATOMIC_RELEASE);
        }
        while (__atomic_load_n(&handled, __ATOMIC_ACQUIRE) - before < 1 + (storm_how != STORM_ONE) &&
               __atomic_load_n(&storming, __ATOMIC_ACQUIRE))
            sched_yield();
    }
    return NULL;
}

/* A thread that makes no MPI call and takes the signals sent to the process
 * (storm-elsewhere), until the storm ends. */
static void *bystander(void *arg)
{
    (void)arg;
    while (__atomic_load_n(&storming, __ATOMIC_ACQUIRE))
        usleep(1000);
    return NULL;
}

/* Calls of the loop, with SIGTERM sent to this thread all along (`how`: one at a time,
 * in pairs, or each with one to the process), until `signals` were handled; the calls
 * made. After STORM_CALLS_PER_SIGNAL calls with no signal it waits for one, so that
 * a busy machine, where the sender runs seldom, does not make a trace of gigabytes. */
static long storm(int signals, int how)
{
    pthread_t sender, other;
    long i, since = 0;
    int seen = 0, now;
    storm_target = pthread_self();
    storm_how = how;
    storming = 1;
    pthread_create(&other, NULL, bystander, NULL);
    pthread_create(&sender, NULL, storm_loop, NULL);
    for (i = 0; (now = __atomic_load_n(&handled, __ATOMIC_ACQUIRE)) < signals; i++) {
        if (now != seen)
            seen = now, since = 0;
        else if (++since > STORM_CALLS_PER_SIGNAL)
            while (__atomic_load_n(&handled, __ATOMIC_ACQUIRE) == seen)
                sched_yield();
        known_call(i);
    }
    __atomic_store_n(&storming, 0, __ATOMIC_RELEASE);
    pthread_join(sender, NULL);
    pthread_join(other, NULL);
    return i;
}

static void *thread_loop(void *arg)
{
    MPI_Comm comm = *(MPI_Comm *)arg;
    int one = 1, sum = 0;
    long i;
    for (i = 0; i < thread_calls; i++)
        MPI_Allreduce(&one, &sum, 1, MPI_INT, MPI_SUM, comm);
    return NULL;
}

/* 3 threads of MPI_Allreduce, each on its own communicator; SIGKILL when they are done. */
static void threads_then_kill(long n)
{
    pthread_t threads[3];
    int t;
    thread_calls = n;
    for (t = 0; t < 3; t++)
        MPI_Comm_dup(MPI_COMM_SELF, &thread_comm[t]);
    for (t = 0; t < 3; t++)
        pthread_create(&threads[t], NULL, thread_loop, &thread_comm[t]);
    for (t = 0; t < 3; t++)
        pthread_join(threads[t], NULL);
    printf("threads 3 %ld\n", n);
    fflush(stdout);
    raise(SIGKILL);
}

/* Rank 1 aborts once the others are waiting in MPI_Recv. */
static void abort_other(int rank)
{
    int size = 1, value = 0, peer;
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (rank == 1) {
        for (peer = 0; peer < size - 1; peer++)
            MPI_Recv(&value, 1, MPI_INT, MPI_ANY_SOURCE, 8, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        usleep(100000);
        MPI_Abort(MPI_COMM_WORLD, 3);
    }
    MPI_Send(&value, 1, MPI_INT, 1, 8, MPI_COMM_WORLD);
    MPI_Recv(&value, 1, MPI_INT, 1, 9, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
}

int main(int argc, char **argv)
{
    const char *how = argc > 1 ? argv[1] : "finish";
    long i, n = argc > 2 ? atol(argv[2]) : 100;
    int rank = 0, provided = 0;
    if (strcmp(how, "handled") == 0 || strncmp(how, "storm", 5) == 0)
        signal(SIGTERM, on_term);
    if (strcmp(how, "reraise") == 0)
        signal(SIGTERM, on_term_reraise);
    if (strcmp(how, "resethand") == 0) {
        struct sigaction once;
        memset(&once, 0, sizeof once);
        once.sa_sigaction = on_term_resethand;
        once.sa_flags = SA_SIGINFO | SA_RESETHAND;
        sigemptyset(&once.sa_mask);
        sigaction(SIGTERM, &once, NULL);
    }
    if (strcmp(how, "threads") == 0) {
        MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
        if (provided == MPI_THREAD_MULTIPLE)
            threads_then_kill(n);
        printf("no MPI_THREAD_MULTIPLE\n");
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    if (strncmp(how, "storm", 5) == 0) {
        MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
        int kind = strcmp(how, "storm-pending") == 0     ? STORM_PAIRS
                   : strcmp(how, "storm-elsewhere") == 0 ? STORM_ELSEWHERE
                                                         : STORM_ONE;
        long calls = storm((int)n, kind);
        printf("storm %ld %d\n", calls, __atomic_load_n(&handled, __ATOMIC_ACQUIRE));
        MPI_Finalize();
        return 0;
    }
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    for (i = 0; i < n; i++)
        known_call(i);
    printf("calls %d %ld\n", rank, n);
    fflush(stdout);
    if (strcmp(how, "kill") == 0)
        raise(SIGKILL);
    if (strcmp(how, "segv") == 0)
        *(volatile int *)(volatile void *)0 = 1;
    if (strcmp(how, "abort") == 0)
        abort();
    if (strcmp(how, "reraise") == 0 || strcmp(how, "resethand") == 0)
        raise(SIGTERM);
    if (strcmp(how, "exit") == 0)
        exit(0);
    if (strcmp(how, "handled") == 0) {
        raise(SIGTERM);
        printf("handled %d\n", __atomic_load_n(&handled, __ATOMIC_ACQUIRE));
        for (i = 0; i < n; i++)
            known_call(i);
    }
    if (strcmp(how, "abort-other") == 0)
        abort_other(rank);
    MPI_Finalize();
    return 0;
}
