/* elf_copy.c: a PMPI tool's private copy (what the loader reads, holes kept as holes)
 * and the renaming of its PMPI_ imports in it, on a file elf.c has checked. Needs no MPI. */
#define _GNU_SOURCE
#include "qmpi_runtime.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/sendfile.h>
#include <sys/stat.h>
#include <unistd.h>

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
    int k;

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
    /* Version records: qmpi_elf_open checked the walk (qmpi_elf_versions); Verneed.vn_file,
     * Vernaux.vna_name, Verdaux.vda_name. */
    for (k = 0; k < 2; k++) {
        size_t at = k ? elf->verdef : elf->verneed, aux;
        while (at != 0) {
            ElfW(Word) next, aux_next;
            if (k) {
                const ElfW(Verdef) *def = (const ElfW(Verdef) *)(elf->image + at);
                aux = at + def->vd_aux, next = def->vd_next;
            } else {
                const ElfW(Verneed) *need = (const ElfW(Verneed) *)(elf->image + at);
                if (qmpi_elf_overlaps(elf, patch, npatch, need->vn_file, 0))
                    return "a version requirement";
                aux = at + need->vn_aux, next = need->vn_next;
            }
            do {
                ElfW(Word) name = k ? ((const ElfW(Verdaux) *)(elf->image + aux))->vda_name
                                    : ((const ElfW(Vernaux) *)(elf->image + aux))->vna_name;
                aux_next = k ? ((const ElfW(Verdaux) *)(elf->image + aux))->vda_next
                             : ((const ElfW(Vernaux) *)(elf->image + aux))->vna_next;
                if (qmpi_elf_overlaps(elf, patch, npatch, name, 0))
                    return k ? "a version definition" : "a version name";
                aux += aux_next;
            } while (aux_next != 0);
            at = next != 0 ? at + next : 0;
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

/* Copies `length` bytes at `offset` of the tool into `fd` at the same offset, skipping
 * the file's holes (they read as zeros in `fd`, already that size). 0, or -1 (errno). */
static int qmpi_elf_copy_range(const struct qmpi_elf *elf, int fd, size_t offset, size_t length)
{
    size_t end = offset + length;

    while (offset < end) {
        off_t data = lseek(elf->fd, (off_t)offset, SEEK_DATA), hole;
        if (data < 0 && errno == ENXIO)
            return 0; /* nothing but a hole from here on */
        if (data < 0) /* no SEEK_DATA here: copy it all */
            data = (off_t)offset, hole = (off_t)end;
        else
            hole = lseek(elf->fd, data, SEEK_HOLE);
        if (hole < 0 || (size_t)hole > end)
            hole = (off_t)end;
        if ((size_t)data >= end)
            return 0;
        if (lseek(fd, data, SEEK_SET) != data)
            return -1;
        for (offset = (size_t)data; offset < (size_t)hole;) {
            off_t from = (off_t)offset;
            ssize_t sent = sendfile(fd, elf->fd, &from, (size_t)hole - offset);
            if (sent <= 0) {
                if (sent == 0)
                    errno = EIO;
                return -1;
            }
            offset += (size_t)sent;
        }
    }
    return 0;
}

/* Debuggers and symbolizers read the copy's file for the tool's function names: the
 * section headers, symbol and string tables are copied too (small); a section whose
 * bytes are not (debug information) becomes SHT_NOBITS in the copy, so that no reader
 * takes its zeros for content. A section table the loader would not need and that
 * does not hold together is left out. */
static int qmpi_elf_copy_sections(const struct qmpi_elf *elf, int fd)
{
    const ElfW(Ehdr) *h = elf->header;
    const ElfW(Shdr) *sections = (const ElfW(Shdr) *)(elf->image + h->e_shoff);
    size_t i, n = h->e_shnum;

    if (h->e_shoff == 0 || n == 0 || h->e_shentsize != sizeof(ElfW(Shdr)) ||
        !QMPI_ELF_ALIGNED(h->e_shoff, ElfW(Shdr)) || !qmpi_elf_within(elf, h->e_shoff, n * sizeof(ElfW(Shdr))))
        return 0;
    if (qmpi_elf_copy_range(elf, fd, h->e_shoff, n * sizeof(ElfW(Shdr))) != 0)
        return -1;
    for (i = 1; i < n; i++) {
        ElfW(Shdr) s = sections[i];
        if ((s.sh_flags & SHF_ALLOC) || s.sh_type == SHT_NOBITS || s.sh_type == SHT_NULL)
            continue; /* in a segment (copied), or without bytes */
        if ((s.sh_type == SHT_SYMTAB || s.sh_type == SHT_STRTAB) && qmpi_elf_within(elf, s.sh_offset, s.sh_size)) {
            if (qmpi_elf_copy_range(elf, fd, s.sh_offset, s.sh_size) != 0)
                return -1;
            continue;
        }
        s.sh_type = SHT_NOBITS;
        if (pwrite(fd, &s, sizeof s, (off_t)(h->e_shoff + i * sizeof s)) != (ssize_t)sizeof s)
            return -1;
    }
    return 0;
}

/* Fills `fd`, a private copy of the tool, with what the loader reads: the ELF header,
 * the program headers and every segment's file bytes (the dynamic string table the
 * renaming patches lies in one), and the symbols for debuggers (qmpi_elf_copy_sections).
 * The file's size is kept; the rest (debug information) and the holes inside segments
 * stay holes, so a copy costs the tool's loadable bytes, not its file. 0, or -1 (errno). */
QMPI_HIDDEN int qmpi_elf_copy(const struct qmpi_elf *elf, int fd)
{
    size_t i;

    if (ftruncate(fd, (off_t)elf->size) != 0 || qmpi_elf_copy_range(elf, fd, 0, sizeof(ElfW(Ehdr))) != 0 ||
        qmpi_elf_copy_range(elf, fd, elf->header->e_phoff, elf->nsegments * sizeof(ElfW(Phdr))) != 0)
        return -1;
    for (i = 0; i < elf->nsegments; i++) {
        const ElfW(Phdr) *p = &elf->segments[i], *q;
        size_t k;
        /* A segment inside a loadable one (PT_DYNAMIC, PT_NOTE, ...) is copied with it. */
        for (k = 0, q = NULL; k < elf->nsegments && p->p_type != PT_LOAD; k++)
            if (elf->segments[k].p_type == PT_LOAD &&
                qmpi_inside(p->p_offset, p->p_filesz, elf->segments[k].p_offset, elf->segments[k].p_filesz))
                q = &elf->segments[k];
        if (q == NULL && p->p_filesz != 0 && qmpi_elf_copy_range(elf, fd, p->p_offset, p->p_filesz) != 0)
            return -1;
    }
    return qmpi_elf_copy_sections(elf, fd);
}
