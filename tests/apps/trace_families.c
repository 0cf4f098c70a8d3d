/* Every family of MPI function a tracer records with its arguments, called a known number
 * of times on each rank (tests/test_trace_families_app.py): point-to-point in all send
 * modes (blocking, nonblocking, persistent), probes and matched probes, blocking,
 * nonblocking and neighborhood collectives (on a periodic 1-D Cartesian ring), one-sided
 * communication (fence and passive target), derived datatypes in messages and in a file
 * view, and MPI-IO with explicit offsets, individual and shared file pointers, blocking,
 * nonblocking, collective and split collective, in a file in the directory argv[1].
 *
 * Every MPI call goes through CALL, which counts it and checks its return code (errors
 * are returned on the communicators, files and window: one line on stderr, then
 * MPI_Abort). At the end rank 0 gathers every rank's counts and prints, for each rank,
 * "count <rank> MPI_<Name> <n>" per function called and "bytes <rank> read <n>",
 * "bytes <rank> written <n>": count * type size summed over the data-moving file calls
 * (a split collective's bytes are counted at its _begin, a nonblocking call's when it is
 * started). One process prints it all: launchers forward each rank's output in chunks,
 * and chunks of different ranks can interleave in the middle of a line. The gathering
 * MPI_Gather is counted, and MPI_Finalize is counted (1) before it is called. Every
 * count is fixed: no call is repeated until something happens.
 * COMPILE: mpicc -Wall -Wextra -Werror trace_families.c -o trace_families
 * RUN: mpiexec -n 4 ./trace_families DIR */
#include <mpi.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if MPI_VERSION < 3 || (MPI_VERSION == 3 && MPI_SUBVERSION < 1)
#error "trace_families needs MPI 3.1 (MPI_File_iread_all and the other nonblocking collective file calls)"
#endif

#define FUNCTIONS(X)                                                                                                   \
    X(Init)                                                                                                            \
    X(Finalize)                                                                                                        \
    X(Comm_rank)                                                                                                       \
    X(Comm_size)                                                                                                       \
    X(Comm_set_errhandler)                                                                                             \
    X(File_set_errhandler)                                                                                             \
    X(Win_set_errhandler)                                                                                              \
    X(Type_size)                                                                                                       \
    X(Type_vector)                                                                                                     \
    X(Type_contiguous)                                                                                                 \
    X(Type_create_struct)                                                                                              \
    X(Type_commit)                                                                                                     \
    X(Type_free)                                                                                                       \
    X(Info_create)                                                                                                     \
    X(Info_set)                                                                                                        \
    X(Info_free)                                                                                                       \
    X(Send)                                                                                                            \
    X(Recv)                                                                                                            \
    X(Ssend)                                                                                                           \
    X(Bsend)                                                                                                           \
    X(Rsend)                                                                                                           \
    X(Buffer_attach)                                                                                                   \
    X(Buffer_detach)                                                                                                   \
    X(Isend)                                                                                                           \
    X(Issend)                                                                                                          \
    X(Ibsend)                                                                                                          \
    X(Irsend)                                                                                                          \
    X(Irecv)                                                                                                           \
    X(Sendrecv)                                                                                                        \
    X(Sendrecv_replace)                                                                                                \
    X(Probe)                                                                                                           \
    X(Iprobe)                                                                                                          \
    X(Mprobe)                                                                                                          \
    X(Improbe)                                                                                                         \
    X(Mrecv)                                                                                                           \
    X(Imrecv)                                                                                                          \
    X(Send_init)                                                                                                       \
    X(Bsend_init)                                                                                                      \
    X(Rsend_init)                                                                                                      \
    X(Ssend_init)                                                                                                      \
    X(Recv_init)                                                                                                       \
    X(Start)                                                                                                           \
    X(Startall)                                                                                                        \
    X(Request_free)                                                                                                    \
    X(Wait)                                                                                                            \
    X(Waitall)                                                                                                         \
    X(Test)                                                                                                            \
    X(Barrier)                                                                                                         \
    X(Bcast)                                                                                                           \
    X(Gather)                                                                                                          \
    X(Gatherv)                                                                                                         \
    X(Scatter)                                                                                                         \
    X(Scatterv)                                                                                                        \
    X(Allgather)                                                                                                       \
    X(Allgatherv)                                                                                                      \
    X(Alltoall)                                                                                                        \
    X(Alltoallv)                                                                                                       \
    X(Reduce)                                                                                                          \
    X(Allreduce)                                                                                                       \
    X(Reduce_scatter)                                                                                                  \
    X(Reduce_scatter_block)                                                                                            \
    X(Scan)                                                                                                            \
    X(Exscan)                                                                                                          \
    X(Ibarrier)                                                                                                        \
    X(Ibcast)                                                                                                          \
    X(Iallreduce)                                                                                                      \
    X(Ireduce)                                                                                                         \
    X(Iallgather)                                                                                                      \
    X(Ialltoall)                                                                                                       \
    X(Igather)                                                                                                         \
    X(Iscatter)                                                                                                        \
    X(Iscan)                                                                                                           \
    X(Iexscan)                                                                                                         \
    X(Cart_create)                                                                                                     \
    X(Comm_free)                                                                                                       \
    X(Neighbor_allgather)                                                                                              \
    X(Neighbor_allgatherv)                                                                                             \
    X(Neighbor_alltoall)                                                                                               \
    X(Neighbor_alltoallv)                                                                                              \
    X(Ineighbor_allgather)                                                                                             \
    X(Ineighbor_alltoall)                                                                                              \
    X(Win_create)                                                                                                      \
    X(Win_fence)                                                                                                       \
    X(Put)                                                                                                             \
    X(Get)                                                                                                             \
    X(Accumulate)                                                                                                      \
    X(Get_accumulate)                                                                                                  \
    X(Fetch_and_op)                                                                                                    \
    X(Compare_and_swap)                                                                                                \
    X(Win_lock)                                                                                                        \
    X(Win_unlock)                                                                                                      \
    X(Rput)                                                                                                            \
    X(Rget)                                                                                                            \
    X(Win_free)                                                                                                        \
    X(File_open)                                                                                                       \
    X(File_close)                                                                                                      \
    X(File_delete)                                                                                                     \
    X(File_set_size)                                                                                                   \
    X(File_preallocate)                                                                                                \
    X(File_get_size)                                                                                                   \
    X(File_set_atomicity)                                                                                              \
    X(File_set_info)                                                                                                   \
    X(File_set_view)                                                                                                   \
    X(File_sync)                                                                                                       \
    X(File_seek)                                                                                                       \
    X(File_seek_shared)                                                                                                \
    X(File_write_at)                                                                                                   \
    X(File_read_at)                                                                                                    \
    X(File_write_at_all)                                                                                               \
    X(File_read_at_all)                                                                                                \
    X(File_iwrite_at)                                                                                                  \
    X(File_iread_at)                                                                                                   \
    X(File_write_at_all_begin)                                                                                         \
    X(File_write_at_all_end)                                                                                           \
    X(File_read_at_all_begin)                                                                                          \
    X(File_read_at_all_end)                                                                                            \
    X(File_iwrite_at_all)                                                                                              \
    X(File_iread_at_all)                                                                                               \
    X(File_write)                                                                                                      \
    X(File_read)                                                                                                       \
    X(File_iwrite)                                                                                                     \
    X(File_iread)                                                                                                      \
    X(File_write_all)                                                                                                  \
    X(File_read_all)                                                                                                   \
    X(File_write_all_begin)                                                                                            \
    X(File_write_all_end)                                                                                              \
    X(File_read_all_begin)                                                                                             \
    X(File_read_all_end)                                                                                               \
    X(File_iwrite_all)                                                                                                 \
    X(File_iread_all)                                                                                                  \
    X(File_write_shared)                                                                                               \
    X(File_read_shared)                                                                                                \
    X(File_iwrite_shared)                                                                                              \
    X(File_iread_shared)                                                                                               \
    X(File_write_ordered)                                                                                              \
    X(File_read_ordered)                                                                                               \
    X(File_write_ordered_begin)                                                                                        \
    X(File_write_ordered_end)                                                                                          \
    X(File_read_ordered_begin)                                                                                         \
    X(File_read_ordered_end)

#define ENUM_ENTRY(name) F_##name,
#define NAME_ENTRY(name) "MPI_" #name,
enum { FUNCTIONS(ENUM_ENTRY) N_FUNCTIONS };
static const char *const names[N_FUNCTIONS] = {FUNCTIONS(NAME_ENTRY)};

/* Per rank: the calls of each function, then the bytes read and written (gathered as one row). */
enum { READ_BYTES = N_FUNCTIONS, WRITTEN_BYTES, ROW };
static long long counts[ROW];
static int rank = -1;

static void check(int rc, const char *name, int line)
{
    char text[MPI_MAX_ERROR_STRING];
    int length = 0, i;
    if (rc == MPI_SUCCESS)
        return;
    if (MPI_Error_string(rc, text, &length) != MPI_SUCCESS)
        snprintf(text, sizeof text, "error %d", rc);
    for (i = 0; text[i]; i++) /* one line: MPICH's strings hold an error stack, a line a frame */
        if (text[i] == '\n')
            text[i] = ' ';
    fprintf(stderr, "trace_families: rank %d: %s failed at line %d: %s\n", rank, name, line, text);
    fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, 1);
}

static void expect(int ok, const char *what, int line)
{
    if (ok)
        return;
    fprintf(stderr, "trace_families: rank %d: line %d: not true: %s\n", rank, line, what);
    fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, 1);
}

/* The count goes up before the call: the comma operator orders them. */
#define CALL(fn, ...) (counts[F_##fn]++, check(MPI_##fn(__VA_ARGS__), "MPI_" #fn, __LINE__))
#define EXPECT(cond) expect((cond) != 0, #cond, __LINE__)

#define MAX_RANKS 64
#define UNIT 8 /* ints per rank in each region of the file: 32 bytes */
#define REGIONS 15

static void fill(int *buf, int n, int seed)
{
    int i;
    for (i = 0; i < n; i++)
        buf[i] = seed * 1000 + i;
}

static int same(const int *a, const int *b, int n)
{
    return memcmp(a, b, (size_t)n * sizeof *a) == 0;
}

int main(int argc, char **argv)
{
    int size, left, right, i, flag, int_size, double_size, row_size;
    char path[4096], self_path[4096];
    MPI_Status status;
    /* Waitall gets a real array, not MPI_STATUSES_IGNORE: GCC 12 reads MPICH 4.0's
     * MPI_Status array_of_statuses[] as an array to write, and that constant as one of
     * size 0 (-Werror=stringop-overflow) */
    MPI_Status statuses[16];
    MPI_Request req[16];

    CALL(Init, &argc, &argv);
    CALL(Comm_rank, MPI_COMM_WORLD, &rank);
    CALL(Comm_size, MPI_COMM_WORLD, &size);
    CALL(Comm_set_errhandler, MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    /* MPI_FILE_NULL's handler is the one files opened later start with (File_open's own errors too) */
    CALL(File_set_errhandler, MPI_FILE_NULL, MPI_ERRORS_RETURN);
    if (argc < 2 || size < 2 || size > MAX_RANKS) {
        if (rank == 0)
            fprintf(stderr, "usage: mpiexec -n 2..%d trace_families DIR\n", MAX_RANKS);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    EXPECT(snprintf(path, sizeof path, "%s/families.dat", argv[1]) < (int)sizeof path);
    EXPECT(snprintf(self_path, sizeof self_path, "%s/self-%d.dat", argv[1], rank) < (int)sizeof self_path);
    right = (rank + 1) % size;
    left = (rank + size - 1) % size;

    /* -- derived datatypes ------------------------------------------------------------------ */
    struct pair {
        int i;
        double d;
    };
    MPI_Datatype every_other, row, pair_type, interleaved;
    {
        int lengths[2] = {1, 1};
        MPI_Aint displacements[2] = {offsetof(struct pair, i), offsetof(struct pair, d)};
        MPI_Datatype types[2] = {MPI_INT, MPI_DOUBLE};
        CALL(Type_vector, 4, 1, 2, MPI_INT, &every_other); /* ints 0, 2, 4, 6 of an array */
        CALL(Type_contiguous, UNIT, MPI_INT, &row);
        CALL(Type_create_struct, 2, lengths, displacements, types, &pair_type);
        /* the file view: UNIT ints as 4 blocks of 2, the ranks' blocks interleaved */
        CALL(Type_vector, UNIT / 2, 2, 2 * size, MPI_INT, &interleaved);
        CALL(Type_commit, &every_other);
        CALL(Type_commit, &row);
        CALL(Type_commit, &pair_type);
        CALL(Type_commit, &interleaved);
        CALL(Type_size, MPI_INT, &int_size);
        CALL(Type_size, MPI_DOUBLE, &double_size);
        CALL(Type_size, row, &row_size);
        EXPECT(row_size == UNIT * int_size);
    }

    /* -- point-to-point: each send mode to the right, its receive from the left ------------- */
    {
        int out[8], in[8], evens[4], x = rank, y = -1;
        fill(out, 8, rank);
        /* blocking standard and synchronous: even ranks send first, odd ranks receive first */
        if (rank % 2 == 0) {
            CALL(Send, out, 1, every_other, right, 1, MPI_COMM_WORLD);
            CALL(Recv, evens, 4, MPI_INT, left, 1, MPI_COMM_WORLD, &status);
            CALL(Ssend, out, 8, MPI_INT, right, 2, MPI_COMM_WORLD);
            CALL(Recv, in, 8, MPI_INT, left, 2, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        } else {
            CALL(Recv, evens, 4, MPI_INT, left, 1, MPI_COMM_WORLD, &status);
            CALL(Send, out, 1, every_other, right, 1, MPI_COMM_WORLD);
            CALL(Recv, in, 8, MPI_INT, left, 2, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            CALL(Ssend, out, 8, MPI_INT, right, 2, MPI_COMM_WORLD);
        }
        EXPECT(evens[0] == left * 1000 && evens[3] == left * 1000 + 6);
        EXPECT(in[7] == left * 1000 + 7);

        /* buffered: attached for Bsend, Ibsend and Bsend_init (below), detached after them */
        int bsend_size = 3 * (MPI_BSEND_OVERHEAD + 8 * int_size);
        char *bsend_buffer = malloc((size_t)bsend_size);
        void *detached;
        int detached_size;
        EXPECT(bsend_buffer != NULL);
        CALL(Buffer_attach, bsend_buffer, bsend_size);
        CALL(Bsend, out, 8, MPI_INT, right, 3, MPI_COMM_WORLD);
        CALL(Recv, in, 8, MPI_INT, left, 3, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        CALL(Ibsend, out, 8, MPI_INT, right, 4, MPI_COMM_WORLD, &req[0]);
        CALL(Recv, in, 8, MPI_INT, left, 4, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        CALL(Wait, &req[0], MPI_STATUS_IGNORE);

        /* ready: the receive is posted before the barrier, the send starts after it */
        CALL(Irecv, in, 8, MPI_INT, left, 5, MPI_COMM_WORLD, &req[0]);
        CALL(Barrier, MPI_COMM_WORLD);
        CALL(Rsend, out, 8, MPI_INT, right, 5, MPI_COMM_WORLD);
        CALL(Wait, &req[0], MPI_STATUS_IGNORE);
        CALL(Irecv, in, 8, MPI_INT, left, 6, MPI_COMM_WORLD, &req[0]);
        CALL(Barrier, MPI_COMM_WORLD);
        CALL(Irsend, out, 8, MPI_INT, right, 6, MPI_COMM_WORLD, &req[1]);
        CALL(Waitall, 2, req, statuses);

        /* nonblocking standard and synchronous */
        CALL(Irecv, in, 8, MPI_INT, left, 7, MPI_COMM_WORLD, &req[0]);
        CALL(Isend, out, 8, MPI_INT, right, 7, MPI_COMM_WORLD, &req[1]);
        CALL(Waitall, 2, req, statuses);
        CALL(Irecv, in, 8, MPI_INT, left, 8, MPI_COMM_WORLD, &req[0]);
        CALL(Issend, out, 8, MPI_INT, right, 8, MPI_COMM_WORLD, &req[1]);
        CALL(Waitall, 2, req, statuses);
        EXPECT(in[0] == left * 1000 && in[7] == left * 1000 + 7);

        /* combined: a struct to the right, and a buffer replaced by the left's */
        struct pair mine = {rank, rank + 0.5}, theirs = {-1, -1.0};
        CALL(Sendrecv, &mine, 1, pair_type, right, 9, &theirs, 1, pair_type, left, 9, MPI_COMM_WORLD,
             MPI_STATUS_IGNORE);
        EXPECT(theirs.i == left && theirs.d == left + 0.5);
        memcpy(in, out, sizeof in);
        CALL(Sendrecv_replace, in, 8, MPI_INT, right, 10, left, 10, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        EXPECT(in[0] == left * 1000);

        /* probes: MPI_Probe waits until the message is there, so what probes after it
         * (MPI_Iprobe, MPI_Improbe) finds it on the first call */
        MPI_Message message;
        CALL(Isend, &x, 1, MPI_INT, right, 11, MPI_COMM_WORLD, &req[0]);
        CALL(Probe, left, 11, MPI_COMM_WORLD, &status);
        CALL(Iprobe, left, 11, MPI_COMM_WORLD, &flag, &status);
        EXPECT(flag && status.MPI_SOURCE == left && status.MPI_TAG == 11);
        CALL(Recv, &y, 1, MPI_INT, left, 11, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        CALL(Wait, &req[0], MPI_STATUS_IGNORE);
        EXPECT(y == left);
        CALL(Isend, &x, 1, MPI_INT, right, 12, MPI_COMM_WORLD, &req[0]);
        CALL(Mprobe, left, 12, MPI_COMM_WORLD, &message, &status);
        y = -1;
        CALL(Mrecv, &y, 1, MPI_INT, &message, MPI_STATUS_IGNORE);
        CALL(Wait, &req[0], MPI_STATUS_IGNORE);
        EXPECT(y == left);
        CALL(Isend, &x, 1, MPI_INT, right, 13, MPI_COMM_WORLD, &req[0]);
        CALL(Probe, left, 13, MPI_COMM_WORLD, &status);
        CALL(Improbe, left, 13, MPI_COMM_WORLD, &flag, &message, &status);
        EXPECT(flag);
        y = -1;
        CALL(Imrecv, &y, 1, MPI_INT, &message, &req[1]);
        CALL(Waitall, 2, req, statuses);
        EXPECT(y == left);

        /* persistent: every send mode with its persistent receive, started one by one and together */
        MPI_Request p[8];
        CALL(Recv_init, in, 8, MPI_INT, left, 20, MPI_COMM_WORLD, &p[0]);
        CALL(Send_init, out, 8, MPI_INT, right, 20, MPI_COMM_WORLD, &p[1]);
        CALL(Startall, 2, &p[0]);
        CALL(Waitall, 2, &p[0], statuses);
        CALL(Start, &p[0]);
        CALL(Start, &p[1]);
        CALL(Waitall, 2, &p[0], statuses);
        CALL(Recv_init, in, 8, MPI_INT, left, 21, MPI_COMM_WORLD, &p[2]);
        CALL(Ssend_init, out, 8, MPI_INT, right, 21, MPI_COMM_WORLD, &p[3]);
        CALL(Startall, 2, &p[2]);
        CALL(Waitall, 2, &p[2], statuses);
        CALL(Recv_init, in, 8, MPI_INT, left, 22, MPI_COMM_WORLD, &p[4]);
        CALL(Bsend_init, out, 8, MPI_INT, right, 22, MPI_COMM_WORLD, &p[5]);
        CALL(Start, &p[4]);
        CALL(Start, &p[5]);
        CALL(Wait, &p[5], MPI_STATUS_IGNORE);
        CALL(Wait, &p[4], MPI_STATUS_IGNORE);
        CALL(Recv_init, in, 8, MPI_INT, left, 23, MPI_COMM_WORLD, &p[6]);
        CALL(Rsend_init, out, 8, MPI_INT, right, 23, MPI_COMM_WORLD, &p[7]);
        CALL(Start, &p[6]);
        CALL(Barrier, MPI_COMM_WORLD);
        CALL(Start, &p[7]);
        CALL(Waitall, 2, &p[6], statuses);
        EXPECT(in[5] == left * 1000 + 5);
        for (i = 0; i < 8; i++)
            CALL(Request_free, &p[i]);
        CALL(Buffer_detach, &detached, &detached_size);
        EXPECT(detached == (void *)bsend_buffer && detached_size == bsend_size);
        free(bsend_buffer);
    }

    /* -- blocking collectives ----------------------------------------------------------------- */
    {
        int one = rank + 1, sum = 0, value = -1, all[MAX_RANKS], many[MAX_RANKS], counts_of[MAX_RANKS],
            displs[MAX_RANKS];
        for (i = 0; i < size; i++) {
            many[i] = rank * 100 + i;
            counts_of[i] = 1;
            displs[i] = i;
        }
        CALL(Barrier, MPI_COMM_WORLD);
        value = rank == 0 ? 42 : -1;
        CALL(Bcast, &value, 1, MPI_INT, 0, MPI_COMM_WORLD);
        EXPECT(value == 42);
        CALL(Gather, &one, 1, MPI_INT, all, 1, MPI_INT, 0, MPI_COMM_WORLD);
        EXPECT(rank != 0 || all[size - 1] == size);
        CALL(Gatherv, &one, 1, MPI_INT, all, counts_of, displs, MPI_INT, size - 1, MPI_COMM_WORLD);
        EXPECT(rank != size - 1 || all[0] == 1);
        CALL(Scatter, many, 1, MPI_INT, &value, 1, MPI_INT, 0, MPI_COMM_WORLD);
        EXPECT(value == rank);
        CALL(Scatterv, many, counts_of, displs, MPI_INT, &value, 1, MPI_INT, size - 1, MPI_COMM_WORLD);
        EXPECT(value == (size - 1) * 100 + rank);
        CALL(Allgather, &one, 1, MPI_INT, all, 1, MPI_INT, MPI_COMM_WORLD);
        EXPECT(all[left] == left + 1);
        CALL(Allgatherv, &one, 1, MPI_INT, all, counts_of, displs, MPI_INT, MPI_COMM_WORLD);
        EXPECT(all[right] == right + 1);
        CALL(Alltoall, many, 1, MPI_INT, all, 1, MPI_INT, MPI_COMM_WORLD);
        EXPECT(all[left] == left * 100 + rank);
        CALL(Alltoallv, many, counts_of, displs, MPI_INT, all, counts_of, displs, MPI_INT, MPI_COMM_WORLD);
        EXPECT(all[right] == right * 100 + rank);
        CALL(Reduce, &one, &sum, 1, MPI_INT, MPI_SUM, 0, MPI_COMM_WORLD);
        EXPECT(rank != 0 || sum == size * (size + 1) / 2);
        CALL(Allreduce, &one, &sum, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
        EXPECT(sum == size);
        CALL(Reduce_scatter, many, &value, counts_of, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
        EXPECT(value == 100 * size * (size - 1) / 2 + size * rank);
        CALL(Reduce_scatter_block, many, &value, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
        EXPECT(value == 100 * size * (size - 1) / 2 + size * rank);
        CALL(Scan, &one, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
        EXPECT(sum == (rank + 1) * (rank + 2) / 2);
        CALL(Exscan, &one, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
        EXPECT(rank == 0 || sum == rank * (rank + 1) / 2);
    }

    /* -- nonblocking collectives ------------------------------------------------------------------ */
    {
        int one = rank + 1, value = rank == 0 ? 7 : -1, sum = 0, total = 0, scanned = 0, exscanned = 0, got = -1;
        int all[MAX_RANKS], swapped[MAX_RANKS], gathered[MAX_RANKS], many[MAX_RANKS];
        for (i = 0; i < size; i++)
            many[i] = rank * 100 + i;
        /* one test, then a wait: on the request, or on MPI_REQUEST_NULL if the test completed it
         * (a wait on a null request returns at once), so both are called once whatever the timing */
        CALL(Ibarrier, MPI_COMM_WORLD, &req[0]);
        CALL(Test, &req[0], &flag, MPI_STATUS_IGNORE);
        CALL(Wait, &req[0], MPI_STATUS_IGNORE);
        CALL(Ibcast, &value, 1, MPI_INT, 0, MPI_COMM_WORLD, &req[0]);
        CALL(Wait, &req[0], MPI_STATUS_IGNORE);
        EXPECT(value == 7);
        CALL(Iallreduce, &one, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD, &req[0]);
        CALL(Ireduce, &one, &total, 1, MPI_INT, MPI_MAX, 0, MPI_COMM_WORLD, &req[1]);
        CALL(Iallgather, &one, 1, MPI_INT, all, 1, MPI_INT, MPI_COMM_WORLD, &req[2]);
        CALL(Ialltoall, many, 1, MPI_INT, swapped, 1, MPI_INT, MPI_COMM_WORLD, &req[3]);
        CALL(Igather, &one, 1, MPI_INT, gathered, 1, MPI_INT, 0, MPI_COMM_WORLD, &req[4]);
        CALL(Iscatter, many, 1, MPI_INT, &got, 1, MPI_INT, size - 1, MPI_COMM_WORLD, &req[5]);
        CALL(Iscan, &one, &scanned, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD, &req[6]);
        CALL(Iexscan, &one, &exscanned, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD, &req[7]);
        CALL(Waitall, 8, req, statuses);
        EXPECT(sum == size * (size + 1) / 2);
        EXPECT(rank != 0 || (total == size && gathered[size - 1] == size));
        EXPECT(all[right] == right + 1 && swapped[left] == left * 100 + rank);
        EXPECT(got == (size - 1) * 100 + rank);
        EXPECT(scanned == (rank + 1) * (rank + 2) / 2 && (rank == 0 || exscanned == rank * (rank + 1) / 2));
    }

    /* -- neighborhood collectives on a periodic ring: the neighbors are left, then right ------ */
    {
        MPI_Comm ring;
        int dims[1] = {size}, periods[1] = {1}, mine[2] = {rank, rank + 100}, from[2] = {-1, -1};
        int two_counts[2] = {1, 1}, two_displs[2] = {0, 1}, to[2] = {rank * 10, rank * 10 + 1}, got[2] = {-1, -1};
        CALL(Cart_create, MPI_COMM_WORLD, 1, dims, periods, 0, &ring);
        CALL(Neighbor_allgather, mine, 1, MPI_INT, from, 1, MPI_INT, ring);
        EXPECT(from[0] == left && from[1] == right);
        CALL(Neighbor_allgatherv, &mine[1], 1, MPI_INT, from, two_counts, two_displs, MPI_INT, ring);
        EXPECT(from[0] == left + 100 && from[1] == right + 100);
        /* to[0] goes to the left, which has this rank on its right: it arrives in got[1] there */
        CALL(Neighbor_alltoall, to, 1, MPI_INT, got, 1, MPI_INT, ring);
        EXPECT(got[0] == left * 10 + 1 && got[1] == right * 10);
        CALL(Neighbor_alltoallv, to, two_counts, two_displs, MPI_INT, got, two_counts, two_displs, MPI_INT, ring);
        EXPECT(got[0] == left * 10 + 1 && got[1] == right * 10);
        CALL(Ineighbor_allgather, mine, 1, MPI_INT, from, 1, MPI_INT, ring, &req[0]);
        CALL(Ineighbor_alltoall, to, 1, MPI_INT, got, 1, MPI_INT, ring, &req[1]);
        CALL(Waitall, 2, req, statuses);
        EXPECT(from[0] == left && from[1] == right && got[0] == left * 10 + 1 && got[1] == right * 10);
        CALL(Comm_free, &ring);
    }

    /* -- one-sided: each rank works on its right neighbor's window, one slot per operation ----- */
    {
        int slots[8] = {0, rank * 10, 0, 0, 0, 0, 0, rank * 10 + 7};
        int value = rank, got = -1, add = rank + 1, unit = 1, old = -1, fetched = -1, zero = 0, swap = rank + 100,
            swapped = -1, remote = rank + 200, read_back = -1;
        MPI_Win win;
        CALL(Win_create, slots, (MPI_Aint)sizeof slots, int_size, MPI_INFO_NULL, MPI_COMM_WORLD, &win);
        CALL(Win_set_errhandler, win, MPI_ERRORS_RETURN);
        CALL(Win_fence, MPI_MODE_NOPRECEDE, win);
        CALL(Put, &value, 1, MPI_INT, right, 0, 1, MPI_INT, win);
        CALL(Get, &got, 1, MPI_INT, right, 1, 1, MPI_INT, win);
        CALL(Win_fence, 0, win);
        CALL(Accumulate, &add, 1, MPI_INT, right, 2, 1, MPI_INT, MPI_SUM, win);
        CALL(Get_accumulate, &unit, 1, MPI_INT, &old, 1, MPI_INT, right, 3, 1, MPI_INT, MPI_SUM, win);
        CALL(Fetch_and_op, &unit, &fetched, MPI_INT, right, 4, MPI_SUM, win);
        CALL(Compare_and_swap, &swap, &zero, &swapped, MPI_INT, right, 5, win);
        CALL(Win_fence, MPI_MODE_NOSUCCEED, win);
        EXPECT(got == right * 10 && old == 0 && fetched == 0 && swapped == 0);
        EXPECT(slots[0] == left && slots[2] == left + 1 && slots[3] == 1 && slots[4] == 1 && slots[5] == left + 100);
        CALL(Win_lock, MPI_LOCK_SHARED, right, 0, win);
        CALL(Rput, &remote, 1, MPI_INT, right, 6, 1, MPI_INT, win, &req[0]);
        CALL(Wait, &req[0], MPI_STATUS_IGNORE);
        CALL(Rget, &read_back, 1, MPI_INT, right, 7, 1, MPI_INT, win, &req[0]);
        CALL(Wait, &req[0], MPI_STATUS_IGNORE);
        CALL(Win_unlock, right, win);
        EXPECT(read_back == right * 10 + 7);
        CALL(Win_free, &win);
    }

    /* -- MPI-IO: region k of the file holds UNIT ints per rank, rank r's at (k * size + r) * UNIT;
     * each data-moving call moves UNIT ints (or UNIT / 2 doubles), 32 bytes ------------------- */
    {
        MPI_File fh, self;
        MPI_Info info;
        MPI_Offset file_size = -1, unit_bytes = (MPI_Offset)UNIT * int_size;
        int out[UNIT], in[UNIT];
        double dout[UNIT / 2], din[UNIT / 2];
        long long *read_bytes = &counts[READ_BYTES], *written = &counts[WRITTEN_BYTES];
#define AT(k) (((MPI_Offset)(k)*size + rank) * unit_bytes)
#define REGION(k) ((MPI_Offset)(k)*size * unit_bytes)
#define FRESH(k) (fill(out, UNIT, rank * 100 + (k)), memset(in, 0xff, sizeof in))
        for (i = 0; i < UNIT / 2; i++)
            dout[i] = rank + i / 4.0;

        CALL(Info_create, &info);
        CALL(Info_set, info, "access_style", "read_mostly");
        CALL(File_open, MPI_COMM_WORLD, path, MPI_MODE_CREATE | MPI_MODE_RDWR, MPI_INFO_NULL, &fh);
        CALL(File_set_info, fh, info);
        CALL(File_set_size, fh, 0);
        CALL(File_preallocate, fh, REGION(REGIONS));
        CALL(File_get_size, fh, &file_size);
        EXPECT(file_size == REGION(REGIONS));
        CALL(File_set_atomicity, fh, 1);
        CALL(File_set_atomicity, fh, 0);

        /* explicit offsets */
        FRESH(0);
        CALL(File_write_at, fh, AT(0), out, UNIT, MPI_INT, MPI_STATUS_IGNORE), *written += UNIT * int_size;
        CALL(File_read_at, fh, AT(0), in, UNIT, MPI_INT, MPI_STATUS_IGNORE), *read_bytes += UNIT * int_size;
        EXPECT(same(in, out, UNIT));
        FRESH(1);
        CALL(File_write_at_all, fh, AT(1), out, UNIT, MPI_INT, MPI_STATUS_IGNORE), *written += UNIT * int_size;
        CALL(File_read_at_all, fh, AT(1), in, UNIT, MPI_INT, MPI_STATUS_IGNORE), *read_bytes += UNIT * int_size;
        EXPECT(same(in, out, UNIT));
        FRESH(2);
        CALL(File_iwrite_at, fh, AT(2), out, UNIT, MPI_INT, &req[0]), *written += UNIT * int_size;
        CALL(Wait, &req[0], MPI_STATUS_IGNORE);
        CALL(File_iread_at, fh, AT(2), in, UNIT, MPI_INT, &req[0]), *read_bytes += UNIT * int_size;
        CALL(Wait, &req[0], MPI_STATUS_IGNORE);
        EXPECT(same(in, out, UNIT));
        FRESH(3);
        CALL(File_write_at_all_begin, fh, AT(3), out, UNIT, MPI_INT), *written += UNIT * int_size;
        CALL(File_write_at_all_end, fh, out, MPI_STATUS_IGNORE);
        CALL(File_read_at_all_begin, fh, AT(3), in, UNIT, MPI_INT), *read_bytes += UNIT * int_size;
        CALL(File_read_at_all_end, fh, in, MPI_STATUS_IGNORE);
        EXPECT(same(in, out, UNIT));
        FRESH(4);
        CALL(File_iwrite_at_all, fh, AT(4), out, UNIT, MPI_INT, &req[0]), *written += UNIT * int_size;
        CALL(Wait, &req[0], MPI_STATUS_IGNORE);
        CALL(File_iread_at_all, fh, AT(4), in, UNIT, MPI_INT, &req[0]), *read_bytes += UNIT * int_size;
        CALL(Wait, &req[0], MPI_STATUS_IGNORE);
        EXPECT(same(in, out, UNIT));

        /* individual file pointers */
        FRESH(5);
        CALL(File_seek, fh, AT(5), MPI_SEEK_SET);
        CALL(File_write, fh, out, UNIT, MPI_INT, MPI_STATUS_IGNORE), *written += UNIT * int_size;
        CALL(File_seek, fh, -unit_bytes, MPI_SEEK_CUR);
        CALL(File_read, fh, in, UNIT, MPI_INT, MPI_STATUS_IGNORE), *read_bytes += UNIT * int_size;
        EXPECT(same(in, out, UNIT));
        FRESH(6);
        CALL(File_seek, fh, AT(6), MPI_SEEK_SET);
        CALL(File_iwrite, fh, out, UNIT, MPI_INT, &req[0]), *written += UNIT * int_size;
        CALL(Wait, &req[0], MPI_STATUS_IGNORE);
        CALL(File_seek, fh, AT(6), MPI_SEEK_SET);
        CALL(File_iread, fh, in, UNIT, MPI_INT, &req[0]), *read_bytes += UNIT * int_size;
        CALL(Wait, &req[0], MPI_STATUS_IGNORE);
        EXPECT(same(in, out, UNIT));
        FRESH(7);
        CALL(File_seek, fh, AT(7), MPI_SEEK_SET);
        CALL(File_write_all, fh, out, UNIT, MPI_INT, MPI_STATUS_IGNORE), *written += UNIT * int_size;
        CALL(File_seek, fh, AT(7), MPI_SEEK_SET);
        CALL(File_read_all, fh, in, UNIT, MPI_INT, MPI_STATUS_IGNORE), *read_bytes += UNIT * int_size;
        EXPECT(same(in, out, UNIT));
        FRESH(8);
        CALL(File_seek, fh, AT(8), MPI_SEEK_SET);
        CALL(File_write_all_begin, fh, out, UNIT, MPI_INT), *written += UNIT * int_size;
        CALL(File_write_all_end, fh, out, MPI_STATUS_IGNORE);
        CALL(File_seek, fh, AT(8), MPI_SEEK_SET);
        CALL(File_read_all_begin, fh, in, UNIT, MPI_INT), *read_bytes += UNIT * int_size;
        CALL(File_read_all_end, fh, in, MPI_STATUS_IGNORE);
        EXPECT(same(in, out, UNIT));
        FRESH(9);
        CALL(File_seek, fh, AT(9), MPI_SEEK_SET);
        CALL(File_iwrite_all, fh, out, UNIT, MPI_INT, &req[0]), *written += UNIT * int_size;
        CALL(Wait, &req[0], MPI_STATUS_IGNORE);
        CALL(File_seek, fh, AT(9), MPI_SEEK_SET);
        CALL(File_iread_all, fh, in, UNIT, MPI_INT, &req[0]), *read_bytes += UNIT * int_size;
        CALL(Wait, &req[0], MPI_STATUS_IGNORE);
        EXPECT(same(in, out, UNIT));

        /* the shared file pointer, in doubles. A barrier before each MPI_File_seek_shared: the
         * ranks' last shared-pointer calls are over before it moves the pointer. Shared calls
         * land in any rank order, so only the ordered ones are read back and compared. */
        CALL(Barrier, MPI_COMM_WORLD);
        CALL(File_seek_shared, fh, REGION(10), MPI_SEEK_SET);
        CALL(File_write_shared, fh, dout, UNIT / 2, MPI_DOUBLE, MPI_STATUS_IGNORE), *written += UNIT / 2 * double_size;
        CALL(Barrier, MPI_COMM_WORLD);
        CALL(File_seek_shared, fh, REGION(10), MPI_SEEK_SET);
        CALL(File_read_shared, fh, din, UNIT / 2, MPI_DOUBLE, MPI_STATUS_IGNORE), *read_bytes += UNIT / 2 * double_size;
        CALL(Barrier, MPI_COMM_WORLD);
        CALL(File_seek_shared, fh, REGION(11), MPI_SEEK_SET);
        CALL(File_iwrite_shared, fh, dout, UNIT / 2, MPI_DOUBLE, &req[0]), *written += UNIT / 2 * double_size;
        CALL(Wait, &req[0], MPI_STATUS_IGNORE);
        CALL(Barrier, MPI_COMM_WORLD);
        CALL(File_seek_shared, fh, REGION(11), MPI_SEEK_SET);
        CALL(File_iread_shared, fh, din, UNIT / 2, MPI_DOUBLE, &req[0]), *read_bytes += UNIT / 2 * double_size;
        CALL(Wait, &req[0], MPI_STATUS_IGNORE);
        CALL(Barrier, MPI_COMM_WORLD);
        CALL(File_seek_shared, fh, REGION(12), MPI_SEEK_SET);
        CALL(File_write_ordered, fh, dout, UNIT / 2, MPI_DOUBLE, MPI_STATUS_IGNORE), *written += UNIT / 2 * double_size;
        CALL(Barrier, MPI_COMM_WORLD);
        CALL(File_seek_shared, fh, REGION(12), MPI_SEEK_SET);
        memset(din, 0xff, sizeof din);
        CALL(File_read_ordered, fh, din, UNIT / 2, MPI_DOUBLE, MPI_STATUS_IGNORE),
            *read_bytes += UNIT / 2 * double_size;
        EXPECT(memcmp(din, dout, sizeof din) == 0);
        CALL(Barrier, MPI_COMM_WORLD);
        CALL(File_seek_shared, fh, REGION(13), MPI_SEEK_SET);
        CALL(File_write_ordered_begin, fh, dout, UNIT / 2, MPI_DOUBLE), *written += UNIT / 2 * double_size;
        CALL(File_write_ordered_end, fh, dout, MPI_STATUS_IGNORE);
        CALL(Barrier, MPI_COMM_WORLD);
        CALL(File_seek_shared, fh, REGION(13), MPI_SEEK_SET);
        memset(din, 0xff, sizeof din);
        CALL(File_read_ordered_begin, fh, din, UNIT / 2, MPI_DOUBLE), *read_bytes += UNIT / 2 * double_size;
        CALL(File_read_ordered_end, fh, din, MPI_STATUS_IGNORE);
        EXPECT(memcmp(din, dout, sizeof din) == 0);

        /* a view of ints whose filetype interleaves the ranks' blocks of 2 in region 14; the
         * memory side is one `row` (UNIT contiguous ints). The view resets the file pointers. */
        FRESH(14);
        CALL(File_set_view, fh, REGION(14) + (MPI_Offset)rank * 2 * int_size, MPI_INT, interleaved, "native",
             MPI_INFO_NULL);
        CALL(File_write_all, fh, out, 1, row, MPI_STATUS_IGNORE), *written += row_size;
        CALL(File_read_at_all, fh, 0, in, 1, row, MPI_STATUS_IGNORE), *read_bytes += row_size;
        EXPECT(same(in, out, UNIT));
        CALL(File_sync, fh);
        CALL(File_get_size, fh, &file_size);
        EXPECT(file_size == REGION(REGIONS));
        CALL(File_close, &fh);
        CALL(Info_free, &info);

        /* a file of this rank alone, deleted once closed */
        CALL(File_open, MPI_COMM_SELF, self_path, MPI_MODE_CREATE | MPI_MODE_WRONLY, MPI_INFO_NULL, &self);
        CALL(File_close, &self);
        CALL(File_delete, self_path, MPI_INFO_NULL);
#undef AT
#undef REGION
#undef FRESH
    }

    CALL(Type_free, &every_other);
    CALL(Type_free, &row);
    CALL(Type_free, &pair_type);
    CALL(Type_free, &interleaved);

    /* -- the counts, gathered to rank 0 and printed there ------------------------------------------ */
    {
        long long *rows = NULL;
        int r;
        counts[F_Finalize]++; /* the call that ends the run, after the report */
        if (rank == 0) {
            rows = malloc((size_t)size * ROW * sizeof *rows);
            EXPECT(rows != NULL);
        }
        /* counted before the call: this MPI_Gather is in the row it sends */
        CALL(Gather, counts, ROW, MPI_LONG_LONG, rows, ROW, MPI_LONG_LONG, 0, MPI_COMM_WORLD);
        if (rank == 0) {
            for (r = 0; r < size; r++) {
                const long long *row_of = rows + (size_t)r * ROW;
                for (i = 0; i < N_FUNCTIONS; i++)
                    if (row_of[i])
                        printf("count %d %s %lld\n", r, names[i], row_of[i]);
                printf("bytes %d read %lld\n", r, row_of[READ_BYTES]);
                printf("bytes %d written %lld\n", r, row_of[WRITTEN_BYTES]);
            }
            fflush(stdout);
            free(rows);
        }
    }
    check(MPI_Finalize(), "MPI_Finalize", __LINE__);
    return 0;
}
