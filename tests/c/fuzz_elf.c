/* fuzz_elf.c: libFuzzer harness for the ELF reader (elf.c): check and classify the input
 * as a tool would be (program headers, dynamic section and everything it points to),
 * make the private copy of what the loader reads, then check which names share bytes
 * with its PMPI_ imports and rename them in the copy. */
#define _GNU_SOURCE
#include "../../qmpigen/runtime/qmpi_runtime.h"

#include <stdio.h>
#include <sys/mman.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static char path[64];
    struct qmpi_elf elf;
    char why[QMPI_WHY];
    FILE *out;
    int kind;

    if (path[0] == '\0')
        snprintf(path, sizeof path, "/tmp/qmpi-fuzz-elf-%d", (int)getpid());
    out = fopen(path, "w");
    if (out == NULL)
        return 0;
    fwrite(data, 1, size, out);
    fclose(out);
    kind = qmpi_elf_open(path, &elf, why);
    if (kind == QMPI_NOT_PMPI && elf.image != NULL)
        kind = qmpi_elf_kind(&elf, why);
    if (kind == QMPI_IS_PMPI) {
        size_t *patch = calloc(elf.nsymbols + 1, sizeof *patch), npatch = 0, i;
        unsigned char *renamed = calloc(elf.nsymbols + 1, 1);

        for (i = 1; i < elf.nsymbols; i++) {
            const char *name = qmpi_elf_string(&elf, elf.symbols[i].st_name);
            if (name != NULL && elf.symbols[i].st_shndx == SHN_UNDEF && strncmp(name, "PMPI_", 5) == 0 &&
                qmpi_function_index(name + 1) >= 0) {
                patch[npatch++] = elf.symbols[i].st_name;
                renamed[i] = 1;
            }
        }
        if (qmpi_elf_shared_string(&elf, patch, npatch, renamed) == NULL) {
            int copy = memfd_create("fuzz-elf-copy", MFD_CLOEXEC);
            if (copy >= 0 && qmpi_elf_copy(&elf, copy) == 0)
                (void)qmpi_elf_rename(copy, &elf, patch, npatch, 'Y');
            if (copy >= 0)
                close(copy);
        }
        free(patch);
        free(renamed);
    }
    qmpi_elf_close(&elf);
    return 0;
}
