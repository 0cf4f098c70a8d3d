/* A tool written by hand to the MPI Forum / MPICH callback interface (seed 002). It
 * includes only <mpi.h>: on MPICH >= 4 that declares the interface; elsewhere build
 * with `-include qmpi.h`. Counts MPI_Bcast/Send/Recv per instance, reads MPI_Pcontrol's
 * variadic tail, reports the application's call site of MPI_Bcast, and prints one
 * line per instance and rank at MPI_Finalize. Counts and the Pcontrol level are
 * updated atomically: exact under MPI_THREAD_MULTIPLE (tests/test_threads.py).
 *
 * Build: mpicc -shared -fPIC -Wall -Wextra -Werror [-include qmpi.h] cbcount.c -o libcbcount.so
 * Run:   QMPI_TOOL_LIST=cbcount:cbcount mpiexec -n 2 ./app   (app linked with -lcbcount -lqmpi,
 *        or LD_PRELOAD=libqmpi.so:libcbcount.so) */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* dladdr; with -include qmpi.h pass -D_GNU_SOURCE instead */
#endif
#include <dlfcn.h>
#include <mpi.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct cbcount {
    int id;
    long bcast, send, recv;
    const char *bcast_site; /* symbol around the application's MPI_Bcast call */
    int pcontrol_level;
    int pcontrol_number;
    char pcontrol_text[32];
};

static struct cbcount *storage(QMPI_Context context, int tool_id)
{
    void *s = NULL;
    QMPI_Get_tool_storage(context, tool_id, &s);
    return (struct cbcount *)s;
}

#define NEXT(type, enum_value, fn, next_id) \
    QMPI_Get_function(tool_id, enum_value, (void (**)(void))&fn, &next_id)

static int cb_Bcast(QMPI_Context context, int tool_id, void *buffer, int count, MPI_Datatype datatype, int root,
                    MPI_Comm comm)
{
    struct cbcount *s = storage(context, tool_id);
    QMPI_Bcast_t *next;
    int next_id;
    void *site = NULL;
    Dl_info info;

    __atomic_fetch_add(&s->bcast, 1, __ATOMIC_RELAXED);
    if (QMPI_Get_calling_address(context, &site) == MPI_SUCCESS && site != NULL && dladdr(site, &info) && info.dli_sname)
        __atomic_store_n(&s->bcast_site, info.dli_sname, __ATOMIC_RELAXED);
    NEXT(QMPI_Bcast_t, MPI_BCAST_T, next, next_id);
    return next(context, next_id, buffer, count, datatype, root, comm);
}

static int cb_Send(QMPI_Context context, int tool_id, const void *buf, int count, MPI_Datatype datatype, int dest,
                   int tag, MPI_Comm comm)
{
    QMPI_Send_t *next;
    int next_id;
    __atomic_fetch_add(&storage(context, tool_id)->send, 1, __ATOMIC_RELAXED);
    NEXT(QMPI_Send_t, MPI_SEND_T, next, next_id);
    return next(context, next_id, buf, count, datatype, dest, tag, comm);
}

static int cb_Recv(QMPI_Context context, int tool_id, void *buf, int count, MPI_Datatype datatype, int source,
                   int tag, MPI_Comm comm, MPI_Status *status)
{
    QMPI_Recv_t *next;
    int next_id;
    __atomic_fetch_add(&storage(context, tool_id)->recv, 1, __ATOMIC_RELAXED);
    NEXT(QMPI_Recv_t, MPI_RECV_T, next, next_id);
    return next(context, next_id, buf, count, datatype, source, tag, comm, status);
}

/* The qmpigen core's way to the variadic tail; weak, so this tool also loads where
 * the MPI's own QMPI passes the tail as `...` (MPICH --enable-qmpi). */
int QMPI_Get_variadic_args(QMPI_Context context, va_list **args) __attribute__((weak));

/* MPI_Pcontrol: the core calls every tool itself; no next call here. */
static int cb_Pcontrol(QMPI_Context context, int tool_id, const int level, ...)
{
    struct cbcount *s = storage(context, tool_id);
    __atomic_store_n(&s->pcontrol_level, level, __ATOMIC_RELAXED);
    if (level == 5) { /* the tail is recorded as a single-threaded test program passes it */
        va_list own, args, *tail = NULL;
        va_start(own, level);
        if (QMPI_Get_variadic_args == NULL || QMPI_Get_variadic_args(context, &tail) != MPI_SUCCESS || tail == NULL)
            tail = &own;
        va_copy(args, *tail);
        s->pcontrol_number = va_arg(args, int);
        strncpy(s->pcontrol_text, va_arg(args, const char *), sizeof s->pcontrol_text - 1);
        va_end(args);
        va_end(own);
    }
    return MPI_SUCCESS;
}

static void cbcount_init_late(int tool_id)
{
    (void)tool_id;
}

static int cb_Finalize(QMPI_Context context, int tool_id)
{
    struct cbcount *s = storage(context, tool_id);
    QMPI_Finalize_t *next;
    QMPI_Comm_rank_t *rank_fn;
    int next_id, rank_id, rank = -1, late;

    NEXT(QMPI_Comm_rank_t, MPI_COMM_RANK_T, rank_fn, rank_id);
    rank_fn(context, rank_id, MPI_COMM_WORLD, &rank);
    /* Registration after initialisation must be refused. */
    late = QMPI_Register_tool_name("cbcount-late", cbcount_init_late) != MPI_SUCCESS &&
           QMPI_Register_function(tool_id, MPI_SEND_T, (void (*)(void))cb_Send) != MPI_SUCCESS;
    printf("cbcount@%d rank %d: bcast=%ld send=%ld recv=%ld site=%s pcontrol=%d,%d,%s late_refused=%d\n", s->id,
           rank, s->bcast, s->send, s->recv, s->bcast_site ? s->bcast_site : "-", s->pcontrol_level,
           s->pcontrol_number, s->pcontrol_text[0] ? s->pcontrol_text : "-", late);
    fflush(stdout);
    NEXT(QMPI_Finalize_t, MPI_FINALIZE_T, next, next_id);
    return next(context, next_id);
}

static void cbcount_init(int tool_id)
{
    struct cbcount *s = calloc(1, sizeof *s);
    const char *misbehave = getenv("CBCOUNT_MISBEHAVE");

    s->id = tool_id;
    QMPI_Register_tool_storage(tool_id, s);
    QMPI_Register_function(tool_id, MPI_BCAST_T, (void (*)(void))cb_Bcast);
    QMPI_Register_function(tool_id, MPI_SEND_T, (void (*)(void))cb_Send);
    QMPI_Register_function(tool_id, MPI_RECV_T, (void (*)(void))cb_Recv);
    QMPI_Register_function(tool_id, MPI_PCONTROL_T, (void (*)(void))cb_Pcontrol);
    QMPI_Register_function(tool_id, MPI_FINALIZE_T, (void (*)(void))cb_Finalize);
    if (misbehave && strcmp(misbehave, "bad_enum") == 0) {
        int rc = QMPI_Register_function(tool_id, 1 << 20, (void (*)(void))cb_Send);
        void (*fn)(void) = NULL;
        int next_id = -1, rc2 = QMPI_Get_function(tool_id, -3, &fn, &next_id);
        printf("cbcount bad_enum register=%d get=%d\n", rc != MPI_SUCCESS, rc2 != MPI_SUCCESS);
        fflush(stdout);
    }
}

__attribute__((constructor)) static void cbcount_register(void)
{
    QMPI_Register_tool_name("cbcount", cbcount_init);
}
