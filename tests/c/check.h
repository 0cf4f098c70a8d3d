/* check.h: a tiny test harness for the runtime's C unit tests. Each case runs in its
 * own process (the runtime keeps its state in globals, and a fatal error ends the
 * process), with stderr captured; the last line is "N passed, N failed". */
#ifndef QMPI_CHECK_H_INCLUDED
#define QMPI_CHECK_H_INCLUDED

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

/* The exit status of a process that the runtime stopped (stubs.c: qmpi_stop_job). */
#define CHECK_STOPPED 86

static int check_passed, check_failed;

/* Inside a case: a failed condition ends the case's process as failed. */
#define CHECK(condition)                                                                                               \
    do {                                                                                                               \
        if (!(condition)) {                                                                                            \
            fprintf(stderr, "%s:%d: CHECK(%s) failed\n", __FILE__, __LINE__, #condition);                              \
            _exit(1);                                                                                                  \
        }                                                                                                              \
    } while (0)
#define CHECK_STR(actual, expected)                                                                                    \
    do {                                                                                                               \
        const char *check_a = (actual), *check_e = (expected);                                                         \
        if (check_a == NULL || strcmp(check_a, check_e) != 0) {                                                        \
            fprintf(stderr, "%s:%d: %s is \"%s\", expected \"%s\"\n", __FILE__, __LINE__, #actual,                     \
                    check_a ? check_a : "(null)", check_e);                                                            \
            _exit(1);                                                                                                  \
        }                                                                                                              \
    } while (0)

/* Runs `body` in a child with its stderr captured into `captured` (NUL-terminated);
 * returns the child's wait status. */
static __attribute__((unused)) int check_run(void (*body)(void), char *captured, size_t size)
{
    FILE *err = tmpfile();
    pid_t child;
    int status = 0;
    size_t n;

    fflush(NULL);
    child = fork();
    if (child == 0) {
        dup2(fileno(err), STDERR_FILENO);
        body();
        fflush(NULL);
        _exit(0);
    }
    waitpid(child, &status, 0);
    rewind(err);
    n = fread(captured, 1, size - 1, err);
    captured[n] = '\0';
    fclose(err);
    return status;
}

/* Runs `body` in a child. `stderr_has`: NULL if the case must end normally (exit 0);
 * else it must be stopped by the runtime with a line containing that text. */
static __attribute__((unused)) void check_case(const char *name, void (*body)(void), const char *stderr_has)
{
    char captured[8192];
    int status = check_run(body, captured, sizeof captured), ok;

    if (stderr_has == NULL)
        ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
    else
        ok = WIFEXITED(status) && WEXITSTATUS(status) == CHECK_STOPPED && strstr(captured, stderr_has) != NULL;
    if (ok) {
        check_passed++;
        return;
    }
    check_failed++;
    printf("FAIL %s (status %d%s%s)\n%s", name, WIFEXITED(status) ? WEXITSTATUS(status) : -1,
           stderr_has ? ", expected a stop with: " : "", stderr_has ? stderr_has : "", captured);
}

static __attribute__((unused)) int check_summary(void)
{
    printf("%d passed, %d failed\n", check_passed, check_failed);
    return check_failed != 0;
}

/* Writes `text` to a new temporary file; returns its path (static storage per call site). */
static __attribute__((unused)) const char *check_file(const char *text)
{
    static char path[64];
    int fd;

    snprintf(path, sizeof path, "/tmp/qmpi-check-XXXXXX");
    fd = mkstemp(path);
    if (fd < 0 || write(fd, text, strlen(text)) != (ssize_t)strlen(text)) {
        perror("check_file");
        exit(2);
    }
    close(fd);
    return path;
}

/* Compiles `source` with `flags` into dir/name with $CC (cc); returns the path (a
 * static buffer, 8 in turn). Stops the test program if it cannot. */
static __attribute__((unused)) const char *check_build(const char *dir, const char *name, const char *flags,
                                                       const char *source)
{
    static char paths[8][512];
    static int next;
    char command[2048], *path = paths[next++ % 8];
    const char *cc = getenv("CC") ? getenv("CC") : "cc";
    FILE *out;

    snprintf(path, 512, "%s/%s.c", dir, name);
    out = fopen(path, "w");
    fputs(source, out);
    fclose(out);
    snprintf(command, sizeof command, "%s %s -o %s/%s %s", cc, flags, dir, name, path);
    if (system(command) != 0) {
        fprintf(stderr, "cannot build: %s\n", command);
        exit(2);
    }
    snprintf(path, 512, "%s/%s", dir, name);
    return path;
}

#endif
