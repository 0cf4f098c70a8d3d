/* files.c: the trace directory and the rank files in it (files.h). */
#include "files.h"
#include "options.h"
#include "say.h"
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

int trace_open_dir(struct instance *in)
{
    struct stat st;
    if (mkdir(trace_options.dir, 0755) != 0 && errno != EEXIST) {
        trace_complain(in, "cannot create directory", trace_options.dir);
        return -1;
    }
    if (stat(trace_options.dir, &st) != 0 || !S_ISDIR(st.st_mode)) {
        trace_complain(in, "not a directory:", trace_options.dir);
        return -1;
    }
    return 0;
}

static int write_header(struct instance *in, int fd, int thread)
{
    struct file_header header;
    memset(&header, 0, sizeof header);
    memcpy(header.magic, TRACE_MAGIC, 8);
    header.version = TRACE_VERSION;
    header.header_size = sizeof header;
    header.record_alignment = 8;
    header.rank = in->rank;
    header.thread = thread;
    header.level = in->level;
    header.world_size = in->world_size;
    header.pid = (uint32_t)getpid();
    header.clock_origin_ns = in->origin_ns;
    header.realtime_origin_ns = in->realtime_origin_ns;
    header.run_id = in->run_id;
    return write(fd, &header, sizeof header) == (ssize_t)sizeof header ? 0 : -1;
}

int trace_create_file(struct instance *in, int thread)
{
    char host[256] = "unknown", path[4096];
    int length, fd;
    gethostname(host, sizeof host - 1);
    host[sizeof host - 1] = '\0';
    length = snprintf(path, sizeof path, "%s/%s_%s_%d_%d.L%d.qtr", trace_options.dir, program_invocation_short_name,
                      host, in->rank, thread, in->level);
    /* a cut name would be the same for every rank: each would overwrite the others' file */
    fd = length > 0 && (size_t)length < sizeof path ? open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644)
                                                    : (errno = ENAMETOOLONG, -1);
    if (fd < 0) {
        trace_complain(in, "cannot create", path);
        return -1;
    }
    if (write_header(in, fd, thread) != 0) {
        trace_complain(in, "cannot write", path);
        close(fd);
        return -1;
    }
    return fd;
}
