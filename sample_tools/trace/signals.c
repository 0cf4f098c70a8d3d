/* signals.c: the fatal signals a trace records (signals.h). A process that dies of a
 * signal leaves its records (the buffer is the tail file, mapped); a SIGNAL record after
 * them says which signal, where a handler can see it without changing what the
 * application does with it:
 *   - only signals whose handling was the default or a handler of the application's are
 *     taken (one it ignores stays ignored), with that handler's mask and flags;
 *   - the tool's handler writes the record into each of the receiving thread's buffers
 *     (async-signal-safe: stores, the tick counter, clock_gettime), then chains: to the
 *     application's handler or the MPI's (if it returns from SIGTERM, SIGINT, SIGQUIT or
 *     SIGXCPU, the record is taken back: the process goes on, unless the signal waits
 *     again with the default handling; a fault comes again, abort() ends the process;
 *     the bytes a record covered are put back: a record being written may have had its
 *     first fields there), or, for the default, does what the default does: the
 *     default restored and the signal raised again (a fault: the instruction runs again),
 *     the process ends by that signal as it would have; a heap buffer's records (no tail
 *     file: the call in progress and the signal are not kept) are written out first;
 *   - a handler the application installs later replaces the tool's, as it would any;
 *     after the last MPI_Finalize the handlers are put back where the tool's is still set.
 * SIGKILL and SIGSTOP cannot be seen: a rank killed so has no SIGNAL record. */
#include "signals.h"
#include <errno.h>
#include <signal.h>
#include <unistd.h>

static const int fatal[] = {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT, SIGTERM, SIGINT, SIGQUIT, SIGXCPU};
#define FATAL_COUNT (sizeof fatal / sizeof fatal[0])
static struct sigaction previous[FATAL_COUNT];
static int installed[FATAL_COUNT];

/* Where a signal's record goes in a buffer: after the record at `used` if one is being
 * written or is entered there (its head word is not 0), else at `used`; NULL if there is
 * no room (only when that head is not one the tool wrote). */
static char *note_place(const struct thread_buffer *tb)
{
    char *at = tb->data + tb->used;
    uint16_t head[2];
    memcpy(head, at, sizeof head);
    if (head[0] != 0) {
        if (head[1] < 8 || head[1] > 4096 || head[1] % RECORD_ALIGNMENT)
            return NULL;
        at += head[1];
    }
    return at + sizeof(struct signal_record) <= tb->data + tb->capacity ? at : NULL;
}

/* Where a signal's records went, and the bytes they covered there in the first
 * COVERED_KEPT buffers: a record being written (its head not there yet) may have had its
 * first fields there, which take_back puts back when the process goes on. Few, on the
 * handler's stack: it may be a small alternate stack (SA_ONSTACK). */
#define COVERED_KEPT 4
struct noted {
    char *at[MAX_LEVELS];
    unsigned char covered[COVERED_KEPT][sizeof(struct signal_record)];
};

/* The signal's record in each of this thread's buffers; their places in `where`. */
static int note(int sig, const siginfo_t *info, struct noted *where)
{
    struct thread_state *ts = trace_thread_self;
    struct signal_record r = {R_SIGNAL, sizeof r, sig, 0, 0, trace_ticks(), trace_now_ns()};
    int level, n = 0;
    if (info != NULL) {
        r.code = info->si_code;
        r.sender = info->si_code <= 0 ? (int32_t)info->si_pid : 0; /* sent by a process (kill, raise) */
    }
    for (level = 0; ts != NULL && level < MAX_LEVELS; level++) {
        struct thread_buffer *tb = ts->buffers[level];
        char *at;
        if (tb == NULL || tb->data == NULL || tb->stopped || __atomic_load_n(&tb->busy, __ATOMIC_RELAXED))
            continue;
        if ((at = note_place(tb)) == NULL)
            continue;
        if (n < COVERED_KEPT)
            memcpy(where->covered[n], at, sizeof r);
        memcpy(at + 4, (const char *)&r + 4, sizeof r - 4);
        __atomic_signal_fence(__ATOMIC_SEQ_CST);
        memcpy(at, &r, 4);
        where->at[n++] = at;
    }
    return n;
}

/* The process goes on: the signals' records taken back, their head first (a process
 * killed meanwhile leaves no half record), then the bytes they covered put back. */
static void take_back(const struct noted *where, int n)
{
    for (int i = 0; i < n; i++) {
        memset(where->at[i], 0, 8);
        if (i >= COVERED_KEPT)
            continue;
        __atomic_signal_fence(__ATOMIC_SEQ_CST);
        memcpy(where->at[i] + 8, where->covered[i] + 8, sizeof where->covered[i] - 8);
        __atomic_signal_fence(__ATOMIC_SEQ_CST);
        memcpy(where->at[i], where->covered[i], 8);
    }
}

/* The process is about to end: this thread's heap buffers (no tail file) written out
 * (async-signal-safe: write), their records only: a rank file holds whole records. */
static void write_heap_buffers(void)
{
    struct thread_state *ts = trace_thread_self;
    int level;
    for (level = 0; ts != NULL && level < MAX_LEVELS; level++) {
        struct thread_buffer *tb = ts->buffers[level];
        if (tb == NULL || tb->tail != NULL || tb->fd < 0 || tb->stopped || tb->data == NULL || tb->busy)
            continue;
        if (write(tb->fd, tb->data, tb->used) < 0)
            (void)0;
    }
}

static int synchronous_fault(int sig, const siginfo_t *info)
{
    return info != NULL && info->si_code > 0 && (sig == SIGSEGV || sig == SIGBUS || sig == SIGILL || sig == SIGFPE);
}

/* Whether a process whose handler returned goes on: not after a fault (the instruction
 * runs again), nor after abort() (which ends the process when the handler returns). */
static int goes_on_after(int sig, const siginfo_t *info)
{
    return sig != SIGABRT && !synchronous_fault(sig, info);
}

/* What the default would have done: the process ends by `sig`. */
static void as_default(int sig, const siginfo_t *info)
{
    struct sigaction dfl;
    memset(&dfl, 0, sizeof dfl);
    dfl.sa_handler = SIG_DFL;
    sigemptyset(&dfl.sa_mask);
    sigaction(sig, &dfl, NULL);
    if (!synchronous_fault(sig, info)) /* a fault comes again when the instruction runs again */
        raise(sig);                    /* blocked in the handler: delivered when it returns */
}

/* Whether the process ends by `sig` once the handler returns: it waits to be delivered,
 * and its handling is now the default (a handler that restored it and raised the signal
 * again: Open MPI's prints a stack and does; or SA_RESETHAND). Waiting with any other
 * handling, the process goes on, or comes back to the tool's handler, which writes a new
 * record (on whichever thread takes a signal sent to the process). */
static int ends_by(int sig)
{
    sigset_t waiting;
    struct sigaction now;
    if (sigpending(&waiting) != 0 || sigismember(&waiting, sig) != 1)
        return 0;
    /* SA_RESETHAND leaves SA_SIGINFO set; sa_handler and sa_sigaction share storage */
    return sigaction(sig, NULL, &now) == 0 && now.sa_handler == SIG_DFL;
}

static void on_signal(int sig, siginfo_t *info, void *context)
{
    int saved = errno, n;
    struct noted where;
    size_t k;
    for (k = 0; k < FATAL_COUNT && fatal[k] != sig; k++)
        ;
    n = note(sig, info, &where);
    if (k < FATAL_COUNT && (previous[k].sa_flags & SA_SIGINFO) && previous[k].sa_sigaction != NULL) {
        previous[k].sa_sigaction(sig, info, context);
    } else if (k < FATAL_COUNT && previous[k].sa_handler != SIG_DFL && previous[k].sa_handler != SIG_IGN) {
        previous[k].sa_handler(sig);
    } else {
        write_heap_buffers();
        as_default(sig, info);
        errno = saved;
        return;
    }
    if (goes_on_after(sig, info) && !ends_by(sig)) /* the handler returned and the process goes on */
        take_back(&where, n);
    errno = saved;
}

void trace_signals_start(void)
{
    size_t k;
    for (k = 0; k < FATAL_COUNT; k++) {
        struct sigaction old, ours;
        if (installed[k] || sigaction(fatal[k], NULL, &old) != 0)
            continue;
        if (!(old.sa_flags & SA_SIGINFO) && old.sa_handler == SIG_IGN)
            continue; /* ignored: it stays so */
        memset(&ours, 0, sizeof ours);
        ours.sa_sigaction = on_signal;
        ours.sa_mask = old.sa_mask;
        ours.sa_flags = SA_SIGINFO | SA_ONSTACK | (old.sa_flags & (SA_RESTART | SA_NODEFER | SA_RESETHAND));
        previous[k] = old;
        if (sigaction(fatal[k], &ours, NULL) == 0)
            installed[k] = 1;
    }
}

void trace_signals_stop(void)
{
    size_t k;
    for (k = 0; k < FATAL_COUNT; k++) {
        struct sigaction now;
        if (!installed[k] || sigaction(fatal[k], NULL, &now) != 0)
            continue;
        if ((now.sa_flags & SA_SIGINFO) && now.sa_sigaction == on_signal)
            sigaction(fatal[k], &previous[k], NULL);
        installed[k] = 0;
    }
}
