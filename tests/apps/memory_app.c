/* What the chain's loading cost in memory, said after MPI_Init (the chain is built by
 * then): the peak resident set (VmHWM) and the bytes held by the private copies of PMPI
 * tools (memfds are memory whether mapped or not: st_blocks of /proc/self/fd/N). */
#include <dirent.h>
#include <mpi.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static long vmhwm_kb(void)
{
    char line[256];
    long kb = -1;
    FILE *status = fopen("/proc/self/status", "r");

    while (status != NULL && fgets(line, sizeof line, status) != NULL)
        if (sscanf(line, "VmHWM: %ld kB", &kb) == 1)
            break;
    if (status != NULL)
        fclose(status);
    return kb;
}

/* The memory of the PMPI copies (memfd or, where refused, a deleted temporary file). */
static long copies_kb(int *count)
{
    DIR *fds = opendir("/proc/self/fd");
    struct dirent *e;
    long kb = 0;

    *count = 0;
    while (fds != NULL && (e = readdir(fds)) != NULL) {
        char path[300], target[512];
        struct stat st;
        ssize_t n;
        snprintf(path, sizeof path, "/proc/self/fd/%s", e->d_name);
        n = readlink(path, target, sizeof target - 1);
        if (n <= 0)
            continue;
        target[n] = '\0';
        if (strstr(target, "qmpi-pmpi-tool") == NULL || stat(path, &st) != 0)
            continue;
        kb += (long)st.st_blocks / 2;
        ++*count;
    }
    if (fds != NULL)
        closedir(fds);
    return kb;
}

int main(int argc, char **argv)
{
    int rank, count;
    long copies;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    copies = copies_kb(&count);
    printf("memory rank %d: vmhwm_kb=%ld copies=%d copies_kb=%ld\n", rank, vmhwm_kb(), count, copies);
    MPI_Finalize();
    return 0;
}
