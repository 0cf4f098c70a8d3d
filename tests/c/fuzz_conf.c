/* fuzz_conf.c: libFuzzer harness for the configuration file parser (conf.c). The
 * parser's state is file-static: the harness includes conf.c to reset it per input. */
#include "../../qmpigen/runtime/conf.c"

#include <setjmp.h>
#include <unistd.h>

extern jmp_buf qmpi_fuzz_stop;

/* The parser's memory is the job's until it ends, and a stop longjmps out of it: leaks
 * are by design here, not findings. */
const char *__asan_default_options(void);
const char *__asan_default_options(void)
{
    return "detect_leaks=0";
}

static void reset(void)
{
    qmpi_conf_file = NULL;
    qmpi_conf_instances = NULL; /* leaked: the real parser's memory lives until the job ends */
    qmpi_conf_count = 0;
    qmpi_conf_current_stack = NULL;
    qmpi_conf_stacks = NULL;
    qmpi_conf_stack_count = 0;
    memset(&qmpi_conf_instance_names, 0, sizeof qmpi_conf_instance_names); /* leaked too */
    memset(&qmpi_conf_stack_names, 0, sizeof qmpi_conf_stack_names);
    qmpi_conf_level = NULL;
    qmpi_stacks = &qmpi_default_stack;
    qmpi_stack_count = 1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static char path[64];
    FILE *out;

    if (path[0] == '\0')
        snprintf(path, sizeof path, "/tmp/qmpi-fuzz-conf-%d", (int)getpid());
    out = fopen(path, "w");
    if (out == NULL)
        return 0;
    fwrite(data, 1, size, out);
    fclose(out);
    reset();
    if (setjmp(qmpi_fuzz_stop) == 0) {
        int levels = qmpi_conf_read(path), level;
        struct qmpi_entry *entries = calloc((size_t)levels + 1, sizeof *entries);

        qmpi_conf_entries(entries);
        for (level = 0; level <= levels + 1; level++)
            (void)qmpi_get_argument(level, "output");
        free(entries);
    }
    return 0;
}
