/* threads.c: each thread's buffer and file, per instance (threads.h). */
#include "threads.h"
#include "files.h"
#include "options.h"
#include "say.h"
#include "sink.h"
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

__thread struct thread_state trace_thread;
__thread struct thread_state *trace_thread_self __attribute__((tls_model("initial-exec")));

static void thread_exit(void *buffer)
{
    struct thread_buffer *tb = buffer;
    int level;
    for (level = 0; level < MAX_LEVELS && trace_thread.buffers[level] != tb; level++)
        ;
    if (level < MAX_LEVELS && !tb->stopped) {
        trace_add_timer(tb);
        trace_flush(&trace_instances[level], tb);
    }
}

void trace_threads_start(struct instance *in)
{
    pthread_key_create(&in->thread_key, thread_exit);
}

static void write_preamble(struct instance *in, struct thread_buffer *tb)
{
    char host[256] = "unknown";
    char process[512];
    struct process_fixed pad = {0};
    size_t length;
    gethostname(host, sizeof host - 1);
    host[sizeof host - 1] = '\0';
    /* program and host, each NUL-terminated */
    length = (size_t)snprintf(process, sizeof process, "%s%c%s", program_invocation_short_name, '\0', host);
    trace_append_variable(in, tb, R_PROCESS, &pad, sizeof pad, process, length + 1);
}

/* With QMPI_VERBOSE, world rank 0 says once per instance where its first thread's
 * records go, and how. */
static void say_mode(struct instance *in, const char *why)
{
    static int said[MAX_LEVELS];
    if (!trace_options.verbose || in->rank != 0 || __atomic_exchange_n(&said[in->level], 1, __ATOMIC_ACQ_REL))
        return;
    if (why == NULL)
        trace_say("level %d: rank files in %s, each thread's buffer its tail file mapped shared (what a crash leaves "
                  "is kept)",
                  in->level, trace_options.dir);
    else
        trace_say("level %d: rank files in %s, buffered writes (%s): a process that dies loses its buffer", in->level,
                  trace_options.dir, why);
}

struct thread_buffer *trace_thread_buffer(struct instance *in)
{
    struct thread_buffer *tb = trace_thread.buffers[in->level];
    const char *why = NULL;
    char *name;
    int fd;
    if (tb != NULL)
        return tb;
    /* its handle cache aligned to cache lines (state.h); never freed: a buffer lives as long as the process */
    if ((tb = aligned_alloc(64, (sizeof *tb + 63) / 64 * 64)) == NULL) {
        trace_complain(in, "cannot allocate a buffer in", trace_options.dir);
        return NULL;
    }
    memset(tb, 0, sizeof *tb);
    pthread_mutex_init(&tb->lock, NULL);
    pthread_mutex_lock(&in->lock);
    tb->thread = in->next_thread++;
    tb->next_in_instance = in->threads;
    in->threads = tb;
    pthread_mutex_unlock(&in->lock);
    tb->fd = -1;
    tb->stopped = 1; /* until its file is open */
    trace_thread.buffers[in->level] = tb;
    pthread_setspecific(in->thread_key, tb);
    if ((fd = trace_create_file(in, tb->thread, &name)) < 0)
        return NULL;
    tb->stopped = 0;
    if (trace_sink_open(in, tb, fd, name, &why) != 0)
        return NULL;
    say_mode(in, why);
    write_preamble(in, tb);
    trace_add_timer(tb);
    return tb;
}
