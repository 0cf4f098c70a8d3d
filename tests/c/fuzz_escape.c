/* fuzz_escape.c: libFuzzer harness for the escaping of error lines (errors.c): whatever
 * the bytes, the escaped text is valid UTF-8 with no control character, at most 4 bytes
 * per byte, and (when the input holds no literal \x) gives the input back when \xNN
 * is read back. */
#define _GNU_SOURCE
#include "../../qmpigen/runtime/qmpi_runtime.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void qmpi_stop_job(void)
{
    _exit(86);
}

/* The first code point of valid UTF-8 at `s` and its length (0: invalid), for the check. */
static size_t utf8_length(const unsigned char *s, size_t n, unsigned *code)
{
    size_t need = s[0] < 0x80 ? 0 : s[0] >= 0xf0 ? 3 : s[0] >= 0xe0 ? 2 : s[0] >= 0xc0 ? 1 : 99, i;
    unsigned value = need == 0 ? s[0] : need == 1 ? s[0] & 0x1fu : need == 2 ? s[0] & 0x0fu : s[0] & 0x07u;

    if (need == 99 || need >= n)
        return 0;
    for (i = 1; i <= need; i++) {
        if ((s[i] & 0xc0) != 0x80)
            return 0;
        value = value << 6 | (s[i] & 0x3fu);
    }
    if ((need == 1 && value < 0x80) || (need == 2 && value < 0x800) || (need == 3 && value < 0x10000) ||
        value > 0x10ffff || (value >= 0xd800 && value <= 0xdfff))
        return 0;
    *code = value;
    return need + 1;
}

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size)
{
    char *out = malloc(4 * size + 1), *back = malloc(size + 1);
    size_t length = qmpi_escape(out, (const char *)data, size), i = 0, j = 0;
    int plain = memmem(data, size, "\\x", 2) == NULL; /* else a literal \x in it reads back wrong */

    if (length > 4 * size)
        abort();
    while (i < length) {
        unsigned code = 0;
        size_t n = utf8_length((const unsigned char *)out + i, length - i, &code);
        if (n == 0 || code < 0x20 || (code >= 0x7f && code <= 0x9f))
            abort(); /* not UTF-8, or a control character */
        if (plain && out[i] == '\\' && i + 3 < length && out[i + 1] == 'x') {
            back[j++] = (char)strtol((char[]){out[i + 2], out[i + 3], 0}, NULL, 16);
            i += 4;
            continue;
        }
        if (plain)
            memcpy(back + j, out + i, n), j += n;
        i += n;
    }
    if (plain && (j != size || memcmp(back, data, size) != 0))
        abort();
    free(out);
    free(back);
    return 0;
}
