/* errors.c: one line per error, control characters escaped, allocation failures stop. */
#include "../../qmpigen/runtime/qmpi_runtime.h"
#include "check.h"

#include <stdint.h>

static void fatal_formats_one_line(void)
{
    qmpi_fatalf("level %d: %s", 3, "bad");
}

static void fatal_escapes_controls(void)
{
    qmpi_fatal("TOOLS entry 1 (a\nb\tc\x7f): cannot load");
}

static void fatal_keeps_valid_utf8(void)
{
    qmpi_fatal("TOOLS entry 1 (/home/jos\xc3\xa9/\xe2\x82\xac/\xf0\x9f\x94\xa7.so): cannot load");
}

/* Stray continuation, overlong '/', a surrogate, beyond U+10FFFF, a C1 control, Latin-1,
 * a sequence cut short by the end of the text. */
static void fatal_escapes_bytes_that_are_not_utf8(void)
{
    qmpi_fatal("path \x80|\xc0\xaf|\xed\xa0\x80|\xf4\x90\x80\x80|\xc2\x85|caf\xe9|\xe2\x82");
}

static void fatal_keeps_long_messages(void)
{
    char text[6000];
    memset(text, 'x', sizeof text - 2);
    text[sizeof text - 2] = '!';
    text[sizeof text - 1] = '\0';
    qmpi_fatal(text);
}

static void alloc_zero_is_a_valid_block(void)
{
    char *block = qmpi_alloc(0, 0);
    CHECK(block != NULL);
    free(block);
    block = qmpi_alloc(3, 5);
    CHECK(block[14] == 0);
    free(block);
}

static void alloc_overflow_stops(void)
{
    qmpi_alloc(SIZE_MAX / 2, 4);
}

static void warning_line(void)
{
    char captured[256] = "";
    FILE *err = tmpfile();
    int saved = dup(STDERR_FILENO);
    size_t n;

    dup2(fileno(err), STDERR_FILENO);
    qmpi_warnf("QMPI_CONF=%s: no tools", "a\nb\xff");
    dup2(saved, STDERR_FILENO);
    rewind(err);
    n = fread(captured, 1, sizeof captured - 1, err);
    captured[n] = '\0';
    CHECK_STR(captured, "qmpi: warning: QMPI_CONF=a\\x0ab\\xff: no tools\n");
}

int main(void)
{
    check_case("fatalf formats one line", fatal_formats_one_line, "qmpi: error: level 3: bad\n");
    check_case("fatal escapes control characters", fatal_escapes_controls,
               "qmpi: error: TOOLS entry 1 (a\\x0ab\\x09c\\x7f): cannot load\n");
    check_case("fatal keeps valid UTF-8", fatal_keeps_valid_utf8,
               "qmpi: error: TOOLS entry 1 (/home/jos\xc3\xa9/\xe2\x82\xac/\xf0\x9f\x94\xa7.so): cannot load\n");
    check_case("fatal escapes bytes that are not UTF-8", fatal_escapes_bytes_that_are_not_utf8,
               "qmpi: error: path \\x80|\\xc0\\xaf|\\xed\\xa0\\x80|\\xf4\\x90\\x80\\x80|\\xc2\\x85|caf\\xe9|"
               "\\xe2\\x82\n");
    check_case("warning is one escaped line", warning_line, NULL);
    check_case("fatal keeps a long message whole", fatal_keeps_long_messages, "xxxx!\n");
    check_case("alloc of nothing is a block", alloc_zero_is_a_valid_block, NULL);
    check_case("alloc that overflows stops", alloc_overflow_stops, "the chain is too long to allocate");
    return check_summary();
}
