! Fortran entry points through `use mpi`, or, built with -DMPIF_H, through `include
! 'mpif.h'` (the same call sequence as use_mpi_f08.f90 and calls_in_c.c). Run with 2..4 ranks; the first argument `thread`
! selects MPI_Init_thread(MPI_THREAD_FUNNELED) instead of MPI_Init. Every result is
! checked here: a failure prints `FAIL <what> rank <r>` and aborts. Before MPI_Finalize
! rank 0 prints `RESULT use_mpi ok size=<n>` (`mpif_h` with -DMPIF_H) and every rank `RANK <r> sum=<checksum>`
! (received data only), so output with and without tools compares equal.
!
! Calls per rank, any number of ranks (MPI_Abort not counted; with `thread`,
! MPI_Init 0 and MPI_Init_thread 1); expected_calls.txt has the run without `thread`:
!   MPI_Allreduce: 2        MPI_Comm_split: 1       MPI_Isend: 2
!   MPI_Barrier: 1          MPI_Finalize: 1         MPI_Pcontrol: 1
!   MPI_Bcast: 1            MPI_Get_count: 1        MPI_Recv: 4
!   MPI_Comm_dup: 1         MPI_Init: 1             MPI_Send: 3
!   MPI_Comm_free: 2        MPI_Init_thread: 0      MPI_Test: 1
!   MPI_Comm_get_name: 1    MPI_Initialized: 2      MPI_Type_commit: 1
!   MPI_Comm_rank: 2        MPI_Iprobe: 1           MPI_Type_contiguous: 1
!   MPI_Comm_set_name: 1    MPI_Irecv: 1            MPI_Type_free: 1
!   MPI_Comm_size: 2        MPI_Waitall: 1          MPI_Wtime: 2
!
! Choice buffers are passed as their first element (a scalar integer, like
! MPI_IN_PLACE): without -fallow-argument-mismatch (Open MPI's mpif90 does not add it)
! gfortran rejects one external procedure called with arguments of different rank.
#ifdef MPIF_H
#define PROGRAM_NAME 'mpif_h'
program mpif_h
    implicit none
    include 'mpif.h'
#else
#define PROGRAM_NAME 'use_mpi'
program use_mpi
    use mpi
    implicit none
#endif
    integer :: ierr, rank, nproc, provided, prev, next, i, color, subrank, subsize
    integer :: sub, dup, t, resultlen, count, expect, total
    integer :: status(MPI_STATUS_SIZE), statuses(MPI_STATUS_SIZE, 2), reqs(2), sreq
    integer :: bbuf(10), sbuf(5), rbuf(5), a(4), sa(4), ra(4), tsend(3), trecv(3)
    integer, asynchronous :: isbuf(3), irbuf(3), selfsend(1)
    integer :: selfrecv(1)
    logical :: flag
    character(len=16) :: arg
    character(len=MPI_MAX_OBJECT_NAME) :: name
    double precision :: t1, t2

    rank = -1
    call MPI_Initialized(flag, ierr)
    call check(ierr == MPI_SUCCESS .and. .not. flag, 'initialized_before')
    call get_command_argument(1, arg)
    if (arg == 'thread') then
        call MPI_Init_thread(MPI_THREAD_FUNNELED, provided, ierr)
        call check(ierr == MPI_SUCCESS, 'init_thread')
        call check(provided >= MPI_THREAD_SINGLE .and. provided <= MPI_THREAD_MULTIPLE, 'provided')
    else
        call MPI_Init(ierr)
        call check(ierr == MPI_SUCCESS, 'init')
    end if
    call MPI_Initialized(flag, ierr)
    call check(ierr == MPI_SUCCESS .and. flag, 'initialized_after')
    call MPI_Comm_rank(MPI_COMM_WORLD, rank, ierr)
    call MPI_Comm_size(MPI_COMM_WORLD, nproc, ierr)
    call check(nproc >= 2 .and. nproc <= 4, 'size_2_to_4')
    next = mod(rank + 1, nproc)
    prev = mod(rank - 1 + nproc, nproc)
    total = 0

    bbuf = 0
    if (rank == 0) bbuf = [(i * i, i = 1, 10)]
    call MPI_Bcast(bbuf(1), 10, MPI_INTEGER, 0, MPI_COMM_WORLD, ierr)
    call check(all(bbuf == [(i * i, i = 1, 10)]), 'bcast')
    total = total + sum(bbuf)

    ! Ring with a real status. Even ranks send first, odd ranks receive first: safe
    ! even if MPI_Send does not buffer (and the same calls on every rank).
    sbuf = [(1000 * rank + i, i = 1, 5)]
    rbuf = 0
    if (mod(rank, 2) == 0) call MPI_Send(sbuf(1), 5, MPI_INTEGER, next, 7, MPI_COMM_WORLD, ierr)
    call MPI_Recv(rbuf(1), 5, MPI_INTEGER, prev, 7, MPI_COMM_WORLD, status, ierr)
    if (mod(rank, 2) /= 0) call MPI_Send(sbuf(1), 5, MPI_INTEGER, next, 7, MPI_COMM_WORLD, ierr)
    call check(status(MPI_SOURCE) == prev .and. status(MPI_TAG) == 7, 'ring_status')
    call MPI_Get_count(status, MPI_INTEGER, count, ierr)
    call check(count == 5, 'get_count')
    call check(all(rbuf == [(1000 * prev + i, i = 1, 5)]), 'ring_data')
    total = total + sum(rbuf) + count

    ! Ring with MPI_STATUS_IGNORE.
    sbuf = [(2000 * rank + i, i = 1, 5)]
    rbuf = 0
    if (mod(rank, 2) == 0) call MPI_Send(sbuf(1), 5, MPI_INTEGER, next, 8, MPI_COMM_WORLD, ierr)
    call MPI_Recv(rbuf(1), 5, MPI_INTEGER, prev, 8, MPI_COMM_WORLD, MPI_STATUS_IGNORE, ierr)
    if (mod(rank, 2) /= 0) call MPI_Send(sbuf(1), 5, MPI_INTEGER, next, 8, MPI_COMM_WORLD, ierr)
    call check(all(rbuf == [(2000 * prev + i, i = 1, 5)]), 'ring_ignore_data')
    total = total + sum(rbuf)

    ! Nonblocking ring; the receive is reqs(1), so statuses(:, 1) is its status.
    isbuf = [(3000 * rank + i, i = 1, 3)]
    irbuf = 0
    call MPI_Irecv(irbuf(1), 3, MPI_INTEGER, prev, 9, MPI_COMM_WORLD, reqs(1), ierr)
    call MPI_Isend(isbuf(1), 3, MPI_INTEGER, next, 9, MPI_COMM_WORLD, reqs(2), ierr)
    call MPI_Waitall(2, reqs, statuses, ierr)
    call check(ierr == MPI_SUCCESS .and. all(reqs == MPI_REQUEST_NULL), 'waitall')
    call check(statuses(MPI_SOURCE, 1) == prev .and. statuses(MPI_TAG, 1) == 9, 'waitall_status')
    call check(all(irbuf == [(3000 * prev + i, i = 1, 3)]), 'waitall_data')
    total = total + sum(irbuf)

    a = rank + 1
    call MPI_Allreduce(MPI_IN_PLACE, a(1), 4, MPI_INTEGER, MPI_SUM, MPI_COMM_WORLD, ierr)
    call check(all(a == nproc * (nproc + 1) / 2), 'allreduce_in_place')
    total = total + sum(a)

    ! Split by parity: sub holds ranks color, color+2, ...
    color = mod(rank, 2)
    call MPI_Comm_split(MPI_COMM_WORLD, color, rank, sub, ierr)
    call MPI_Comm_rank(sub, subrank, ierr)
    call MPI_Comm_size(sub, subsize, ierr)
    call check(subrank == rank / 2 .and. subsize == (nproc - color + 1) / 2, 'split_rank_size')
    sa = rank
    ra = -1
    call MPI_Allreduce(sa(1), ra(1), 4, MPI_INTEGER, MPI_SUM, sub, ierr)
    expect = 0
    do i = color, nproc - 1, 2
        expect = expect + i
    end do
    call check(all(ra == expect), 'split_allreduce')
    total = total + sum(ra)
    call MPI_Comm_free(sub, ierr)
    call check(sub == MPI_COMM_NULL, 'split_free')

    call MPI_Comm_dup(MPI_COMM_WORLD, dup, ierr)
    call MPI_Comm_set_name(dup, 'fortran dup', ierr)
    name = ''
    resultlen = -1
    call MPI_Comm_get_name(dup, name, resultlen, ierr)
    call check(name == 'fortran dup' .and. resultlen == 11, 'comm_name')
    total = total + resultlen
    call MPI_Comm_free(dup, ierr)
    call check(dup == MPI_COMM_NULL, 'dup_free')

    ! Message to self. MPI_Probe waits until it has arrived (Intel MPI does not match a
    ! self-send at once), so the first MPI_Iprobe finds it; the call table counts one
    ! MPI_Iprobe, so a second poll is a failure.
    selfsend(1) = 4000 + rank
    call MPI_Isend(selfsend(1), 1, MPI_INTEGER, rank, 11, MPI_COMM_WORLD, sreq, ierr)
    call MPI_Probe(rank, 11, MPI_COMM_WORLD, status, ierr)
    i = 0
    flag = .false.
    do while (.not. flag)
        call MPI_Iprobe(rank, 11, MPI_COMM_WORLD, flag, status, ierr)
        i = i + 1
    end do
    call check(i == 1, 'iprobe_first_poll')
    call check(status(MPI_SOURCE) == rank .and. status(MPI_TAG) == 11, 'iprobe_status')
    call MPI_Recv(selfrecv(1), 1, MPI_INTEGER, rank, 11, MPI_COMM_WORLD, status, ierr)
    call check(selfrecv(1) == 4000 + rank, 'self_data')
    flag = .false.
    call MPI_Test(sreq, flag, status, ierr)
    call check(flag .and. sreq == MPI_REQUEST_NULL, 'test')
    total = total + selfrecv(1)

    call MPI_Type_contiguous(3, MPI_INTEGER, t, ierr)
    call MPI_Type_commit(t, ierr)
    tsend = [(5000 * rank + i, i = 1, 3)]
    trecv = 0
    if (mod(rank, 2) == 0) call MPI_Send(tsend(1), 1, t, next, 10, MPI_COMM_WORLD, ierr)
    call MPI_Recv(trecv(1), 1, t, prev, 10, MPI_COMM_WORLD, status, ierr)
    if (mod(rank, 2) /= 0) call MPI_Send(tsend(1), 1, t, next, 10, MPI_COMM_WORLD, ierr)
    call check(all(trecv == [(5000 * prev + i, i = 1, 3)]), 'type_data')
    total = total + sum(trecv)
    call MPI_Type_free(t, ierr)
    call check(t == MPI_DATATYPE_NULL, 'type_free')

    t1 = MPI_Wtime()
    t2 = MPI_Wtime()
    call check(t2 >= t1, 'wtime')
    call MPI_Pcontrol(1)
    call MPI_Barrier(MPI_COMM_WORLD, ierr)
    call check(ierr == MPI_SUCCESS, 'barrier')

    if (rank == 0) print '(a,a,a,i0)', 'RESULT ', PROGRAM_NAME, ' ok size=', nproc
    print '(a,i0,a,i0)', 'RANK ', rank, ' sum=', total
    flush(6)
    call MPI_Finalize(ierr)
    call check(ierr == MPI_SUCCESS, 'finalize')

contains

    subroutine check(ok, what)
        logical, intent(in) :: ok
        character(len=*), intent(in) :: what
        integer :: e
        if (ok) return
        print '(a,a,a,i0)', 'FAIL ', what, ' rank ', rank
        flush(6)
        call MPI_Abort(MPI_COMM_WORLD, 1, e)
    end subroutine check

end program
