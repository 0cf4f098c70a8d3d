/* trace: records MPI calls with their times and arguments into binary per-thread buffers,
 * written per rank and thread to QMPI_TRACE_DIR (the PIOsim MPI wrapper's design, seed
 * 004). `qmpigen trace DIR -o OUT` merges the files into OTF2, Perfetto JSON, pictures
 * and a summary. Format: docs/trace-format.md (format.h, generated from
 * qmpigen/trace/layout.py).
 *
 * The library, each file above the ones it uses (none uses a file above it):
 *   lifecycle.c       MPI_Init and MPI_Finalize, clocks, which wrapper the core installs;
 *   requests.c        the Wait/Test/Start/Request_free/Cancel family: what happened to
 *                     each request (no parameter role says it);
 *   record.h          a call record from a generated wrapper's arguments by role, inline
 *                     in each wrapper; args.c its rare and long parts;
 *   calls.c           a traced call's start and end (trace_open, inline in calls.h);
 *   handles.c         communicators, datatypes, files and windows (the cache inline);
 *   threads.c         each thread's buffer and file;
 *   sink.c            a buffer and its rank file; files.c the directory and the files;
 *   options.c, say.c  the options; the tool's lines on stderr;
 *   state.h, roles.h, format.h  the types (format.h: the rank file layout, generated);
 *   trace_roles.qmpi  (generated) a wrapper for every function of the `operations`
 *                     group, recording its arguments by role; trace_all.qmpi (generated)
 *                     a bare wrapper for every other function (QMPI_TRACE_FUNCTIONS=all).
 * Build: make -C sample_tools CORE=<core> OUT=<dir>
 * Run:   TOOLS=./libtrace.so:./libtbcast.so:./libtrace.so mpiexec -n 4 ./app
 *
 * Stackable: one library serves every instance in the chain; each instance keeps its
 * state in slot `level` of `trace_instances` and writes its own files (the level is in
 * their names). Options (environment; read once per process, options.c):
 *   QMPI_TRACE_DIR=dir          where the files go (default qmpi-trace), created if missing
 *   QMPI_TRACE_FLUSH=full|record write when a thread's buffer is full (default) or every record
 *   QMPI_TRACE_NESTED=1|0       record calls made while a traced call of an instance above
 *                               is open on this thread (e.g. TBcast's Send/Recv) (default 1)
 *   QMPI_TRACE_FUNCTIONS=default|all  `all` adds every function of kind `other` (Comm_rank,
 *                               Type_size, ...) as a call without arguments, seed 004 3.1.4
 *   QMPI_TRACE_BUFFER=bytes     per-thread buffer, a decimal number from 4096 to 1 GiB (default
 *                               1 MiB; any other value: one line from rank 0, and the default)
 * The options are read with secure_getenv: a setuid or setgid program ignores them (no
 * file it writes can be put somewhere by its caller's environment).
 * No MPI communication happens for tracing's sake except the clock ping-pong with world
 * rank 0 right after MPI_Init and right before MPI_Finalize, through PMPI.
 * The hot path (calls.h's inline trace_open, handles.h's trace_lookup, record.h inline
 * in each generated wrapper, then trace_end): one initial-exec TLS load per call,
 * two reads of the tick counter, each handle's id and size from its home slot in a
 * per-thread cache (one probe; its entry is read only to translate a rank to a world
 * rank), the record built once and packed into the thread's buffer before the call, its
 * duration stored after it (24 to 112 bytes: 32 for a probe, 40 for an Allreduce, 48
 * for a Send; most of a call's cost is the kernel's copy of them into the file); no
 * lock, no atomic read-modify-write.
 * `make bench` measures it per role mix (docs/performance.md). */
#include "calls.h"
#include "clocks.h"
#include "files.h"
#include "handles.h"
#include "options.h"
#include "requests.h"
#include "say.h"
#include "signals.h"
#include "sink.h"
#include "threads.h"
#include <stdio.h>
#include <stdlib.h>
#include <sys/random.h>
#include <unistd.h>

struct instance trace_instances[MAX_LEVELS];

/* Instances traced in this process: the signal handler is there while one is. */
static int instances_on;
/* Starting and stopping an instance: MPI_Session_init may come from several threads. */
static pthread_mutex_t lifecycle_lock = PTHREAD_MUTEX_INITIALIZER;

/* Instance `level` started, as world rank `rank` of `size` in run `run_id`: its state,
 * its directory checked, the signal handler installed; 1 if it traces. */
static int start_instance(int level, int rank, int size, uint64_t run_id, MPI_Group world)
{
    struct instance *in = &trace_instances[level];
    struct timespec real;
    static int said_bad_buffer;
    trace_options_once();
    if (in->ended) {             /* MPI_Session_init after the last finalize: the files end with END, whole */
        in->world_group = world; /* let go at its finalize, as a started instance's */
        if (rank == 0)
            trace_say("level %d: initialized again after its last finalize: not traced (its rank files are closed)",
                      level);
        return 0;
    }
    in->level = level;
    pthread_mutex_init(&in->lock, NULL);
    trace_threads_start(in);
    in->rank = rank;
    in->world_size = size;
    in->run_id = run_id;
    in->world_group = world;
    if (trace_options.bad_buffer != NULL && in->rank == 0 &&
        !__atomic_exchange_n(&said_bad_buffer, 1, __ATOMIC_ACQ_REL))
        trace_say("QMPI_TRACE_BUFFER=%.64s is not a number of bytes from %zu to %zu; using %zu",
                  trace_options.bad_buffer, BUFFER_MIN, BUFFER_MAX, BUFFER_DEFAULT);
    in->origin_ns = trace_now_ns();
    clock_gettime(CLOCK_REALTIME, &real);
    in->realtime_origin_ns = (uint64_t)real.tv_sec * 1000000000u + (uint64_t)real.tv_nsec;
    if (trace_open_dir(in) != 0)
        return 0;
    __atomic_store_n(&in->active, 1, __ATOMIC_RELEASE);
    if (__atomic_fetch_add(&instances_on, 1, __ATOMIC_ACQ_REL) == 0)
        trace_signals_start();
    return 1;
}

/* The world model (MPI_Init): MPI_COMM_WORLD's rank, the run id rank 0 draws, clocks. */
static void start_world(int level)
{
    int rank = 0, size = 1;
    MPI_Group world;
    PMPI_Comm_rank(MPI_COMM_WORLD, &rank);
    PMPI_Comm_size(MPI_COMM_WORLD, &size);
    PMPI_Comm_group(MPI_COMM_WORLD, &world);
    if (start_instance(level, rank, size, trace_run_identity(rank), world)) {
        trace_measure_clock(&trace_instances[level], 0);
        trace_calibrate(&trace_instances[level]);
    }
}

static void stop_instance(struct instance *in)
{
    struct thread_buffer *tb;
    __atomic_store_n(&in->active, 0, __ATOMIC_RELEASE);
    in->ended = 1;
    pthread_mutex_lock(&in->lock);
    for (tb = in->threads; tb != NULL; tb = tb->next_in_instance)
        trace_sink_close(in, tb);
    pthread_mutex_unlock(&in->lock);
    if (__atomic_sub_fetch(&instances_on, 1, __ATOMIC_ACQ_REL) == 0)
        trace_signals_stop();
}

/* One more user of instance `level` (an MPI_Init or MPI_Session_init that returned): the
 * first starts it. */
static void more_users(int level, void (*start)(int, void *), void *how)
{
    pthread_mutex_lock(&lifecycle_lock);
    if (trace_instances[level].users++ == 0) {
        trace_instances[level].world_group = MPI_GROUP_NULL;
        start(level, how);
    }
    pthread_mutex_unlock(&lifecycle_lock);
}

/* Before a finalize: 1 if it is the last user's (the instance stops after it). The world
 * group stays through the finalize: the levels below make calls there that come back
 * through this one (Darshan writes its log from its MPI_Finalize, on communicators of its
 * own), and their communicators need world ranks. MPI_Finalize releases the group with
 * everything else; a session's (free_group) is let go now, while its session is there. */
static int last_user(struct instance *in, int free_group)
{
    int last;
    pthread_mutex_lock(&lifecycle_lock);
    last = in->users == 1;
    if (last && free_group && in->world_group != MPI_GROUP_NULL)
        PMPI_Group_free(&in->world_group);
    pthread_mutex_unlock(&lifecycle_lock);
    return last;
}

static void fewer_users(struct instance *in, int last)
{
    pthread_mutex_lock(&lifecycle_lock);
    if (in->users > 0)
        in->users--;
    pthread_mutex_unlock(&lifecycle_lock);
    if (last && __atomic_load_n(&in->active, __ATOMIC_ACQUIRE))
        stop_instance(in);
}

/* ---- MPI_Init, MPI_Finalize, MPI_Session_init, MPI_Session_finalize, MPI_Abort ---- */

static void start_world_model(int level, void *unused)
{
    (void)unused;
    start_world(level);
}

static int traced_init(int index, uint64_t enter, int ret, int level)
{
    struct traced t;
    if ((unsigned)level >= MAX_LEVELS || ret != MPI_SUCCESS)
        return ret;
    more_users(level, start_world_model, NULL);
    if (trace_begin(&t, level, index, TRACE_KIND_other)) {
        t.r.enter = enter;
        trace_end(&t, 0);
    }
    return ret;
}

_EXTERN_C_ int TR_Init(int *argc, char ***argv, int level, vector *v)
{
    uint64_t enter = trace_ticks();
    return traced_init(_MPI_Init, enter, QMPI_Next_Init(argc, argv, level, v), level);
}

_EXTERN_C_ int TR_Init_thread(int *argc, char ***argv, int required, int *provided, int level, vector *v)
{
    uint64_t enter = trace_ticks();
    return traced_init(_MPI_Init_thread, enter, QMPI_Next_Init_thread(argc, argv, required, provided, level, v), level);
}

/* Entered before the MPI finalizes: a rank that never returns from it (IPM finalizing
 * from an exit handler, above this instance) leaves every record and this one. */
_EXTERN_C_ int TR_Finalize(int level, vector *v)
{
    struct instance *in = &trace_instances[level];
    struct traced t;
    int traced = 0, last = 0, ret;
    if ((unsigned)level >= MAX_LEVELS)
        return QMPI_Next_Finalize(level, v);
    if (__atomic_load_n(&in->active, __ATOMIC_ACQUIRE)) {
        trace_measure_clock(in, 1);
        traced = trace_begin(&t, level, _MPI_Finalize, TRACE_KIND_other);
    }
    last = last_user(in, 0);
    ret = QMPI_Next_Finalize(level, v);
    if (traced)
        trace_end(&t, ret != MPI_SUCCESS);
    fewer_users(in, last);
    return ret;
}

#ifdef MPI_SESSION_NULL
/* The Sessions model (MPI_Session_init without MPI_Init): the rank is the process's in
 * the mpi://WORLD process set, and nothing is communicated for tracing's sake (a
 * collective over the set could hang a process that never joins it): no clock offsets,
 * and the run's identity the launcher's (else 0: the files carry the pid). */
static void start_session_model(int level, void *session)
{
    int rank = 0, size = 1;
    MPI_Group world = MPI_GROUP_NULL;
    if (PMPI_Group_from_session_pset(*(MPI_Session *)session, "mpi://WORLD", &world) != MPI_SUCCESS ||
        PMPI_Group_rank(world, &rank) != MPI_SUCCESS || PMPI_Group_size(world, &size) != MPI_SUCCESS ||
        rank == MPI_UNDEFINED) {
        trace_say("level %d: MPI_Session_init: this process has no rank in mpi://WORLD; not traced", level);
        if (world != MPI_GROUP_NULL)
            PMPI_Group_free(&world);
        return;
    }
    if (start_instance(level, rank, size, trace_launcher_identity(), world))
        trace_calibrate(&trace_instances[level]);
}

_EXTERN_C_ int TR_Session_init(MPI_Info info, MPI_Errhandler errhandler, MPI_Session *session, int level, vector *v)
{
    uint64_t enter = trace_ticks();
    int ret = QMPI_Next_Session_init(info, errhandler, session, level, v);
    struct traced t;
    if ((unsigned)level >= MAX_LEVELS || ret != MPI_SUCCESS)
        return ret;
    more_users(level, start_session_model, session);
    if (trace_begin(&t, level, _MPI_Session_init, TRACE_KIND_other)) {
        t.r.enter = enter;
        trace_end(&t, 0);
    }
    return ret;
}

_EXTERN_C_ int TR_Session_finalize(MPI_Session *session, int level, vector *v)
{
    struct instance *in = &trace_instances[level];
    struct traced t;
    int traced, last, ret;
    if ((unsigned)level >= MAX_LEVELS)
        return QMPI_Next_Session_finalize(session, level, v);
    traced = trace_begin(&t, level, _MPI_Session_finalize, TRACE_KIND_other);
    last = last_user(in, 1);
    ret = QMPI_Next_Session_finalize(session, level, v);
    if (traced)
        trace_end(&t, ret != MPI_SUCCESS);
    fewer_users(in, last);
    return ret;
}
#endif

/* Recorded always (it ends the job): entered, with its communicator and error code (the
 * record's tag), before the MPI aborts; it does not return. */
_EXTERN_C_ int TR_Abort(MPI_Comm comm, int errorcode, int level, vector *v)
{
    struct traced t;
    int ret, traced = trace_start(&t, level, _MPI_Abort, TRACE_KIND_other);
    if (traced) {
        t.r.comm = trace_set_comm(&t, comm);
        t.r.tag = errorcode;
        trace_enter(&t);
    }
    ret = QMPI_Next_Abort(comm, errorcode, level, v);
    if (traced)
        trace_end(&t, ret != MPI_SUCCESS);
    return ret;
}

/* ---- which wrapper the core installs ----
 * trace_roles.qmpi and trace_all.qmpi generate the wrappers of every other function
 * (sample_tools/Makefile links their C into this library, their get_interceptions
 * renamed). MPI_Init, MPI_Init_thread, MPI_Finalize, MPI_Session_init,
 * MPI_Session_finalize and MPI_Abort are recorded always (kind `other`, but they bound
 * the trace). The tool built without the generated parts
 * has only its own wrappers: the weak references are NULL. */
extern char *trace_roles_get_interceptions(int i) __attribute__((weak, visibility("hidden")));
extern char *trace_all_get_interceptions(int i) __attribute__((weak, visibility("hidden")));

static int wanted(const char *name)
{
    return name != NULL && strcmp(name, "NULL") != 0;
}

_EXTERN_C_ char *get_interceptions(int i)
{
    char *name;
    trace_options_once();
    switch (i) {
    case _MPI_Init:
        return "TR_Init";
    case _MPI_Init_thread:
        return "TR_Init_thread";
    case _MPI_Finalize:
        return "TR_Finalize";
    case _MPI_Abort:
        return "TR_Abort";
#ifdef MPI_SESSION_NULL
    case _MPI_Session_init:
        return "TR_Session_init";
    case _MPI_Session_finalize:
        return "TR_Session_finalize";
#endif
    default:
        break;
    }
    if (trace_own_function(i))
        return trace_requests_interception(i);
    if (trace_roles_get_interceptions != NULL && wanted(name = trace_roles_get_interceptions(i)))
        return name;
    if (trace_options.all_functions && trace_all_get_interceptions != NULL)
        return trace_all_get_interceptions(i);
    return "NULL";
}
