! Fortran entries whose conversion is more than argument by argument (`use mpi`; the
! same calls as extras_f08.f90): handle arrays whose length the call implies
! (MPI_Alltoallw: the communicator's size; MPI_Neighbor_alltoallw: the topology's
! degrees), the MPI_UNWEIGHTED sentinel, addresses returned through
! INTEGER(KIND=MPI_ADDRESS_KIND) (MPI_Alloc_mem, MPI_Win_allocate), and Fortran error
! handlers (MPI_Comm_create_errhandler, MPI_Win_create_errhandler), called by the MPI
! through the core. Run with 3 or 4 ranks (the ring of MPI_Neighbor_alltoallw needs two
! different neighbours).
! Every result is checked: a failure prints `FAIL <what> rank <r>` and aborts; rank 0
! prints `RESULT extras ok size=<n>` and every rank `RANK <r> sum=<checksum>`.
!
! Calls per rank: extras_calls.txt (seen by fcount.qmpi in tests/test_fortran.py).
module extras_handlers
    implicit none
    integer :: comm_calls = 0, comm_code = -1, comm_seen = -1
    integer :: win_calls = 0, win_code = -1
contains
    subroutine on_comm_error(comm, code)
        integer :: comm, code
        comm_calls = comm_calls + 1
        comm_code = code
        comm_seen = comm
    end subroutine

    subroutine on_win_error(win, code)
        integer :: win, code
        win_calls = win_calls + 1
        win_code = code
        if (win == 0) win_code = -2
    end subroutine
end module

program extras
    use mpi
    use, intrinsic :: iso_c_binding, only: c_ptr, c_f_pointer
    use extras_handlers
    implicit none
    integer :: ierr, rank, nproc, i, total, errclass, cart, dup, eh, weh, win
    integer :: sendcounts(4), sdispls(4), sendtypes(4), recvcounts(4), rdispls(4), recvtypes(4)
    integer :: sbuf(4), rbuf(4), nsbuf(2), nrbuf(2), ncounts(2), ntypes(2), got(1)
    integer(kind=MPI_ADDRESS_KIND) :: nsdispls(2), nrdispls(2), baseptr, winsize, target
    integer, pointer :: mem(:), wmem(:)
    integer :: ring(2)
    integer :: bsize
    integer :: attached(64)

    call MPI_Init(ierr)
    call MPI_Comm_rank(MPI_COMM_WORLD, rank, ierr)
    call MPI_Comm_size(MPI_COMM_WORLD, nproc, ierr)
    call check(nproc >= 3 .and. nproc <= 4, 'size_3_to_4')
    total = 0

    ! Alltoallw: one INTEGER to every rank; the type arrays are as long as the world.
    do i = 1, nproc
        sbuf(i) = 100 * rank + (i - 1)
        sendcounts(i) = 1
        recvcounts(i) = 1
        sdispls(i) = 4 * (i - 1)
        rdispls(i) = 4 * (i - 1)
        sendtypes(i) = MPI_INTEGER
        recvtypes(i) = MPI_INTEGER
    end do
    rbuf = -1
    call MPI_Alltoallw(sbuf, sendcounts, sdispls, sendtypes, rbuf, recvcounts, rdispls, recvtypes, &
                       MPI_COMM_WORLD, ierr)
    call check(ierr == MPI_SUCCESS, 'alltoallw')
    do i = 1, nproc
        call check(rbuf(i) == 100 * (i - 1) + rank, 'alltoallw_data')
    end do
    total = total + sum(rbuf(1:nproc))

    ! Neighbor_alltoallw on a ring (a distributed graph, unweighted: MPICH 4.0.2's own
    ! mpi_f08 binding fails on Cartesian communicators): type arrays of two.
    ring = [mod(rank - 1 + nproc, nproc), mod(rank + 1, nproc)]
    call MPI_Dist_graph_create_adjacent(MPI_COMM_WORLD, 2, ring, MPI_UNWEIGHTED, 2, ring, MPI_UNWEIGHTED, &
                                        MPI_INFO_NULL, .false., cart, ierr)
    call check(ierr == MPI_SUCCESS, 'dist_graph_create_adjacent')
    nsbuf = [10 * rank + 1, 10 * rank + 2]
    nrbuf = -1
    ncounts = 1
    ntypes = MPI_INTEGER
    nsdispls = [0_MPI_ADDRESS_KIND, 4_MPI_ADDRESS_KIND]
    nrdispls = nsdispls
    call MPI_Neighbor_alltoallw(nsbuf, ncounts, nsdispls, ntypes, nrbuf, ncounts, nrdispls, ntypes, cart, ierr)
    call check(ierr == MPI_SUCCESS, 'neighbor_alltoallw')
    ! From the lower neighbour its "up" value (2), from the upper one its "down" value (1).
    call check(nrbuf(1) == 10 * mod(rank - 1 + nproc, nproc) + 2, 'neighbor_down')
    call check(nrbuf(2) == 10 * mod(rank + 1, nproc) + 1, 'neighbor_up')
    total = total + sum(nrbuf)
    call MPI_Comm_free(cart, ierr)

    ! Alloc_mem: the address comes back in an INTEGER(KIND=MPI_ADDRESS_KIND).
    baseptr = 0
    call MPI_Alloc_mem(int(8 * 4, MPI_ADDRESS_KIND), MPI_INFO_NULL, baseptr, ierr)
    call check(ierr == MPI_SUCCESS .and. baseptr /= 0, 'alloc_mem')
    call c_f_pointer(transfer(baseptr, c_ptr_template()), mem, [8])
    mem = [(rank + i, i = 1, 8)]
    total = total + sum(mem)
    call MPI_Free_mem(mem, ierr)
    call check(ierr == MPI_SUCCESS, 'free_mem')

    ! Win_allocate: window memory written through the returned address, read back with
    ! MPI_Get. On MPI_COMM_SELF: Debian's MPICH 4.0.2 returns rank 0's memory for every
    ! target of a window on MPI_COMM_WORLD (in C too, with or without the core).
    winsize = 4
    call MPI_Win_allocate(winsize, 4, MPI_INFO_NULL, MPI_COMM_SELF, baseptr, win, ierr)
    call check(ierr == MPI_SUCCESS .and. baseptr /= 0, 'win_allocate')
    call c_f_pointer(transfer(baseptr, c_ptr_template()), wmem, [1])
    wmem(1) = 7000 + rank
    call MPI_Win_fence(0, win, ierr)
    target = 0
    call MPI_Get(got, 1, MPI_INTEGER, 0, target, 1, MPI_INTEGER, win, ierr)
    call MPI_Win_fence(0, win, ierr)
    call check(got(1) == 7000 + rank, 'win_get')
    total = total + got(1)

    ! Buffer_detach: BUFFER_ADDR is a choice buffer here, not written; SIZE comes back.
    call MPI_Buffer_attach(attached, 256, ierr)
    call MPI_Buffer_detach(attached, bsize, ierr)
    call check(ierr == MPI_SUCCESS .and. bsize == 256, 'buffer_detach')

    ! A Fortran window error handler, called by the MPI through the core.
    call MPI_Win_create_errhandler(on_win_error, weh, ierr)
    call check(ierr == MPI_SUCCESS, 'win_create_errhandler')
    call MPI_Win_set_errhandler(win, weh, ierr)
    call MPI_Win_call_errhandler(win, 77, ierr)
    call check(win_calls == 1 .and. win_code == 77, 'win_handler_called')
    call MPI_Errhandler_free(weh, ierr)
    call MPI_Win_free(win, ierr)

    ! A Fortran communicator error handler: called explicitly, then by a real error.
    call MPI_Comm_dup(MPI_COMM_WORLD, dup, ierr)
    call MPI_Comm_create_errhandler(on_comm_error, eh, ierr)
    call check(ierr == MPI_SUCCESS, 'comm_create_errhandler')
    call MPI_Comm_set_errhandler(dup, eh, ierr)
    call MPI_Comm_call_errhandler(dup, 42, ierr)
    call check(comm_calls == 1 .and. comm_code == 42 .and. comm_seen == dup, 'comm_handler_called')
    call MPI_Send(sbuf, 1, MPI_INTEGER, nproc + 5, 0, dup, ierr)
    call check(ierr /= MPI_SUCCESS .and. comm_calls == 2 .and. comm_seen == dup, 'comm_handler_on_error')
    call MPI_Error_class(comm_code, errclass, ierr)
    call check(errclass == MPI_ERR_RANK, 'comm_handler_error_class')
    call MPI_Errhandler_free(eh, ierr)
    call MPI_Comm_free(dup, ierr)

    if (rank == 0) print '(a,i0)', 'RESULT extras ok size=', nproc
    print '(a,i0,a,i0)', 'RANK ', rank, ' sum=', total
    call MPI_Finalize(ierr)

contains
    function c_ptr_template() result(p)
        type(c_ptr) :: p
        p = transfer(0_MPI_ADDRESS_KIND, p)
    end function

    subroutine check(ok, what)
        logical, intent(in) :: ok
        character(*), intent(in) :: what
        integer :: ierr2
        if (.not. ok) then
            print '(a,a,a,i0)', 'FAIL ', what, ' rank ', rank
            call MPI_Abort(MPI_COMM_WORLD, 1, ierr2)
        end if
    end subroutine
end program
