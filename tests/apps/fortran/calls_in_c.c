/* The call sequence of use_mpi.F90 and use_mpi_f08.f90 in C: a reference for
 * what the Fortran entry points must hand to tools, and a driver for
 * tests/callback_tools/cbargs.c. Same calls per rank (expected_calls.txt), same checks,
 * same data and so the same output: `RESULT calls_in_c ok size=<n>` from rank 0 and
 * `RANK <r> sum=<checksum>` from every rank; a failed check prints
 * `FAIL <what> rank <r>` and aborts. Run with 2..4 ranks; argument `thread` selects
 * MPI_Init_thread(MPI_THREAD_FUNNELED) instead of MPI_Init.
 *
 * Build: mpicc -Wall -Wextra calls_in_c.c -o calls_in_c -Lcore -lqmpi -Wl,-rpath,core */
#include <mpi.h>
#include <stdio.h>
#include <string.h>

static int rank = -1;

static void check(int ok, const char *what)
{
    if (ok)
        return;
    printf("FAIL %s rank %d\n", what, rank);
    fflush(stdout);
    MPI_Abort(MPI_COMM_WORLD, 1);
}

static int sum(const int *v, int n)
{
    int s = 0;
    for (int i = 0; i < n; i++)
        s += v[i];
    return s;
}

/* v[i] == base + i + 1 for all i (the Fortran programs' [(base + i, i = 1, n)]) */
static int is_seq(const int *v, int n, int base)
{
    for (int i = 0; i < n; i++)
        if (v[i] != base + i + 1)
            return 0;
    return 1;
}

int main(int argc, char **argv)
{
    int flag, provided, size, prev, next, total = 0, count, i;
    int bbuf[10], sbuf[5], rbuf[5], a[4], sa[4], ra[4], tsend[3], trecv[3];
    int isbuf[3], irbuf[3], selfsend, selfrecv, color, subrank, subsize, expect, resultlen;
    MPI_Status status, statuses[2];
    MPI_Request reqs[2], sreq;
    MPI_Comm sub, dup;
    MPI_Datatype t;
    char name[MPI_MAX_OBJECT_NAME];
    double t1, t2;

    check(MPI_Initialized(&flag) == MPI_SUCCESS && !flag, "initialized_before");
    if (argc > 1 && strcmp(argv[1], "thread") == 0) {
        check(MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided) == MPI_SUCCESS, "init_thread");
        check(provided >= MPI_THREAD_SINGLE && provided <= MPI_THREAD_MULTIPLE, "provided");
    } else {
        check(MPI_Init(&argc, &argv) == MPI_SUCCESS, "init");
    }
    check(MPI_Initialized(&flag) == MPI_SUCCESS && flag, "initialized_after");
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    check(size >= 2 && size <= 4, "size_2_to_4");
    next = (rank + 1) % size;
    prev = (rank - 1 + size) % size;

    for (i = 0; i < 10; i++)
        bbuf[i] = rank == 0 ? (i + 1) * (i + 1) : 0;
    MPI_Bcast(bbuf, 10, MPI_INT, 0, MPI_COMM_WORLD);
    for (i = 0; i < 10; i++)
        check(bbuf[i] == (i + 1) * (i + 1), "bcast");
    total += sum(bbuf, 10);

    /* Ring with a real status; even ranks send first (safe without buffering). */
    for (i = 0; i < 5; i++)
        sbuf[i] = 1000 * rank + i + 1, rbuf[i] = 0;
    if (rank % 2 == 0)
        MPI_Send(sbuf, 5, MPI_INT, next, 7, MPI_COMM_WORLD);
    MPI_Recv(rbuf, 5, MPI_INT, prev, 7, MPI_COMM_WORLD, &status);
    if (rank % 2 != 0)
        MPI_Send(sbuf, 5, MPI_INT, next, 7, MPI_COMM_WORLD);
    check(status.MPI_SOURCE == prev && status.MPI_TAG == 7, "ring_status");
    MPI_Get_count(&status, MPI_INT, &count);
    check(count == 5, "get_count");
    check(is_seq(rbuf, 5, 1000 * prev), "ring_data");
    total += sum(rbuf, 5) + count;

    /* Ring with MPI_STATUS_IGNORE. */
    for (i = 0; i < 5; i++)
        sbuf[i] = 2000 * rank + i + 1, rbuf[i] = 0;
    if (rank % 2 == 0)
        MPI_Send(sbuf, 5, MPI_INT, next, 8, MPI_COMM_WORLD);
    MPI_Recv(rbuf, 5, MPI_INT, prev, 8, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    if (rank % 2 != 0)
        MPI_Send(sbuf, 5, MPI_INT, next, 8, MPI_COMM_WORLD);
    check(is_seq(rbuf, 5, 2000 * prev), "ring_ignore_data");
    total += sum(rbuf, 5);

    /* Nonblocking ring; the receive is reqs[0], so statuses[0] is its status. */
    for (i = 0; i < 3; i++)
        isbuf[i] = 3000 * rank + i + 1, irbuf[i] = 0;
    MPI_Irecv(irbuf, 3, MPI_INT, prev, 9, MPI_COMM_WORLD, &reqs[0]);
    MPI_Isend(isbuf, 3, MPI_INT, next, 9, MPI_COMM_WORLD, &reqs[1]);
    check(MPI_Waitall(2, reqs, statuses) == MPI_SUCCESS && reqs[0] == MPI_REQUEST_NULL &&
              reqs[1] == MPI_REQUEST_NULL, "waitall");
    check(statuses[0].MPI_SOURCE == prev && statuses[0].MPI_TAG == 9, "waitall_status");
    check(is_seq(irbuf, 3, 3000 * prev), "waitall_data");
    total += sum(irbuf, 3);

    for (i = 0; i < 4; i++)
        a[i] = rank + 1;
    MPI_Allreduce(MPI_IN_PLACE, a, 4, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    for (i = 0; i < 4; i++)
        check(a[i] == size * (size + 1) / 2, "allreduce_in_place");
    total += sum(a, 4);

    /* Split by parity: sub holds ranks color, color+2, ... */
    color = rank % 2;
    MPI_Comm_split(MPI_COMM_WORLD, color, rank, &sub);
    MPI_Comm_rank(sub, &subrank);
    MPI_Comm_size(sub, &subsize);
    check(subrank == rank / 2 && subsize == (size - color + 1) / 2, "split_rank_size");
    for (i = 0; i < 4; i++)
        sa[i] = rank, ra[i] = -1;
    MPI_Allreduce(sa, ra, 4, MPI_INT, MPI_SUM, sub);
    for (expect = 0, i = color; i < size; i += 2)
        expect += i;
    for (i = 0; i < 4; i++)
        check(ra[i] == expect, "split_allreduce");
    total += sum(ra, 4);
    MPI_Comm_free(&sub);
    check(sub == MPI_COMM_NULL, "split_free");

    MPI_Comm_dup(MPI_COMM_WORLD, &dup);
    MPI_Comm_set_name(dup, "fortran dup"); /* the Fortran programs' name, for cbargs */
    name[0] = '\0';
    resultlen = -1;
    MPI_Comm_get_name(dup, name, &resultlen);
    check(strcmp(name, "fortran dup") == 0 && resultlen == 11, "comm_name");
    total += resultlen;
    MPI_Comm_free(&dup);
    check(dup == MPI_COMM_NULL, "dup_free");

    /* Message to self: matched at once, so the first MPI_Iprobe must find it (the
     * call table counts one). */
    selfsend = 4000 + rank;
    MPI_Isend(&selfsend, 1, MPI_INT, rank, 11, MPI_COMM_WORLD, &sreq);
    for (flag = 0, i = 0; !flag; i++)
        MPI_Iprobe(rank, 11, MPI_COMM_WORLD, &flag, &status);
    check(i == 1, "iprobe_first_poll");
    check(status.MPI_SOURCE == rank && status.MPI_TAG == 11, "iprobe_status");
    MPI_Recv(&selfrecv, 1, MPI_INT, rank, 11, MPI_COMM_WORLD, &status);
    check(selfrecv == 4000 + rank, "self_data");
    flag = 0;
    MPI_Test(&sreq, &flag, &status);
    check(flag && sreq == MPI_REQUEST_NULL, "test");
    total += selfrecv;

    MPI_Type_contiguous(3, MPI_INT, &t);
    MPI_Type_commit(&t);
    for (i = 0; i < 3; i++)
        tsend[i] = 5000 * rank + i + 1, trecv[i] = 0;
    if (rank % 2 == 0)
        MPI_Send(tsend, 1, t, next, 10, MPI_COMM_WORLD);
    MPI_Recv(trecv, 1, t, prev, 10, MPI_COMM_WORLD, &status);
    if (rank % 2 != 0)
        MPI_Send(tsend, 1, t, next, 10, MPI_COMM_WORLD);
    check(is_seq(trecv, 3, 5000 * prev), "type_data");
    total += sum(trecv, 3);
    MPI_Type_free(&t);
    check(t == MPI_DATATYPE_NULL, "type_free");

    t1 = MPI_Wtime();
    t2 = MPI_Wtime();
    check(t2 >= t1, "wtime");
    MPI_Pcontrol(1);
    check(MPI_Barrier(MPI_COMM_WORLD) == MPI_SUCCESS, "barrier");

    if (rank == 0)
        printf("RESULT calls_in_c ok size=%d\n", size);
    printf("RANK %d sum=%d\n", rank, total);
    fflush(stdout);
    check(MPI_Finalize() == MPI_SUCCESS, "finalize");
    return 0;
}
