/* clocks.c: the clocks of a rank, and its run's identity (clocks.h). */
#include "clocks.h"
#include "sink.h"
#include "threads.h"
#include <stdlib.h>
#include <sys/random.h>
#include <unistd.h>

#define CLOCK_PINGS 8

void trace_measure_clock(struct instance *in, uint32_t phase)
{
    struct clock_record c;
    struct thread_buffer *tb = trace_thread_buffer(in);
    MPI_Comm comm;
    int peer, ping;
    memset(&c, 0, sizeof c);
    c.kind = R_CLOCK;
    c.size = sizeof c;
    c.phase = phase;
    c.round_trip_ns = UINT64_MAX;
    PMPI_Comm_dup(MPI_COMM_WORLD, &comm); /* our own context: the application's tags are safe */
    for (peer = 1; peer < in->world_size; peer++) {
        for (ping = 0; ping < CLOCK_PINGS; ping++) {
            uint64_t sent, received, remote = 0;
            if (in->rank == 0) {
                PMPI_Recv(&remote, 1, MPI_UINT64_T, peer, ping, comm, MPI_STATUS_IGNORE);
                remote = trace_now_ns();
                PMPI_Send(&remote, 1, MPI_UINT64_T, peer, ping, comm);
            } else if (in->rank == peer) {
                sent = trace_now_ns();
                PMPI_Send(&sent, 1, MPI_UINT64_T, 0, ping, comm);
                PMPI_Recv(&remote, 1, MPI_UINT64_T, 0, ping, comm, MPI_STATUS_IGNORE);
                received = trace_now_ns();
                if (received - sent < c.round_trip_ns) {
                    c.round_trip_ns = received - sent;
                    c.local_ns = sent + (received - sent) / 2;
                    c.offset_ns = (int64_t)(remote - c.local_ns);
                }
            }
        }
    }
    PMPI_Comm_free(&comm);
    if (in->rank == 0 || in->world_size == 1) {
        c.local_ns = trace_now_ns();
        c.round_trip_ns = 0;
    }
    if (tb != NULL)
        trace_append(in, tb, &c, sizeof c);
}

uint64_t trace_run_identity(int rank)
{
    uint64_t id = 0;
    if (rank == 0) {
        struct timespec now;
        clock_gettime(CLOCK_REALTIME, &now);
        if (getrandom(&id, sizeof id, GRND_NONBLOCK) != (ssize_t)sizeof id)
            id = ((uint64_t)now.tv_sec * 1000000000u + (uint64_t)now.tv_nsec) ^ ((uint64_t)getpid() << 32);
        if (id == 0) /* 0: no identity (files before version 3) */
            id = 1;
    }
    PMPI_Bcast(&id, 1, MPI_UINT64_T, 0, MPI_COMM_WORLD);
    return id;
}

#define CALIBRATION_NS 200000u
void trace_calibrate(struct instance *in)
{
    struct thread_buffer *tb = trace_thread_buffer(in);
    uint64_t since;
    if (tb == NULL || tb->stopped)
        return;
    since = trace_now_ns() - tb->last_timer_ns;
    if (since < CALIBRATION_NS) {
        struct timespec pause = {0, (long)(CALIBRATION_NS - since)};
        nanosleep(&pause, NULL);
    }
    trace_add_timer(tb);
}

/* FNV-1a of the launcher's variables that name this job: the same in every process of it. */
uint64_t trace_launcher_identity(void)
{
    static const char *const names[] = {"PMIX_NAMESPACE", "SLURM_JOB_ID", "SLURM_STEP_ID"};
    uint64_t hash = 0xcbf29ce484222325u;
    int found = 0;
    size_t i;
    for (i = 0; i < sizeof names / sizeof names[0]; i++) {
        const char *value = secure_getenv(names[i]), *p;
        if (value == NULL)
            continue;
        found = 1;
        for (p = value; *p; p++)
            hash = (hash ^ (unsigned char)*p) * 0x100000001b3u;
        hash = (hash ^ '/') * 0x100000001b3u;
    }
    return found && hash != 0 ? hash : 0;
}
