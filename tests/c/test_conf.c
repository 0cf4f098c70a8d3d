/* conf.c: the QMPI_CONF parser, its stacks and arguments, and its FILE:LINE errors. */
#include "../../qmpigen/runtime/qmpi_runtime.h"
#include "check.h"

#include <fcntl.h>
#include <sys/stat.h>

static const char *conf_path;

static void read_instances_and_arguments(void)
{
    struct qmpi_entry entries[2];
    const char *file = check_file("# a comment\n"
                                  "; another\n"
                                  "[outer]\n"
                                  "tool = ./libcounter.so\n"
                                  "output =  outer.txt  \n"
                                  "\n"
                                  "  [ inner ]  \n"
                                  "tool=@cb\n"
                                  "level = 3\n");

    CHECK(qmpi_conf_read(file) == 2);
    CHECK(qmpi_stack_count == 1 && qmpi_stacks[0].top == 0 && qmpi_stacks[0].count == 2);
    CHECK_STR(qmpi_stacks[0].name, "default");
    qmpi_conf_entries(entries);
    CHECK_STR(entries[0].text, "./libcounter.so");
    CHECK(entries[0].callback == 0 && entries[0].position == 1);
    CHECK(strstr(entries[0].where, ":4: QMPI_CONF") != NULL);
    CHECK_STR(entries[1].text, "cb");
    CHECK(entries[1].callback == 1);
    CHECK_STR(qmpi_get_argument(1, "output"), "outer.txt");
    CHECK_STR(qmpi_get_argument(2, "level"), "3");
    CHECK(qmpi_get_argument(1, "level") == NULL);
    CHECK(qmpi_get_argument(0, "output") == NULL && qmpi_get_argument(3, "output") == NULL);
    CHECK(qmpi_get_argument(1, NULL) == NULL);
    unlink(file);
}

static void read_named_stacks(void)
{
    struct qmpi_entry entries[4];
    const char *file = check_file("[a]\ntool = ./a.so\n[b]\ntool = %stat\n[c]\ntool = ./c.so\n"
                                  "[stack heavy]\ninstances = c, a\n"
                                  "[stack default]\ninstances = b\n");

    CHECK(qmpi_conf_read(file) == 4); /* three instances and heavy's top */
    CHECK(qmpi_stack_count == 2);
    CHECK_STR(qmpi_stacks[0].name, "default");
    CHECK(qmpi_stacks[0].top == 0 && qmpi_stacks[0].count == 1);
    CHECK_STR(qmpi_stacks[1].name, "heavy");
    CHECK(qmpi_stacks[1].top == 2 && qmpi_stacks[1].count == 2);
    qmpi_conf_entries(entries);
    CHECK_STR(entries[0].text, "%stat");
    CHECK(entries[1].stack_top == 1);
    CHECK_STR(entries[2].text, "./c.so");
    CHECK_STR(entries[3].text, "./a.so");
    unlink(file);
}

static void argument_error_names_file_and_line(void)
{
    conf_path = check_file("[t]\ntool = ./t.so\nsize = big\n");
    qmpi_conf_read(conf_path);
    qmpi_argument_error(1, "size", "not a number");
}

/* A case that reads `text`, which the parser must refuse (main says with what). */
#define STOPS_WITH(function, text)                                                                                     \
    static void function(void)                                                                                         \
    {                                                                                                                  \
        qmpi_conf_read(check_file(text));                                                                              \
    }
STOPS_WITH(unterminated_header, "[outer\ntool = x\n")
STOPS_WITH(bad_instance_name, "[a b]\n")
STOPS_WITH(duplicate_instance, "[a]\ntool = x\n[a]\n")
STOPS_WITH(key_before_section, "tool = x\n")
STOPS_WITH(no_equals, "[a]\njunk\n")
STOPS_WITH(reserved_key, "[a]\nqmpi.x = 1\n")
STOPS_WITH(duplicate_tool, "[a]\ntool = x\ntool = y\n")
STOPS_WITH(empty_tool, "[a]\ntool =\n")
STOPS_WITH(colon_in_tool, "[a]\ntool = a:b\n")
STOPS_WITH(duplicate_argument, "[a]\ntool = x\nk = 1\nk = 2\n")
STOPS_WITH(missing_tool, "[a]\nk = 1\n")
STOPS_WITH(stack_without_default, "[a]\ntool = x\n[stack s]\ninstances = a\n")
STOPS_WITH(stack_unknown_member, "[stack default]\ninstances = nope\n")
STOPS_WITH(stack_member_twice, "[a]\ntool = x\n[stack default]\ninstances = a\n[stack s]\ninstances = a\n")
STOPS_WITH(instance_in_no_stack, "[a]\ntool = x\n[b]\ntool = y\n[stack default]\ninstances = a\n")
STOPS_WITH(stack_unknown_key, "[stack default]\nfoo = a\n")
STOPS_WITH(stack_without_instances, "[stack default]\n")
STOPS_WITH(duplicate_stack, "[stack s]\n[stack s]\n")
STOPS_WITH(stack_member_listed_twice, "[a]\ntool = x\n[stack default]\ninstances = a, a\n")
STOPS_WITH(non_utf8_in_line, "[a]\ntool = x\n\xff\xfe junk\n")

/* Special files: each one line, never a hang, never end of file read as "no tools". */
/* Made (and removed) by main: a case's process ends inside the parser. */
static char special_path[64];

static void fifo_file(void)
{
    alarm(20); /* a blocking open() must fail the case, not hang the suite */
    qmpi_conf_read(special_path);
}

static void directory_file(void)
{
    qmpi_conf_read("/tmp");
}

static void dev_zero_file(void)
{
    alarm(20);
    qmpi_conf_read("/dev/zero");
}

static void proc_mem_file(void)
{
    qmpi_conf_read("/proc/self/mem");
}

static void too_large_file(void)
{
    qmpi_conf_read(special_path);
}

static void make_large_file(void)
{
    static char block[65536];
    int fd = open(special_path, O_WRONLY | O_CREAT | O_EXCL, 0600), i;

    memset(block, '#', sizeof block);
    for (i = 0; i < 100; i++) /* 6.4 MB of comment */
        CHECK(write(fd, block, sizeof block) == (ssize_t)sizeof block);
    close(fd);
}

/* An empty chain from a file is not an error, but it is said. */
static void empty_file(void)
{
    CHECK(qmpi_conf_read(check_file("")) == 0);
}

static void comments_only_file(void)
{
    CHECK(qmpi_conf_read(check_file("# nothing\n; here\n\n")) == 0);
}

/* `body` ends normally, having written one line on stderr that contains `text`. */
static int stderr_has(void (*body)(void), const char *text)
{
    char captured[4096];
    int status = check_run(body, captured, sizeof captured);

    return WIFEXITED(status) && WEXITSTATUS(status) == 0 && strstr(captured, text) != NULL &&
           strchr(captured, '\n') == captured + strlen(captured) - 1;
}

static void empty_chain_is_said_in_one_line(void)
{
    CHECK(stderr_has(empty_file, "qmpi: warning: QMPI_CONF="));
    CHECK(stderr_has(empty_file, "no tools"));
    CHECK(stderr_has(comments_only_file, "no tools"));
}

static void missing_file(void)
{
    qmpi_conf_read("/nonexistent/qmpi.conf");
}

static void nul_byte_in_line(void)
{
    static const char text[] = "[a]\ntool = x\0y\n";
    char path[] = "/tmp/qmpi-check-XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0 && write(fd, text, sizeof text - 1) == (ssize_t)(sizeof text - 1));
    close(fd);
    qmpi_conf_read(path);
}

int main(void)
{
    check_case("instances, arguments, entries", read_instances_and_arguments, NULL);
    check_case("named stacks", read_named_stacks, NULL);
    check_case("argument error names FILE:LINE", argument_error_names_file_and_line,
               ":3: [t] size = big: not a number");
    check_case("unterminated header", unterminated_header, ":1: a section header ends with ']'");
    check_case("bad instance name", bad_instance_name, ":1: '[a b]': an instance name");
    check_case("duplicate instance", duplicate_instance, ":3: duplicate instance name 'a' (first at line 1)");
    check_case("key before a section", key_before_section, ":1: 'tool = ...' before the first [NAME] section");
    check_case("line without =", no_equals, ":2: expected '[NAME]', 'KEY = VALUE'");
    check_case("reserved key", reserved_key, ":2: unknown key 'qmpi.x'");
    check_case("duplicate tool", duplicate_tool, ":3: duplicate key 'tool' in [a] (first at line 2)");
    check_case("empty tool", empty_tool, ":2: 'tool =' needs a path");
    check_case("':' in tool", colon_in_tool, ":2: tool 'a:b': no tool path or name holds ':'");
    check_case("duplicate argument", duplicate_argument, ":4: duplicate key 'k' in [a] (first at line 3)");
    check_case("section without tool", missing_tool, ":1: [a] has no 'tool = ...' line");
    check_case("stacks without default", stack_without_default, "but no [stack default]");
    check_case("stack of an unknown instance", stack_unknown_member,
               ":2: [stack default] instances: no section [nope]");
    check_case("instance in two stacks", stack_member_twice,
               ":6: [stack s] instances: [a] is already in [stack default]");
    check_case("instance in no stack", instance_in_no_stack, ":3: [b] is in no stack");
    check_case("unknown key of a stack", stack_unknown_key, ":2: unknown key 'foo' in [stack default]");
    check_case("stack without instances", stack_without_instances, ":1: [stack default] has no 'instances");
    check_case("duplicate stack", duplicate_stack, ":2: duplicate stack name 's'");
    check_case("unreadable file", missing_file, "QMPI_CONF=/nonexistent/qmpi.conf: cannot read the configuration file");
    check_case("NUL byte", nul_byte_in_line, ":2: a NUL byte: not a text file");
    check_case("instance listed twice in one stack", stack_member_listed_twice,
               ":4: [stack default] instances: [a] is listed twice");
    check_case("non-UTF-8 bytes are escaped", non_utf8_in_line, "found '\\xff\\xfe junk'");
    snprintf(special_path, sizeof special_path, "/tmp/qmpi-check-fifo-%d", (int)getpid());
    CHECK(mkfifo(special_path, 0600) == 0);
    check_case("FIFO", fifo_file, "not a regular file (a FIFO)");
    unlink(special_path);
    check_case("directory", directory_file, "QMPI_CONF=/tmp: not a regular file (a directory)");
    check_case("/dev/zero", dev_zero_file, "QMPI_CONF=/dev/zero: not a regular file (a character device)");
    check_case("/proc/self/mem", proc_mem_file, "QMPI_CONF=/proc/self/mem: cannot read the configuration file");
    snprintf(special_path, sizeof special_path, "/tmp/qmpi-check-large-%d", (int)getpid());
    make_large_file();
    check_case("larger than the limit", too_large_file, "larger than the 4 MiB a configuration file may have");
    unlink(special_path);
    check_case("empty file", empty_file, NULL);
    check_case("comments only", comments_only_file, NULL);
    check_case("empty chain said in one line", empty_chain_is_said_in_one_line, NULL);
    return check_summary();
}
