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

int main(void)
{
    check_case("fatalf formats one line", fatal_formats_one_line, "qmpi: error: level 3: bad\n");
    check_case("fatal escapes control characters", fatal_escapes_controls,
               "qmpi: error: TOOLS entry 1 (a\\x0ab\\x09c\\x7f): cannot load\n");
    check_case("fatal keeps a long message whole", fatal_keeps_long_messages, "xxxx!\n");
    check_case("alloc of nothing is a block", alloc_zero_is_a_valid_block, NULL);
    check_case("alloc that overflows stops", alloc_overflow_stops, "the chain is too long to allocate");
    return check_summary();
}
