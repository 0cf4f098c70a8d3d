/* MPI_Pcontrol called at the very top of a small stack (a ucontext coroutine on a
 * 64 KiB mmap'ed stack, a PROT_NONE guard page right above it). A core that reads
 * more of the variadic tail than the caller passed touches the guard page (review
 * finding: SIGSEGV with a callback tool in the chain). Prints "pcontrol on a small
 * stack: ok" on success. */
#define _GNU_SOURCE
#include <mpi.h>
#include <stdio.h>
#include <sys/mman.h>
#include <ucontext.h>
#include <unistd.h>

#define STACK_BYTES (64 * 1024)

static ucontext_t main_context, coroutine_context;
static int result = -1;

static void coroutine(void)
{
    result = MPI_Pcontrol(1);
}

int main(int argc, char **argv)
{
    long page = sysconf(_SC_PAGESIZE);
    char *region;

    MPI_Init(&argc, &argv);
    region = mmap(NULL, STACK_BYTES + (size_t)page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (region == MAP_FAILED || mprotect(region + STACK_BYTES, (size_t)page, PROT_NONE) != 0) {
        perror("mmap");
        return 1;
    }
    getcontext(&coroutine_context);
    coroutine_context.uc_stack.ss_sp = region;
    coroutine_context.uc_stack.ss_size = STACK_BYTES;
    coroutine_context.uc_link = &main_context;
    makecontext(&coroutine_context, coroutine, 0);
    swapcontext(&main_context, &coroutine_context);
    printf("pcontrol on a small stack: %s\n", result == MPI_SUCCESS ? "ok" : "failed");
    MPI_Finalize();
    return result == MPI_SUCCESS ? 0 : 1;
}
