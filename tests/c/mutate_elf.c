/* mutate_elf.c: what the ELF reader lets through, against glibc's loader. Every field
 * of a tool's program headers, dynamic entries, relocations, GNU hash header, first
 * symbols and version records is set, one at a time, to values that break it (0, 1,
 * all ones, off by 8 or a page, one bit flipped...); each mutant the reader accepts is
 * dlopened (RTLD_NOW) in a child. Prints the counts and every mutant that crashed the
 * loader: those are what the reader cannot see. `make mutate` runs it on the corpus.
 * Known: a symbol's type flipped to IFUNC on a real code address makes the loader call
 * that function as a resolver; nothing in the file tells it apart. */
#include "../../qmpigen/runtime/qmpi_runtime.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

/* What the corpus's PMPI tools import, so that they bind (the program is -rdynamic). */
int PMPI_Send(const void *b, int c, int d, int e, int t, int m)
{
    (void)b;
    return c + d + e + t + m;
}
int PMPI_Comm_rank(int c, int *r)
{
    *r = c;
    return 0;
}

static unsigned char *original;
static size_t size;
static char path[64];
static int total, refused, loaded, load_error, crashed;

static size_t file_offset(ElfW(Addr) vaddr)
{
    const ElfW(Ehdr) *h = (const ElfW(Ehdr) *)original;
    const ElfW(Phdr) *p = (const ElfW(Phdr) *)(original + h->e_phoff);
    int i;
    for (i = 0; i < h->e_phnum; i++)
        if (p[i].p_type == PT_LOAD && vaddr >= p[i].p_vaddr && vaddr < p[i].p_vaddr + p[i].p_filesz)
            return p[i].p_offset + vaddr - p[i].p_vaddr;
    return 0;
}

static void try_value(size_t at, int width, unsigned long long value)
{
    unsigned char *data = malloc(size);
    struct qmpi_elf elf;
    char why[QMPI_WHY];
    FILE *out;
    int kind, status;
    pid_t child;

    memcpy(data, original, size);
    memcpy(data + at, &value, (size_t)width); /* little-endian: the low bytes */
    if (memcmp(data, original, size) == 0) {
        free(data);
        return;
    }
    out = fopen(path, "wb");
    fwrite(data, 1, size, out);
    fclose(out);
    free(data);
    total++;
    kind = qmpi_elf_open(path, &elf, why);
    if (kind == QMPI_NOT_PMPI && elf.image != NULL)
        kind = qmpi_elf_kind(&elf, why);
    qmpi_elf_close(&elf);
    if (kind == QMPI_REFUSED) {
        refused++;
        return;
    }
    fflush(NULL);
    child = fork();
    if (child == 0) {
        alarm(10);
        _exit(dlopen(path, RTLD_NOW | RTLD_LOCAL) != NULL ? 0 : 1);
    }
    waitpid(child, &status, 0);
    if (WIFSIGNALED(status)) {
        crashed++;
        printf("  loader crash (signal %d): byte 0x%zx (%d bytes) = 0x%llx\n", WTERMSIG(status), at, width, value);
    } else if (WEXITSTATUS(status) == 0) {
        loaded++;
    } else {
        load_error++;
    }
}

static void mutate(size_t at, int width)
{
    unsigned long long o = 0, values[16];
    size_t i;
    memcpy(&o, original + at, (size_t)width);
    values[0] = 0, values[1] = 1, values[2] = 2, values[3] = 3, values[4] = 7, values[5] = 0x7fffffff;
    values[6] = ~0ULL, values[7] = o + 8, values[8] = o - 8, values[9] = o + 0x1000, values[10] = o ^ (1ULL << 3);
    values[11] = o ^ (1ULL << 12), values[12] = o ^ (1ULL << 20), values[13] = o ^ (1ULL << 31);
    values[14] = o ^ (1ULL << 40), values[15] = o * 2;
    for (i = 0; i < 16; i++)
        try_value(at, width, values[i]);
}

int main(int argc, char **argv)
{
    int f;

    snprintf(path, sizeof path, "/tmp/qmpi-mutant-%d.so", (int)getpid());
    for (f = 1; f < argc; f++) {
        const ElfW(Ehdr) * h;
        const ElfW(Phdr) * p;
        const ElfW(Dyn) *dyn = NULL;
        ElfW(Addr) at[8] = {0}; /* RELA, JMPREL, GNU_HASH, SYMTAB, VERNEED, VERDEF */
        size_t dyn_offset = 0, rela_size = 0, plt_size = 0, a, i;
        FILE *in = fopen(argv[f], "rb");
        int start;

        if (in == NULL)
            continue;
        fseek(in, 0, SEEK_END);
        size = (size_t)ftell(in);
        rewind(in);
        free(original);
        original = malloc(size);
        if (fread(original, 1, size, in) != size)
            return 2;
        fclose(in);
        total = refused = loaded = load_error = crashed = 0;
        printf("%s\n", argv[f]);
        h = (const ElfW(Ehdr) *)original;
        p = (const ElfW(Phdr) *)(original + h->e_phoff);
        for (i = 0; i < h->e_phnum; i++)
            if (p[i].p_type == PT_DYNAMIC)
                dyn_offset = p[i].p_offset, dyn = (const ElfW(Dyn) *)(original + dyn_offset);
        start = total;
        for (a = h->e_phoff; a < h->e_phoff + h->e_phnum * sizeof(ElfW(Phdr)); a += 8)
            mutate(a, 8);
        printf("  program headers: %d mutants\n", total - start);
        start = total;
        for (i = 0; dyn != NULL && dyn[i].d_tag != DT_NULL; i++) {
            mutate(dyn_offset + i * sizeof(ElfW(Dyn)) + 8, 8);
            switch (dyn[i].d_tag) {
            case DT_RELA:
                at[0] = dyn[i].d_un.d_ptr;
                break;
            case DT_RELASZ:
                rela_size = dyn[i].d_un.d_val;
                break;
            case DT_JMPREL:
                at[1] = dyn[i].d_un.d_ptr;
                break;
            case DT_PLTRELSZ:
                plt_size = dyn[i].d_un.d_val;
                break;
            case DT_GNU_HASH:
                at[2] = dyn[i].d_un.d_ptr;
                break;
            case DT_SYMTAB:
                at[3] = dyn[i].d_un.d_ptr;
                break;
            case DT_VERNEED:
                at[4] = dyn[i].d_un.d_ptr;
                break;
            case DT_VERDEF:
                at[5] = dyn[i].d_un.d_ptr;
                break;
            }
        }
        printf("  dynamic entries: %d mutants\n", total - start);
        start = total;
        for (a = 0; at[0] && a < rela_size; a += 8)
            mutate(file_offset(at[0]) + a, 8);
        for (a = 0; at[1] && a < plt_size; a += 8)
            mutate(file_offset(at[1]) + a, 8);
        printf("  relocations: %d mutants\n", total - start);
        start = total;
        for (a = 0; at[2] && a < 40; a += 4)
            mutate(file_offset(at[2]) + a, 4);
        printf("  GNU hash table: %d mutants\n", total - start);
        start = total;
        for (a = 0; at[3] && a < 6 * sizeof(ElfW(Sym)); a += 4)
            mutate(file_offset(at[3]) + a, 4);
        printf("  symbols: %d mutants\n", total - start);
        start = total;
        for (a = 0; at[4] && a < 48; a += 4)
            mutate(file_offset(at[4]) + a, 4);
        for (a = 0; at[5] && a < 48; a += 4)
            mutate(file_offset(at[5]) + a, 4);
        printf("  version records: %d mutants\n", total - start);
        printf("  %d mutants: %d refused, %d loaded, %d refused by dlopen, %d crashed the loader\n", total, refused,
               loaded, load_error, crashed);
    }
    unlink(path);
    return 0;
}
