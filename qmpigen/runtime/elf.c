/* elf.c: reading a tool's ELF file (<elf.h>, no libelf): is it an unmodified PMPI tool,
 * which other names share bytes with the PMPI_ imports to rename, and the renaming
 * itself in a private copy. Needs no MPI: the names of the enumeration come from
 * qmpi_function_index. The loading policy is pmpi_load.c's. */
#define _GNU_SOURCE
#include "qmpi_runtime.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#if defined(__x86_64__)
#define QMPI_ELF_MACHINE EM_X86_64
#elif defined(__aarch64__)
#define QMPI_ELF_MACHINE EM_AARCH64
#elif defined(__powerpc64__) && defined(_CALL_ELF) && _CALL_ELF == 2
#define QMPI_ELF_MACHINE EM_PPC64
#endif
QMPI_HIDDEN int qmpi_why(char *why, const char *format, ...)
{
    va_list args;
    va_start(args, format);
    vsnprintf(why, QMPI_WHY, format, args);
    va_end(args);
    return QMPI_REFUSED;
}

/* Whether `offset` is aligned for a `type` in the mapped image (page aligned). */
#define QMPI_ELF_ALIGNED(offset, type) ((offset) % _Alignof(type) == 0)

static int qmpi_elf_within(const struct qmpi_elf *elf, size_t offset, size_t length)
{
    return offset <= elf->size && length <= elf->size - offset;
}

QMPI_HIDDEN const char *qmpi_elf_string(const struct qmpi_elf *elf, size_t offset)
{
    return offset < elf->strings_size && memchr(elf->strings + offset, 0, elf->strings_size - offset)
               ? elf->strings + offset
               : NULL;
}

QMPI_HIDDEN int qmpi_elf_defines(const ElfW(Sym) * symbol)
{
    int type = ELF64_ST_TYPE(symbol->st_info);
    return symbol->st_shndx != SHN_UNDEF && ELF64_ST_BIND(symbol->st_info) != STB_LOCAL &&
           (type == STT_FUNC || type == STT_GNU_IFUNC || type == STT_OBJECT || type == STT_NOTYPE);
}

/* Where dlopen would find `path`: itself if it has a '/', else in LD_LIBRARY_PATH.
 * 0 if not found that way (dlopen then searches its cache and says what it finds). */
QMPI_HIDDEN int qmpi_tool_file(const char *path, char *file, size_t size)
{
    const char *dirs = getenv("LD_LIBRARY_PATH"), *end;

    if (strchr(path, '/'))
        return snprintf(file, size, "%s", path) < (int)size;
    for (; dirs != NULL && *dirs != '\0'; dirs = *end ? end + 1 : end) {
        end = strchrnul(dirs, ':');
        if ((size_t)snprintf(file, size, "%.*s%s%s", (int)(end - dirs), dirs, end > dirs ? "/" : "", path) < size &&
            access(file, R_OK) == 0)
            return 1;
    }
    return 0;
}

QMPI_HIDDEN void qmpi_elf_close(struct qmpi_elf *elf)
{
    if (elf->image != NULL)
        munmap((void *)elf->image, elf->size);
    if (elf->fd >= 0)
        close(elf->fd);
    elf->image = NULL;
    elf->fd = -1;
}

/* Maps `file` and checks it is a shared object for this machine; finds its tables. */
QMPI_HIDDEN int qmpi_elf_open(const char *file, struct qmpi_elf *elf, char *why)
{
    const ElfW(Shdr) * sections;
    struct stat st;
    size_t i;

    memset(elf, 0, sizeof *elf);
    elf->fd = open(file, O_RDONLY | O_CLOEXEC);
    if (elf->fd < 0)
        return QMPI_NOT_PMPI; /* dlopen says why, as for any tool */
    if (fstat(elf->fd, &st) != 0 || !S_ISREG(st.st_mode) || (size_t)st.st_size < sizeof(ElfW(Ehdr)))
        return qmpi_why(why, "cannot load: not an ELF file (not a regular file of an ELF header's size)");
    elf->size = (size_t)st.st_size;
    elf->image = mmap(NULL, elf->size, PROT_READ, MAP_PRIVATE, elf->fd, 0);
    if (elf->image == MAP_FAILED) {
        elf->image = NULL;
        return qmpi_why(why, "cannot load: cannot map it: %s", strerror(errno));
    }
    elf->header = (const ElfW(Ehdr) *)elf->image;
    if (memcmp(elf->header->e_ident, ELFMAG, SELFMAG) != 0)
        return qmpi_why(why, "cannot load: not an ELF file");
#ifdef QMPI_ELF_MACHINE
    if (elf->header->e_ident[EI_CLASS] != (sizeof(void *) == 8 ? ELFCLASS64 : ELFCLASS32) ||
        elf->header->e_machine != QMPI_ELF_MACHINE)
        return qmpi_why(why, "cannot load: built for another architecture (ELF class %d, machine %d)",
                        elf->header->e_ident[EI_CLASS], elf->header->e_machine);
#endif
    if (elf->header->e_type == ET_REL)
        return qmpi_why(why, "cannot load: an object file, not a shared object: link it with -shared");
    if (elf->header->e_type != ET_DYN)
        return qmpi_why(why, "cannot load: an executable, not a shared object: link it with -shared");
    if (elf->header->e_shentsize != sizeof *sections || !QMPI_ELF_ALIGNED(elf->header->e_shoff, ElfW(Shdr)) ||
        !qmpi_elf_within(elf, elf->header->e_shoff, (size_t)elf->header->e_shnum * sizeof *sections))
        return QMPI_NOT_PMPI; /* no usable section headers: leave it to dlopen */
    sections = (const ElfW(Shdr) *)(elf->image + elf->header->e_shoff);
    for (i = 0; i < elf->header->e_shnum; i++) {
        const ElfW(Shdr) *s = &sections[i];
        if (!qmpi_elf_within(elf, s->sh_offset, s->sh_type == SHT_NOBITS ? 0 : s->sh_size))
            return qmpi_why(why, "cannot load: section %zu lies outside the file", i);
        if (((s->sh_type == SHT_DYNSYM || s->sh_type == SHT_DYNAMIC) && !QMPI_ELF_ALIGNED(s->sh_offset, ElfW(Xword))) ||
            ((s->sh_type == SHT_GNU_verneed || s->sh_type == SHT_GNU_verdef) &&
             !QMPI_ELF_ALIGNED(s->sh_offset, ElfW(Word))))
            return qmpi_why(why, "cannot load: section %zu is misaligned", i);
        if (s->sh_type == SHT_DYNSYM && s->sh_link < elf->header->e_shnum) {
            const ElfW(Shdr) *t = &sections[s->sh_link];
            if (!qmpi_elf_within(elf, t->sh_offset, t->sh_size) || t->sh_size == 0 ||
                elf->image[t->sh_offset + t->sh_size - 1] != '\0')
                return qmpi_why(why, "cannot load: its dynamic string table is damaged");
            elf->symbols = (const ElfW(Sym) *)(elf->image + s->sh_offset);
            elf->nsymbols = s->sh_size / sizeof(ElfW(Sym));
            elf->strings = (const char *)elf->image + t->sh_offset;
            elf->strings_offset = t->sh_offset;
            elf->strings_size = t->sh_size;
        } else if (s->sh_type == SHT_DYNAMIC) {
            elf->dynamic = (const ElfW(Dyn) *)(elf->image + s->sh_offset);
            elf->ndynamic = s->sh_size / sizeof(ElfW(Dyn));
        } else if (s->sh_type == SHT_GNU_verneed) {
            elf->verneed = s;
        } else if (s->sh_type == SHT_GNU_verdef) {
            elf->verdef = s;
        }
    }
    for (i = 0; i < elf->ndynamic && elf->dynamic[i].d_tag != DT_NULL; i++)
        if (elf->dynamic[i].d_tag == DT_FLAGS_1 && (elf->dynamic[i].d_un.d_val & DF_1_PIE))
            return qmpi_why(why, "cannot load: a position-independent executable, not a shared object");
    return QMPI_NOT_PMPI;
}

/* A PMPI tool: it defines an MPI_X of the enumeration, no get_interceptions, no PMPI_X
 * (an MPI library) and is not this core. Anything else goes the thesis-style way. */
QMPI_HIDDEN int qmpi_elf_kind(const struct qmpi_elf *elf, char *why)
{
    int mpi = 0, pmpi = 0, core = 0;
    size_t i;

    for (i = 1; i < elf->nsymbols; i++) {
        const char *name = qmpi_elf_string(elf, elf->symbols[i].st_name);
        if (name == NULL || !qmpi_elf_defines(&elf->symbols[i]))
            continue;
        if (strcmp(name, "get_interceptions") == 0)
            return QMPI_NOT_PMPI;
        mpi |= strncmp(name, "MPI_", 4) == 0 && qmpi_function_index(name) >= 0;
        pmpi |= name[0] == 'P' && qmpi_function_index(name + 1) >= 0;
        core |= strcmp(name, "QMPI_Get_calling_address") == 0;
    }
    if (mpi && pmpi)
        return qmpi_why(why, "cannot load: an MPI library (it defines PMPI_ functions), not a tool");
    if (mpi && core)
        return qmpi_why(why, "cannot load: the QMPI core itself, not a tool");
    if (mpi && elf->symbols != NULL && elf->dynamic != NULL) {
#ifndef QMPI_ELF_MACHINE
        return qmpi_why(why, "a PMPI tool, which this core loads on x86-64, AArch64 and ppc64le only");
#endif
        return QMPI_IS_PMPI;
    }
    return QMPI_NOT_PMPI;
}

/* Would overwriting the first byte of the names at `patch` change another name too?
 * Every user of .dynstr: symbols, DT_NEEDED/SONAME/RPATH/RUNPATH, version strings. */
static int qmpi_elf_overlaps(const struct qmpi_elf *elf, const size_t *patch, size_t npatch, size_t start, int own)
{
    const char *name = qmpi_elf_string(elf, start);
    size_t length, k;

    if (name == NULL)
        return 0;
    length = strlen(name);
    for (k = 0; k < npatch; k++)
        if (patch[k] >= start && patch[k] < start + length && !(own && patch[k] == start))
            return 1;
    return 0;
}

QMPI_HIDDEN const char *qmpi_elf_shared_string(const struct qmpi_elf *elf, const size_t *patch, size_t npatch,
                                               const unsigned char *renamed)
{
    size_t i;

    for (i = 1; i < elf->nsymbols; i++)
        if (qmpi_elf_overlaps(elf, patch, npatch, elf->symbols[i].st_name, renamed[i]))
            return qmpi_elf_string(elf, elf->symbols[i].st_name);
    for (i = 0; i < elf->ndynamic && elf->dynamic[i].d_tag != DT_NULL; i++) {
        ElfW(Sxword) tag = elf->dynamic[i].d_tag;
        if ((tag == DT_NEEDED || tag == DT_SONAME || tag == DT_RPATH || tag == DT_RUNPATH || tag == DT_AUXILIARY ||
             tag == DT_FILTER) &&
            qmpi_elf_overlaps(elf, patch, npatch, elf->dynamic[i].d_un.d_val, 0))
            return qmpi_elf_string(elf, elf->dynamic[i].d_un.d_val);
    }
    if (elf->verneed != NULL) { /* Verneed.vn_file, Vernaux.vna_name */
        const unsigned char *p = elf->image + elf->verneed->sh_offset, *end = p + elf->verneed->sh_size;
        while (p + sizeof(ElfW(Verneed)) <= end && QMPI_ELF_ALIGNED((uintptr_t)p, ElfW(Verneed))) {
            const ElfW(Verneed) *need = (const void *)p;
            const unsigned char *a = p + need->vn_aux;
            int k;
            if (qmpi_elf_overlaps(elf, patch, npatch, need->vn_file, 0))
                return "a version requirement";
            for (k = 0;
                 k < need->vn_cnt && a + sizeof(ElfW(Vernaux)) <= end && QMPI_ELF_ALIGNED((uintptr_t)a, ElfW(Vernaux));
                 k++, a += ((const ElfW(Vernaux) *)a)->vna_next)
                if (qmpi_elf_overlaps(elf, patch, npatch, ((const ElfW(Vernaux) *)a)->vna_name, 0))
                    return "a version name";
            if (need->vn_next == 0)
                break;
            p += need->vn_next;
        }
    }
    if (elf->verdef != NULL) { /* Verdaux.vda_name */
        const unsigned char *p = elf->image + elf->verdef->sh_offset, *end = p + elf->verdef->sh_size;
        while (p + sizeof(ElfW(Verdef)) <= end && QMPI_ELF_ALIGNED((uintptr_t)p, ElfW(Verdef))) {
            const ElfW(Verdef) *def = (const void *)p;
            const unsigned char *a = p + def->vd_aux;
            int k;
            for (k = 0;
                 k < def->vd_cnt && a + sizeof(ElfW(Verdaux)) <= end && QMPI_ELF_ALIGNED((uintptr_t)a, ElfW(Verdaux));
                 k++, a += ((const ElfW(Verdaux) *)a)->vda_next)
                if (qmpi_elf_overlaps(elf, patch, npatch, ((const ElfW(Verdaux) *)a)->vda_name, 0))
                    return "a version definition";
            if (def->vd_next == 0)
                break;
            p += def->vd_next;
        }
    }
    return NULL;
}

/* Renames the PMPI_ imports at `patch` (offsets into .dynstr) in the private copy `fd` of
 * `elf`: their first byte becomes `letter`. 0, or -1 with errno set. */
QMPI_HIDDEN int qmpi_elf_rename(int fd, const struct qmpi_elf *elf, const size_t *patch, size_t npatch, char letter)
{
    size_t i;

    for (i = 0; i < npatch; i++)
        if (pwrite(fd, &letter, 1, (off_t)(elf->strings_offset + patch[i])) != 1)
            return -1;
    return 0;
}
