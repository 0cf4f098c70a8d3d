! The Fortran side of `make bench`: ns per MPI_COMM_RANK called from Fortran (`use mpi`),
! timed as bench_rank.c times its C loops (thread CPU time, samples of >= --min-ms after a
! calibration and a dropped warm-up, one JSON line per measurement). One object, linked
! twice (bench/Makefile): without libqmpi (the MPI's own Fortran binding: the floor) and
! with it (the core's Fortran entry, 0 or more tools).
!
!   bench_f_direct rank  [--repeats N] [--min-ms MS]
!   bench_f_core   rank  ...                       (TOOLS=... for tools)
!   bench_f_direct entry --libs core/libqmpi.so ... (paired: both entries in one process)
!
! `entry` calls the MPI's own mpi_comm_rank_ and libqmpi's (dlopen'ed) through a pointer,
! samples taken in turn, as bench_rank.c's `entry` mode does for the C entries.
program bench_rank_f
    use mpi
    use, intrinsic :: iso_c_binding
    implicit none

    integer, parameter :: max_samples = 64, max_set = 2
    integer(c_int), parameter :: clock_monotonic = 1, clock_thread_cputime = 3
    integer(c_int), parameter :: rtld_now = 2, rtld_local = 0

    type, bind(C) :: timespec
        integer(c_long) :: sec, nsec
    end type timespec

    interface
        integer(c_int) function clock_gettime(id, ts) bind(C, name="clock_gettime")
            import :: c_int, timespec
            integer(c_int), value :: id
            type(timespec) :: ts
        end function clock_gettime
        type(c_ptr) function dlopen(path, flags) bind(C, name="dlopen")
            import :: c_ptr, c_char, c_int
            character(kind=c_char) :: path(*)
            integer(c_int), value :: flags
        end function dlopen
        type(c_funptr) function dlsym(handle, symbol) bind(C, name="dlsym")
            import :: c_ptr, c_funptr, c_char
            type(c_ptr), value :: handle
            character(kind=c_char) :: symbol(*)
        end function dlsym
    end interface

    abstract interface
        ! A Fortran 77 binding of MPI_COMM_RANK as the MPI library exports it.
        subroutine rank_entry(comm, rank, ierr) bind(C)
            import :: c_int
            integer(c_int) :: comm, rank, ierr
        end subroutine rank_entry
    end interface

    type measurement
        character(len=16) :: kind = "rank"
        integer :: arg = 0
        character(len=512) :: lib = ""
        procedure(rank_entry), pointer, nopass :: fn => null()
        integer(8) :: n = 1
        double precision :: samples(max_samples) = 0, wall(max_samples) = 0
    end type measurement

    type(measurement) :: set(max_set)
    integer :: repeats = 9, count = 0, ierr, rank, nargs, a, r
    double precision :: min_ns = 50d6, wall_start = 0, last_wall_ns = 0
    integer, volatile :: sink
    character(len=512) :: mode, word, libs
    type(c_ptr) :: handle
    type(c_funptr) :: found

    mode = "rank"
    libs = ""
    nargs = command_argument_count()
    if (nargs >= 1) call get_command_argument(1, mode)
    a = 2
    do while (a <= nargs)
        call get_command_argument(a, word)
        if (a + 1 > nargs) then
            write (0, '(a)') "bench_rank_f: argument without a value: " // trim(word)
            stop 2
        end if
        if (word == "--repeats") then
            call get_command_argument(a + 1, word)
            read (word, *) repeats
        else if (word == "--min-ms") then
            call get_command_argument(a + 1, word)
            read (word, *) min_ns
            min_ns = min_ns * 1d6
        else if (word == "--libs") then
            call get_command_argument(a + 1, libs)
        else
            write (0, '(a)') "bench_rank_f: unknown argument '" // trim(word) // "'"
            stop 2
        end if
        a = a + 2
    end do
    if (repeats < 1 .or. repeats > max_samples) then
        write (0, '(a, i0)') "bench_rank_f: --repeats must be 1..", max_samples
        stop 2
    end if

    ! With tools, MPI_INIT is the first MPI call: the chain is built inside it.
    call MPI_INIT(ierr)
    call MPI_COMM_RANK(MPI_COMM_WORLD, rank, ierr)

    if (mode == "rank") then
        count = 1
        set(1)%kind = "rank"
    else if (mode == "entry") then
        ! arg 0: the MPI's own binding (what the program alone resolves); arg 1: libqmpi's.
        count = 2
        found = dlsym(c_null_ptr, "mpi_comm_rank_" // c_null_char)
        set(1)%kind = "fentry"
        set(1)%lib = "own binding"
        handle = dlopen(trim(libs) // c_null_char, ior(rtld_now, rtld_local))
        if (.not. c_associated(handle) .or. .not. c_associated(found)) then
            write (0, '(a)') "bench_rank_f entry: cannot load mpi_comm_rank_ from " // trim(libs)
            call MPI_ABORT(MPI_COMM_WORLD, 2, ierr)
        end if
        call c_f_procpointer(found, set(1)%fn)
        set(2)%kind = "fentry"
        set(2)%arg = 1
        set(2)%lib = libs
        found = dlsym(handle, "mpi_comm_rank_" // c_null_char)
        if (.not. c_associated(found)) then
            write (0, '(a)') "bench_rank_f entry: no mpi_comm_rank_ in " // trim(libs)
            call MPI_ABORT(MPI_COMM_WORLD, 2, ierr)
        end if
        call c_f_procpointer(found, set(2)%fn)
        do a = 1, count
            call set(a)%fn(MPI_COMM_WORLD, r, ierr) ! first call: libqmpi builds its (empty) chain
        end do
    else
        write (0, '(a)') "bench_rank_f: unknown mode '" // trim(mode) // "'"
        call MPI_ABORT(MPI_COMM_WORLD, 2, ierr)
    end if
    call measure_set()
    call MPI_FINALIZE(ierr)

contains

    double precision function clock_ns(id)
        integer(c_int), intent(in) :: id
        type(timespec) :: t
        integer(c_int) :: rc
        rc = clock_gettime(id, t)
        clock_ns = dble(t%sec) * 1d9 + dble(t%nsec)
    end function clock_ns

    double precision function begin()
        wall_start = clock_ns(clock_monotonic)
        begin = clock_ns(clock_thread_cputime)
    end function begin

    double precision function finish(t0)
        double precision, intent(in) :: t0
        finish = clock_ns(clock_thread_cputime) - t0
        last_wall_ns = clock_ns(clock_monotonic) - wall_start
    end function finish

    ! The application's own call: whatever mpi_comm_rank_ the program was linked with.
    double precision function loop_rank(n)
        integer(8), intent(in) :: n
        integer(8) :: i
        integer :: r, acc, ierr
        double precision :: t0
        acc = 0
        t0 = begin()
        do i = 1, n
            call MPI_COMM_RANK(MPI_COMM_WORLD, r, ierr)
            acc = acc + r
        end do
        loop_rank = finish(t0)
        sink = acc
    end function loop_rank

    double precision function loop_entry(n, fn)
        integer(8), intent(in) :: n
        procedure(rank_entry), pointer, intent(in) :: fn
        integer(8) :: i
        integer(c_int) :: comm, r, ierr
        double precision :: t0
        integer :: acc
        comm = MPI_COMM_WORLD
        acc = 0
        t0 = begin()
        do i = 1, n
            call fn(comm, r, ierr)
            acc = acc + r
        end do
        loop_entry = finish(t0)
        sink = acc
    end function loop_entry

    double precision function sample(m, n)
        type(measurement), intent(in) :: m
        integer(8), intent(in) :: n
        if (m%kind == "rank") then
            sample = loop_rank(n)
        else
            sample = loop_entry(n, m%fn)
        end if
    end function sample

    ! Calibrate each, then `repeats` samples of every measurement in turn (bench_rank.c).
    subroutine measure_set()
        integer :: k, s
        double precision :: t
        integer(8) :: n
        do k = 1, count
            n = 1
            do
                t = sample(set(k), n)
                if (t >= min_ns / 8 .or. n > ishft(1_8, 40)) exit
                n = n * 2
            end do
            set(k)%n = int(dble(n) * min_ns / max(t, 1d0) * 1.05d0, 8) + 1
            t = sample(set(k), set(k)%n) ! warm-up, dropped
        end do
        do s = 1, repeats
            do k = 1, count
                set(k)%samples(s) = sample(set(k), set(k)%n) / dble(set(k)%n)
                set(k)%wall(s) = last_wall_ns / dble(set(k)%n)
            end do
        end do
        if (rank /= 0) return
        do k = 1, count
            write (*, '(a, i0, a, i0, a)', advance="no") '{"kind": "' // trim(set(k)%kind) // '", "arg": ', &
                set(k)%arg, ', "iterations": ', set(k)%n, ', "clock": "thread-cputime", "samples_ns": ['
            call write_list(set(k)%samples)
            write (*, '(a)', advance="no") '], "wall_ns": ['
            call write_list(set(k)%wall)
            write (*, '(a)', advance="no") '], "language": "fortran"'
            if (set(k)%lib /= "") write (*, '(a)', advance="no") ', "lib": "' // trim(set(k)%lib) // '"'
            write (*, '(a)') '}'
        end do
        flush (6)
    end subroutine measure_set

    subroutine write_list(values)
        double precision, intent(in) :: values(:)
        character(len=32) :: text
        integer :: s
        do s = 1, repeats
            write (text, '(f0.4)') values(s)
            if (text(1:1) == ".") text = "0" // text
            if (s > 1) write (*, '(a)', advance="no") ", "
            write (*, '(a)', advance="no") trim(text)
        end do
    end subroutine write_list

end program bench_rank_f
