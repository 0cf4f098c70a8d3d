/* files.c: the trace directory and the rank files in it (files.h). The tool writes where
 * it is told and nowhere else: the directory is opened once and checked (a directory,
 * owned by this user or root, not writable by others unless sticky, as /tmp is), and
 * every file is created in it, exclusively: an existing name (a file, a link, a FIFO, a
 * device) is never opened. A file's name carries its run (NAME.L<level>.<run id>.qtr,
 * or .p<pid> when the run has no identity: the Sessions model without a launcher's job
 * name): two runs in one directory write distinct files. */
#include "files.h"
#include "options.h"
#include "say.h"
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

/* 0 if a directory the user may trust: this user's or root's, and no one else can put
 * or replace a file in it (not writable by others, or sticky). */
static int trusted(const struct stat *st)
{
    if (!S_ISDIR(st->st_mode)) {
        errno = ENOTDIR;
        return -1;
    }
    if (st->st_uid != geteuid() && st->st_uid != 0) {
        errno = EPERM;
        return -1;
    }
    if ((st->st_mode & S_IWOTH) && !(st->st_mode & S_ISVTX)) {
        errno = EPERM;
        return -1;
    }
    return 0;
}

int trace_open_dir(struct instance *in)
{
    struct stat st;
    in->dirfd = -1;
    if (mkdir(trace_options.dir, 0755) != 0 && errno != EEXIST) {
        trace_complain(in, "cannot create directory", trace_options.dir);
        return -1;
    }
    in->dirfd = open(trace_options.dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (in->dirfd < 0 || fstat(in->dirfd, &st) != 0) {
        trace_complain(in, "cannot open directory", trace_options.dir);
        return -1;
    }
    if (trusted(&st) != 0) {
        int error = errno;
        close(in->dirfd);
        in->dirfd = -1;
        errno = error;
        trace_complain(in,
                       error == EPERM ? "refused (owned by another user, or writable by others without the sticky bit):"
                                      : "not a directory:",
                       trace_options.dir);
        return -1;
    }
    return 0;
}

int trace_create_file(struct instance *in, int thread, char **name)
{
    char host[256] = "unknown", *slash;
    int fd = -1;
    gethostname(host, sizeof host - 1);
    host[sizeof host - 1] = '\0';
    while ((slash = strchr(host, '/')) != NULL) /* a name, not a path */
        *slash = '_';
    if ((in->run_id != 0 ? asprintf(name, "%s_%s_%d_%d.L%d.%016llx.qtr", program_invocation_short_name, host, in->rank,
                                    thread, in->level, (unsigned long long)in->run_id)
                         : asprintf(name, "%s_%s_%d_%d.L%d.p%d.qtr", program_invocation_short_name, host, in->rank,
                                    thread, in->level, (int)getpid())) < 0) {
        *name = NULL;
        errno = ENOMEM;
    } else {
        fd = openat(in->dirfd, *name, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
    }
    if (fd < 0) {
        trace_say_thread(in, thread, "cannot create", *name != NULL ? *name : "a rank file", 0);
        free(*name);
        *name = NULL;
    }
    return fd;
}
