/* elf.c: reading a tool's ELF file (<elf.h>, no libelf): every header, segment and
 * dynamic table checked against the file before anything maps or dlopens it, and
 * whether it is an unmodified PMPI tool. The private copy and the renaming of its
 * PMPI_ imports are elf_copy.c's. Needs no MPI: the names of the enumeration come from
 * qmpi_function_index. The loading policy is pmpi_load.c's. */
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

QMPI_HIDDEN int qmpi_elf_within(const struct qmpi_elf *elf, size_t offset, size_t length)
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

/* A file cut short (an interrupted copy, a full disk): the loader would map pages past
 * its end and every rank would die of SIGBUS inside dlopen. */
static int qmpi_elf_truncated(const struct qmpi_elf *elf, char *why, const char *what, size_t offset, size_t length)
{
    return qmpi_why(why, "cannot load: file is truncated: %s (bytes %zu to %zu) lies past its end (%zu bytes)", what,
                    offset, offset > SIZE_MAX - length ? SIZE_MAX : offset + length, elf->size);
}

#define QMPI_DAMAGED "cannot load: the file is damaged: "

/* [start, start + length) inside [low, low + size), without overflow. */
QMPI_HIDDEN int qmpi_inside(ElfW(Addr) start, size_t length, ElfW(Addr) low, ElfW(Xword) size)
{
    return start >= low && start - low <= size && length <= size - (start - low);
}

/* The file offset of the `length` bytes at address `vaddr`, if the file bytes of one
 * readable PT_LOAD segment hold them (what the loader maps there and reads); `end`:
 * where that segment's file bytes end. (size_t)-1 if none does. */
static size_t qmpi_elf_offset(const struct qmpi_elf *elf, ElfW(Addr) vaddr, size_t length, size_t *end)
{
    size_t i;

    for (i = 0; i < elf->nsegments; i++) {
        const ElfW(Phdr) *p = &elf->segments[i];
        if (p->p_type == PT_LOAD && (p->p_flags & PF_R) && qmpi_inside(vaddr, length, p->p_vaddr, p->p_filesz)) {
            if (end != NULL)
                *end = p->p_offset + p->p_filesz;
            return p->p_offset + (vaddr - p->p_vaddr);
        }
    }
    return (size_t)-1;
}

/* Whether the loader maps `length` bytes at `vaddr` in one PT_LOAD segment with `flags`. */
static int qmpi_elf_mapped(const struct qmpi_elf *elf, ElfW(Addr) vaddr, size_t length, ElfW(Word) flags)
{
    size_t i;

    for (i = 0; i < elf->nsegments; i++) {
        const ElfW(Phdr) *p = &elf->segments[i];
        if (p->p_type == PT_LOAD && (p->p_flags & flags) == flags && qmpi_inside(vaddr, length, p->p_vaddr, p->p_memsz))
            return 1;
    }
    return 0;
}

/* The value of dynamic entry `tag` (the last one, as the loader takes it); 0 if absent. */
static int qmpi_dyn(const struct qmpi_elf *elf, ElfW(Sxword) tag, ElfW(Xword) * value)
{
    size_t i;
    int found = 0;

    for (i = 0; i < elf->ndynamic; i++)
        if (elf->dynamic[i].d_tag == tag) {
            *value = elf->dynamic[i].d_un.d_val;
            found = 1;
        }
    return found;
}

/* The file offset of the table at dynamic entry `tag`, of `count` x `entry` bytes,
 * aligned for `align`; (size_t)-1 if it does not lie in a segment's file bytes. */
static size_t qmpi_elf_table(const struct qmpi_elf *elf, ElfW(Addr) vaddr, size_t count, size_t entry, size_t align,
                             size_t *end)
{
    size_t offset;

    if (entry != 0 && count > SIZE_MAX / entry)
        return (size_t)-1;
    offset = qmpi_elf_offset(elf, vaddr, count * entry, end);
    return offset != (size_t)-1 && vaddr % align == 0 && offset % align == 0 ? offset : (size_t)-1;
}

/* The symbol count from DT_GNU_HASH (what the loader uses when present), else DT_HASH,
 * each table checked as the loader walks it; -1 with `why` if damaged. */
static int qmpi_elf_count_symbols(struct qmpi_elf *elf, char *why)
{
    ElfW(Xword) vaddr = 0;
    size_t offset, end, i;

    if (qmpi_dyn(elf, DT_GNU_HASH, &vaddr)) {
        const uint32_t *h;
        uint32_t nbuckets, symoffset, bloom, top = 0;
        offset = qmpi_elf_table(elf, vaddr, 4, sizeof(uint32_t), sizeof(ElfW(Addr)), &end);
        if (offset == (size_t)-1)
            return qmpi_why(why, QMPI_DAMAGED "its GNU hash table (DT_GNU_HASH) lies outside its loadable segments");
        h = (const uint32_t *)(elf->image + offset);
        nbuckets = h[0], symoffset = h[1], bloom = h[2];
        /* The loader divides by nbuckets and masks with bloom - 1 (it asserts a power of 2). */
        if (nbuckets == 0 || bloom == 0 || (bloom & (bloom - 1)) != 0)
            return qmpi_why(why, QMPI_DAMAGED "its GNU hash table has %u buckets and %u Bloom words", nbuckets, bloom);
        if (qmpi_elf_table(elf, vaddr, 1, 16 + (size_t)bloom * sizeof(ElfW(Addr)) + (size_t)nbuckets * 4, 8, &end) ==
            (size_t)-1)
            return qmpi_why(why, QMPI_DAMAGED "its GNU hash table lies outside its loadable segments");
        {
            const uint32_t *buckets = (const uint32_t *)((const unsigned char *)h + 16 + (size_t)bloom * 8);
            size_t chain = offset + 16 + (size_t)bloom * 8 + (size_t)nbuckets * 4;
            for (i = 0; i < nbuckets; i++) {
                if (buckets[i] != 0 && buckets[i] < symoffset)
                    return qmpi_why(why, QMPI_DAMAGED "its GNU hash bucket %zu precedes the hashed symbols", i);
                top = buckets[i] > top ? buckets[i] : top;
            }
            elf->nsymbols = symoffset;
            if (top != 0) { /* the last chain ends the table: every chain ends by then */
                for (i = top;; i++) {
                    size_t at = chain + (i - symoffset) * 4;
                    if (at > end - 4 || end < 4)
                        return qmpi_why(why, QMPI_DAMAGED "a GNU hash chain runs past its segment");
                    if (*(const uint32_t *)(elf->image + at) & 1)
                        break;
                }
                elf->nsymbols = i + 1;
            }
        }
    } else if (qmpi_dyn(elf, DT_HASH, &vaddr)) {
        const ElfW(Word) * h;
        unsigned char *seen;
        ElfW(Word) nbucket, nchain;
        offset = qmpi_elf_table(elf, vaddr, 2, sizeof(ElfW(Word)), sizeof(ElfW(Word)), NULL);
        if (offset == (size_t)-1)
            return qmpi_why(why, QMPI_DAMAGED "its hash table (DT_HASH) lies outside its loadable segments");
        h = (const ElfW(Word) *)(elf->image + offset);
        nbucket = h[0], nchain = h[1];
        if (nbucket == 0 ||
            qmpi_elf_table(elf, vaddr, 2 + (size_t)nbucket + nchain, sizeof(ElfW(Word)), 4, NULL) == (size_t)-1)
            return qmpi_why(why, QMPI_DAMAGED "its hash table (DT_HASH) has %u buckets and %u chains", nbucket, nchain);
        /* Chains must end (a cycle would hang every lookup) and stay in the table. */
        seen = calloc((size_t)nchain + 1, 1);
        if (seen == NULL)
            return qmpi_why(why, "cannot load: out of memory reading its hash table");
        for (i = 0; i < nbucket; i++) {
            ElfW(Word) k;
            for (k = h[2 + i]; k != STN_UNDEF; k = h[2 + nbucket + k])
                if (k >= nchain || seen[k]++) {
                    free(seen);
                    return qmpi_why(why, QMPI_DAMAGED "its hash table (DT_HASH) has a broken chain");
                }
        }
        free(seen);
        elf->nsymbols = nchain;
    }
    return 0;
}

/* A version requirement (DT_VERNEED) or definition (DT_VERDEF) list, walked as the
 * loader walks it (next offsets until 0): every record aligned and in the segment,
 * every name in DT_STRTAB. `high`: the highest version index it gives. */
static int qmpi_elf_versions(struct qmpi_elf *elf, int definitions, unsigned *high, char *why)
{
    const char *what = definitions ? "version definitions (DT_VERDEF)" : "version requirements (DT_VERNEED)";
    size_t at = definitions ? elf->verdef : elf->verneed, end = definitions ? elf->verdef_end : elf->verneed_end;
    size_t budget = (end - at) / 8 + 1; /* records of 8 bytes at least: a bound on the walk */
    size_t record = definitions ? sizeof(ElfW(Verdef)) : sizeof(ElfW(Verneed));
    size_t aux_record = definitions ? sizeof(ElfW(Verdaux)) : sizeof(ElfW(Vernaux));

    while (1) {
        size_t aux;
        ElfW(Word) next, aux_next;
        if (at % 4 != 0 || at > end || end - at < record || budget-- == 0)
            return qmpi_why(why, QMPI_DAMAGED "its %s run out of their segment or are misaligned", what);
        if (definitions) {
            const ElfW(Verdef) *def = (const ElfW(Verdef) *)(elf->image + at);
            *high = (def->vd_ndx & 0x7fff) > *high ? (def->vd_ndx & 0x7fff) : *high;
            aux = at + def->vd_aux, next = def->vd_next;
        } else {
            const ElfW(Verneed) *need = (const ElfW(Verneed) *)(elf->image + at);
            size_t k;
            if (need->vn_file >= elf->strings_size)
                return qmpi_why(why, QMPI_DAMAGED "a name of its %s lies outside its string table", what);
            /* The loader asserts it is a library it loaded for this one (or this one). */
            for (k = 0; k < elf->ndynamic; k++)
                if ((elf->dynamic[k].d_tag == DT_NEEDED || elf->dynamic[k].d_tag == DT_SONAME) &&
                    elf->dynamic[k].d_un.d_val < elf->strings_size &&
                    strcmp(elf->strings + elf->dynamic[k].d_un.d_val, elf->strings + need->vn_file) == 0)
                    break;
            if (k == elf->ndynamic)
                return qmpi_why(why, QMPI_DAMAGED "its version requirements name %s, which it does not need",
                                elf->strings + need->vn_file);
            aux = at + need->vn_aux, next = need->vn_next;
        }
        while (1) { /* the loader follows vna_next/vda_next to 0, whatever the count says */
            ElfW(Word) name;
            if (aux % 4 != 0 || aux > end || end - aux < aux_record || budget-- == 0)
                return qmpi_why(why, QMPI_DAMAGED "its %s run out of their segment or are misaligned", what);
            if (definitions) {
                const ElfW(Verdaux) *a = (const ElfW(Verdaux) *)(elf->image + aux);
                name = a->vda_name, aux_next = a->vda_next;
            } else {
                const ElfW(Vernaux) *a = (const ElfW(Vernaux) *)(elf->image + aux);
                name = a->vna_name, aux_next = a->vna_next;
                *high = (a->vna_other & 0x7fff) > *high ? (a->vna_other & 0x7fff) : *high;
            }
            if (name >= elf->strings_size)
                return qmpi_why(why, QMPI_DAMAGED "a name of its %s lies outside its string table", what);
            if (aux_next == 0)
                break;
            aux += aux_next;
        }
        if (next == 0)
            return 0;
        at += next;
    }
}

#if defined(__x86_64__)
#define QMPI_R_IRELATIVE R_X86_64_IRELATIVE
#define QMPI_R_RELATIVE R_X86_64_RELATIVE
#elif defined(__aarch64__)
#define QMPI_R_IRELATIVE R_AARCH64_IRELATIVE
#define QMPI_R_RELATIVE R_AARCH64_RELATIVE
#elif defined(__powerpc64__)
#define QMPI_R_IRELATIVE R_PPC64_IRELATIVE
#define QMPI_R_RELATIVE R_PPC64_RELATIVE
#endif

/* The initializer and finalizer arrays (DT_INIT_ARRAY, DT_FINI_ARRAY, DT_PREINIT_ARRAY):
 * the loader calls every slot once relocated. */
struct qmpi_calls {
    ElfW(Addr) start[3];
    ElfW(Xword) size[3];
    ElfW(Xword) relative; /* DT_RELACOUNT */
};

static int qmpi_in_calls(const struct qmpi_calls *calls, ElfW(Addr) where)
{
    int k;
    for (k = 0; k < 3; k++)
        if (where >= calls->start[k] && where - calls->start[k] < calls->size[k])
            return 1;
    return 0;
}

/* Where the loader writes for a relocation: inside a writable segment (any loadable
 * one with DT_TEXTREL), never outside what it mapped. */
static int qmpi_elf_target(const struct qmpi_elf *elf, ElfW(Addr) where, int textrel)
{
    return qmpi_elf_mapped(elf, where, sizeof(ElfW(Addr)), textrel ? 0 : PF_W);
}

/* The relocation table at dynamic entries (`table`, `size`), of `rela` or REL entries;
 * `symbols`: raised past the highest symbol one names. */
static int qmpi_elf_relocations(const struct qmpi_elf *elf, ElfW(Sxword) table, ElfW(Sxword) size, int rela,
                                int textrel, const struct qmpi_calls *calls, size_t *symbols, char *why)
{
    size_t entry = rela ? sizeof(ElfW(Rela)) : sizeof(ElfW(Rel)), offset, i, count;
    ElfW(Xword) vaddr = 0, bytes = 0;

    if (!qmpi_dyn(elf, table, &vaddr))
        return 0;
    if (!qmpi_dyn(elf, size, &bytes) || bytes % entry != 0)
        return qmpi_why(why, QMPI_DAMAGED "the size of its relocation table (tag %ld) is %lu", (long)table,
                        (unsigned long)bytes);
    count = bytes / entry;
    offset = qmpi_elf_table(elf, vaddr, count, entry, sizeof(ElfW(Addr)), NULL);
    if (offset == (size_t)-1)
        return qmpi_why(why, QMPI_DAMAGED "its relocation table (tag %ld) lies outside its loadable segments",
                        (long)table);
    for (i = 0; i < count; i++) {
        const ElfW(Rela) *r = (const ElfW(Rela) *)(elf->image + offset + i * entry); /* REL: no r_addend read */
        size_t symbol = ELF64_R_SYM(r->r_info), type = ELF64_R_TYPE(r->r_info);
#ifdef QMPI_R_RELATIVE
        /* DT_RELACOUNT: the loader applies that many first entries as relative ones (it asserts). */
        if (rela && table == DT_RELA && type != QMPI_R_RELATIVE && calls->relative > i)
            return qmpi_why(why, QMPI_DAMAGED "relocation %zu is not relative, but DT_RELACOUNT says it is", i);
#endif
        if (type == 0) /* R_*_NONE */
            continue;
        if (!qmpi_elf_target(elf, r->r_offset, textrel))
            return qmpi_why(why, QMPI_DAMAGED "relocation %zu (tag %ld) writes at 0x%lx, outside its writable segments",
                            i, (long)table, (unsigned long)r->r_offset);
        *symbols = symbol >= *symbols ? symbol + 1 : *symbols;
#ifdef QMPI_R_IRELATIVE
        if (rela && type == QMPI_R_IRELATIVE && !qmpi_elf_mapped(elf, (ElfW(Addr))r->r_addend, 1, PF_X))
            return qmpi_why(why, QMPI_DAMAGED "relocation %zu calls a resolver outside its code", i);
        if (rela && type == QMPI_R_RELATIVE && qmpi_in_calls(calls, r->r_offset) &&
            !qmpi_elf_mapped(elf, (ElfW(Addr))r->r_addend, 1, PF_X))
            return qmpi_why(why, QMPI_DAMAGED "relocation %zu makes an initializer or finalizer point outside its code",
                            i);
#endif
    }
    return 0;
}

/* DT_RELR: addresses, then bitmaps of the next 63 words, each one a relative relocation. */
static int qmpi_elf_relr(const struct qmpi_elf *elf, int textrel, char *why)
{
    ElfW(Xword) vaddr = 0, bytes = 0, value = 0;
    size_t offset, count, i;
    ElfW(Addr) where = 0;
    int started = 0, bit;

    if (!qmpi_dyn(elf, 36 /* DT_RELR */, &vaddr))
        return 0;
    if (!qmpi_dyn(elf, 35 /* DT_RELRSZ */, &bytes) || bytes % sizeof(ElfW(Addr)) != 0 ||
        (qmpi_dyn(elf, 37 /* DT_RELRENT */, &value) && value != sizeof(ElfW(Addr))))
        return qmpi_why(why, QMPI_DAMAGED "its relative relocations (DT_RELR) have a wrong size");
    count = bytes / sizeof(ElfW(Addr));
    offset = qmpi_elf_table(elf, vaddr, count, sizeof(ElfW(Addr)), sizeof(ElfW(Addr)), NULL);
    if (offset == (size_t)-1)
        return qmpi_why(why, QMPI_DAMAGED "its relative relocations (DT_RELR) lie outside its loadable segments");
    for (i = 0; i < count; i++) {
        ElfW(Addr) e = ((const ElfW(Addr) *)(elf->image + offset))[i];
        if ((e & 1) == 0) {
            if (!qmpi_elf_target(elf, e, textrel))
                return qmpi_why(why, QMPI_DAMAGED "a relative relocation writes outside its writable segments");
            where = e + sizeof(ElfW(Addr));
            started = 1;
            continue;
        }
        if (!started)
            return qmpi_why(why, QMPI_DAMAGED "its relative relocations (DT_RELR) start with a bitmap");
        for (bit = 1; bit < 8 * (int)sizeof(ElfW(Addr)); bit++)
            if (((e >> bit) & 1) && !qmpi_elf_target(elf, where + (ElfW(Addr))(bit - 1) * sizeof(ElfW(Addr)), textrel))
                return qmpi_why(why, QMPI_DAMAGED "a relative relocation writes outside its writable segments");
        where += (8 * sizeof(ElfW(Addr)) - 1) * sizeof(ElfW(Addr));
    }
    return 0;
}

/* What the loader reads through the dynamic section, checked before it does: the string,
 * symbol, hash and version tables, every relocation's target and symbol, the
 * initializers. A corrupted entry would crash inside dlopen; here it is one line. */
static int qmpi_elf_dynamic(struct qmpi_elf *elf, char *why)
{
    static const ElfW(Sxword) names[] = {DT_NEEDED, DT_SONAME, DT_RPATH, DT_RUNPATH, DT_AUXILIARY, DT_FILTER};
    static const struct {
        ElfW(Sxword) tag, size;
        ElfW(Word) flags;
    } ranges[] = {{DT_INIT, 0, PF_X},
                  {DT_FINI, 0, PF_X},
                  {DT_INIT_ARRAY, DT_INIT_ARRAYSZ, PF_W},
                  {DT_FINI_ARRAY, DT_FINI_ARRAYSZ, PF_W},
                  {DT_PREINIT_ARRAY, DT_PREINIT_ARRAYSZ, PF_W}};
    ElfW(Xword) strtab = 0, strsz = 0, symtab = 0, value = 0, flags = 0, vaddr = 0;
    struct qmpi_calls calls = {{0}, {0}, 0};
    unsigned high = 1;
    size_t offset, i, k;
    int textrel;

    if (!qmpi_dyn(elf, DT_STRTAB, &strtab) || !qmpi_dyn(elf, DT_STRSZ, &strsz) || strsz == 0 ||
        (offset = qmpi_elf_offset(elf, strtab, strsz, NULL)) == (size_t)-1 || elf->image[offset + strsz - 1] != '\0')
        return qmpi_why(why, QMPI_DAMAGED "its dynamic string table (DT_STRTAB, DT_STRSZ) is missing, lies outside "
                                          "its loadable segments or does not end");
    elf->strings = (const char *)elf->image + offset;
    elf->strings_offset = offset;
    elf->strings_size = strsz;
    for (i = 0; i < elf->ndynamic; i++)
        for (k = 0; k < sizeof names / sizeof *names; k++)
            if (elf->dynamic[i].d_tag == names[k] && elf->dynamic[i].d_un.d_val >= strsz)
                return qmpi_why(why, QMPI_DAMAGED "dynamic entry %zu names a string outside its string table", i);

    if (!qmpi_dyn(elf, DT_SYMTAB, &symtab) || (qmpi_dyn(elf, DT_SYMENT, &value) && value != sizeof(ElfW(Sym))))
        return qmpi_why(why, QMPI_DAMAGED "its dynamic symbol table (DT_SYMTAB, DT_SYMENT) is missing or of a "
                                          "wrong entry size");
    if (qmpi_elf_count_symbols(elf, why) != 0)
        return QMPI_REFUSED;
    /* A GNU hash table counts the defined symbols only: the undefined ones past them
     * count as far as a relocation names them. */
    (void)qmpi_dyn(elf, DT_FLAGS, &flags);
    textrel = qmpi_dyn(elf, DT_TEXTREL, &value) || (flags & DF_TEXTREL);
    if ((qmpi_dyn(elf, DT_RELAENT, &value) && value != sizeof(ElfW(Rela))) ||
        (qmpi_dyn(elf, DT_RELENT, &value) && value != sizeof(ElfW(Rel))) ||
        (qmpi_dyn(elf, DT_JMPREL, &vaddr) &&
         (!qmpi_dyn(elf, DT_PLTREL, &value) || (value != DT_RELA && value != DT_REL))))
        return qmpi_why(why, QMPI_DAMAGED "its relocation entry sizes or kinds (DT_RELAENT, DT_RELENT, DT_PLTREL) "
                                          "are wrong");
    {
        static const ElfW(Sxword) arrays[3][2] = {
            {DT_INIT_ARRAY, DT_INIT_ARRAYSZ}, {DT_FINI_ARRAY, DT_FINI_ARRAYSZ}, {DT_PREINIT_ARRAY, DT_PREINIT_ARRAYSZ}};
        for (k = 0; k < 3; k++)
            if (!qmpi_dyn(elf, arrays[k][0], &calls.start[k]) || !qmpi_dyn(elf, arrays[k][1], &calls.size[k]))
                calls.size[k] = 0;
        if (qmpi_dyn(elf, 0x6ffffff9 /* DT_RELACOUNT */, &calls.relative) &&
            (!qmpi_dyn(elf, DT_RELASZ, &value) || calls.relative > value / sizeof(ElfW(Rela))))
            return qmpi_why(why, QMPI_DAMAGED "DT_RELACOUNT counts more relocations than DT_RELA holds");
    }
#ifdef QMPI_ELF_MACHINE /* RELA machines: the loader asserts there is no DT_REL, DT_PLTREL is DT_RELA */
    if (qmpi_dyn(elf, DT_REL, &value) || (qmpi_dyn(elf, DT_PLTREL, &value) && value != DT_RELA))
        return qmpi_why(why, QMPI_DAMAGED "it has REL relocations, which this machine does not use");
#endif
    if (qmpi_elf_relocations(elf, DT_RELA, DT_RELASZ, 1, textrel, &calls, &elf->nsymbols, why) != 0 ||
        qmpi_elf_relocations(elf, DT_REL, DT_RELSZ, 0, textrel, &calls, &elf->nsymbols, why) != 0 ||
        (qmpi_dyn(elf, DT_PLTREL, &value) && qmpi_elf_relocations(elf, DT_JMPREL, DT_PLTRELSZ, value == DT_RELA,
                                                                  textrel, &calls, &elf->nsymbols, why) != 0) ||
        qmpi_elf_relr(elf, textrel, why) != 0)
        return QMPI_REFUSED;

    offset = qmpi_elf_table(elf, symtab, elf->nsymbols, sizeof(ElfW(Sym)), sizeof(ElfW(Addr)), NULL);
    if (offset == (size_t)-1)
        return qmpi_why(why, QMPI_DAMAGED "its dynamic symbol table (%zu symbols) lies outside its loadable segments",
                        elf->nsymbols);
    elf->symbols = (const ElfW(Sym) *)(elf->image + offset);
    for (i = 0; i < elf->nsymbols; i++) {
        const ElfW(Sym) *s = &elf->symbols[i];
        if (s->st_name >= strsz)
            return qmpi_why(why, QMPI_DAMAGED "the name of symbol %zu lies outside its string table", i);
        /* The loader calls an IFUNC's resolver when it binds it. */
        if (ELF64_ST_TYPE(s->st_info) == STT_GNU_IFUNC && s->st_shndx != SHN_UNDEF &&
            !qmpi_elf_mapped(elf, s->st_value, 1, PF_X))
            return qmpi_why(why, QMPI_DAMAGED "the resolver of symbol %zu lies outside its code", i);
    }

    if (qmpi_dyn(elf, DT_VERNEED, &vaddr)) {
        elf->verneed = qmpi_elf_table(elf, vaddr, 1, sizeof(ElfW(Verneed)), 4, &elf->verneed_end);
        if (elf->verneed == (size_t)-1 || elf->verneed == 0)
            return qmpi_why(why,
                            QMPI_DAMAGED "its version requirements (DT_VERNEED) lie outside its loadable segments");
        if (qmpi_elf_versions(elf, 0, &high, why) != 0)
            return QMPI_REFUSED;
    }
    if (qmpi_dyn(elf, DT_VERDEF, &vaddr)) {
        elf->verdef = qmpi_elf_table(elf, vaddr, 1, sizeof(ElfW(Verdef)), 4, &elf->verdef_end);
        if (elf->verdef == (size_t)-1 || elf->verdef == 0)
            return qmpi_why(why, QMPI_DAMAGED "its version definitions (DT_VERDEF) lie outside its loadable segments");
        if (qmpi_elf_versions(elf, 1, &high, why) != 0)
            return QMPI_REFUSED;
    }
    if (qmpi_dyn(elf, DT_VERSYM, &vaddr)) { /* the loader indexes its version array with these */
        offset = qmpi_elf_table(elf, vaddr, elf->nsymbols, sizeof(ElfW(Half)), sizeof(ElfW(Half)), NULL);
        if (offset == (size_t)-1)
            return qmpi_why(why, QMPI_DAMAGED "its symbol versions (DT_VERSYM) lie outside its loadable segments");
        for (i = 0; i < elf->nsymbols; i++)
            if ((((const ElfW(Half) *)(elf->image + offset))[i] & 0x7fff) > high)
                return qmpi_why(why, QMPI_DAMAGED "symbol %zu has version %u, which it neither needs nor defines", i,
                                ((const ElfW(Half) *)(elf->image + offset))[i] & 0x7fff);
    }

    for (i = 0; i < sizeof ranges / sizeof *ranges; i++) {
        ElfW(Xword) bytes = 1;
        if (!qmpi_dyn(elf, ranges[i].tag, &vaddr))
            continue;
        if (ranges[i].size != 0 && (!qmpi_dyn(elf, ranges[i].size, &bytes) || bytes % sizeof(ElfW(Addr)) != 0))
            return qmpi_why(why, QMPI_DAMAGED "the size of its initializers or finalizers (tag %ld) is wrong",
                            (long)ranges[i].tag);
        /* Arrays of addresses are relocated, so written: in a writable segment. */
        if (bytes != 0 && !qmpi_elf_mapped(elf, vaddr, bytes, textrel && ranges[i].flags == PF_W ? 0 : ranges[i].flags))
            return qmpi_why(why, QMPI_DAMAGED "its initializers or finalizers (tag %ld) lie outside its segments",
                            (long)ranges[i].tag);
    }
    return 0;
}

#ifndef PT_GNU_PROPERTY
#define PT_GNU_PROPERTY 0x6474e553
#endif

/* Maps `file` and checks it is a shared object for this machine, whole (every header
 * and segment inside the file) and sound where the loader trusts it (qmpi_elf_dynamic);
 * finds its dynamic tables from the program headers. Called for every tool file before
 * any dlopen of it: QMPI_REFUSED and `why`, or QMPI_NOT_PMPI (a file it cannot open, or
 * one without a dynamic section: dlopen says why). */
QMPI_HIDDEN int qmpi_elf_open(const char *file, struct qmpi_elf *elf, char *why)
{
    const ElfW(Phdr) *dynamic = NULL;
    ElfW(Addr) last = 0;
    ElfW(Xword) value = 0;
    struct stat st;
    size_t i, loads = 0, offset;
    unsigned char start[SELFMAG];
    ssize_t got;

    memset(elf, 0, sizeof *elf);
    /* O_NONBLOCK: a FIFO must not block the job in open(); only a regular file is read. */
    elf->fd = open(file, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (elf->fd < 0)
        return QMPI_NOT_PMPI; /* dlopen says why, as for any tool */
    if (fstat(elf->fd, &st) != 0 || !S_ISREG(st.st_mode))
        return qmpi_why(why, "cannot load: not a regular file");
    elf->size = (size_t)st.st_size;
    if (elf->size < sizeof(ElfW(Ehdr))) {
        got = pread(elf->fd, start, elf->size < SELFMAG ? elf->size : SELFMAG, 0);
        if (got < 0 || memcmp(start, ELFMAG, (size_t)got) != 0 || elf->size == 0)
            return qmpi_why(why, elf->size == 0 ? "cannot load: file is truncated: it is empty"
                                                : "cannot load: not an ELF file");
        return qmpi_elf_truncated(elf, why, "its ELF header", 0, sizeof(ElfW(Ehdr)));
    }
    elf->image = mmap(NULL, elf->size, PROT_READ, MAP_PRIVATE, elf->fd, 0);
    if (elf->image == MAP_FAILED) {
        elf->image = NULL;
        return qmpi_why(why, "cannot load: cannot map it: %s", strerror(errno));
    }
    elf->header = (const ElfW(Ehdr) *)elf->image;
    if (memcmp(elf->header->e_ident, ELFMAG, SELFMAG) != 0)
        return qmpi_why(why, "cannot load: not an ELF file");
    if (elf->header->e_ident[EI_CLASS] != (sizeof(void *) == 8 ? ELFCLASS64 : ELFCLASS32) ||
        elf->header->e_ident[EI_DATA] != (__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__ ? ELFDATA2LSB : ELFDATA2MSB)
#ifdef QMPI_ELF_MACHINE
        || elf->header->e_machine != QMPI_ELF_MACHINE
#endif
    )
        return qmpi_why(why, "cannot load: built for another architecture (ELF class %d, machine %d)",
                        elf->header->e_ident[EI_CLASS], elf->header->e_machine);
    if (elf->header->e_type == ET_REL)
        return qmpi_why(why, "cannot load: an object file, not a shared object: link it with -shared");
    if (elf->header->e_type != ET_DYN)
        return qmpi_why(why, "cannot load: an executable, not a shared object: link it with -shared");

    if (elf->header->e_phentsize != sizeof(ElfW(Phdr)) || elf->header->e_phnum == 0 ||
        elf->header->e_phnum == PN_XNUM || !QMPI_ELF_ALIGNED(elf->header->e_phoff, ElfW(Phdr)))
        return qmpi_why(why, QMPI_DAMAGED "its program headers (%u of %u bytes at %zu) are not ELF program headers",
                        elf->header->e_phnum, elf->header->e_phentsize, (size_t)elf->header->e_phoff);
    if (!qmpi_elf_within(elf, elf->header->e_phoff, (size_t)elf->header->e_phnum * sizeof(ElfW(Phdr))))
        return qmpi_elf_truncated(elf, why, "its program headers", elf->header->e_phoff,
                                  (size_t)elf->header->e_phnum * sizeof(ElfW(Phdr)));
    elf->segments = (const ElfW(Phdr) *)(elf->image + elf->header->e_phoff);
    elf->nsegments = elf->header->e_phnum;
    for (i = 0; i < elf->nsegments; i++) {
        const ElfW(Phdr) *p = &elf->segments[i];
        char what[32];
        snprintf(what, sizeof what, "segment %zu", i);
        if (p->p_filesz != 0 && !qmpi_elf_within(elf, p->p_offset, p->p_filesz))
            return qmpi_elf_truncated(elf, why, what, p->p_offset, p->p_filesz);
        if (p->p_type == PT_LOAD) {
            if (p->p_filesz > p->p_memsz || (p->p_align & (p->p_align - 1)) != 0 ||
                (p->p_align > 1 && (p->p_offset - p->p_vaddr) % p->p_align != 0) ||
                p->p_vaddr > UINTPTR_MAX - p->p_memsz || (loads > 0 && p->p_vaddr < last))
                return qmpi_why(why, QMPI_DAMAGED "its loadable segment %zu has impossible addresses or sizes", i);
            last = p->p_vaddr + p->p_memsz;
            loads++;
        } else if (p->p_type == PT_DYNAMIC) {
            if (dynamic != NULL) /* the loader would take the last, this reader the first */
                return qmpi_why(why, QMPI_DAMAGED "it has two dynamic segments");
            dynamic = p;
        }
    }
    if (loads == 0)
        return qmpi_why(why, QMPI_DAMAGED "it has no loadable segment");
    /* The section headers: the loader does not read them, but their absence past the
     * end of the file is the mark of a file cut short. */
    if (elf->header->e_shoff != 0 &&
        !qmpi_elf_within(elf, elf->header->e_shoff,
                         (size_t)(elf->header->e_shnum ? elf->header->e_shnum : 1) * elf->header->e_shentsize))
        return qmpi_elf_truncated(elf, why, "its section headers", elf->header->e_shoff,
                                  (size_t)(elf->header->e_shnum ? elf->header->e_shnum : 1) * elf->header->e_shentsize);
    /* Segments the loader (or the unwinder, through dl_iterate_phdr) reads in memory. */
    for (i = 0; i < elf->nsegments; i++) {
        const ElfW(Phdr) *p = &elf->segments[i];
        if ((p->p_type == PT_DYNAMIC || p->p_type == PT_NOTE || p->p_type == PT_PHDR || p->p_type == PT_TLS ||
             p->p_type == PT_GNU_EH_FRAME || p->p_type == PT_GNU_PROPERTY) &&
            p->p_filesz != 0 && !qmpi_elf_mapped(elf, p->p_vaddr, p->p_filesz, PF_R))
            return qmpi_why(why, QMPI_DAMAGED "its segment %zu (type 0x%x) lies outside its loadable segments", i,
                            (unsigned)p->p_type);
    }
    /* After relocating, the loader makes the RELRO pages read-only (its end rounded down
     * to a page): outside the segment, that would be another mapping's pages. */
    for (i = 0; i < elf->nsegments; i++) {
        const ElfW(Phdr) *p = &elf->segments[i];
        size_t k, page = (size_t)sysconf(_SC_PAGESIZE);
        int inside = p->p_type != PT_GNU_RELRO || p->p_memsz == 0;
        for (k = 0; k < elf->nsegments && !inside; k++) {
            const ElfW(Phdr) *q = &elf->segments[k];
            inside = q->p_type == PT_LOAD && p->p_vaddr >= q->p_vaddr && p->p_vaddr <= UINTPTR_MAX - p->p_memsz &&
                     (p->p_vaddr + p->p_memsz) / page * page <= (q->p_vaddr + q->p_memsz + page - 1) / page * page;
        }
        if (!inside)
            return qmpi_why(why,
                            QMPI_DAMAGED "its read-only-after-relocation segment %zu lies outside its loadable "
                                         "segments",
                            i);
    }
    if (dynamic == NULL)
        return QMPI_NOT_PMPI; /* dlopen: "object file has no dynamic section" */
    offset = qmpi_elf_table(elf, dynamic->p_vaddr, 1, dynamic->p_filesz, _Alignof(ElfW(Dyn)), NULL);
    if (offset == (size_t)-1 || dynamic->p_filesz < sizeof(ElfW(Dyn)))
        return qmpi_why(why, QMPI_DAMAGED "its dynamic section lies outside its loadable segments or is misaligned");
    elf->dynamic = (const ElfW(Dyn) *)(elf->image + offset);
    for (i = 0; i < dynamic->p_filesz / sizeof(ElfW(Dyn)) && elf->dynamic[i].d_tag != DT_NULL; i++)
        ;
    if (i == dynamic->p_filesz / sizeof(ElfW(Dyn)))
        return qmpi_why(why, QMPI_DAMAGED "its dynamic section has no end (DT_NULL)");
    elf->ndynamic = i;
    if (qmpi_dyn(elf, DT_FLAGS_1, &value) && (value & DF_1_PIE))
        return qmpi_why(why, "cannot load: a position-independent executable, not a shared object");
    if (qmpi_elf_dynamic(elf, why) != 0)
        return QMPI_REFUSED;
    return QMPI_NOT_PMPI;
}

/* A PMPI tool: it defines an MPI_X of the enumeration, no get_interceptions, is not an
 * MPI library (QMPI_MPI_LIBRARY_PMPI: a tool may define a few PMPI_X, as Darshan and
 * Recorder do) and is not this core. Anything else goes the thesis-style way. */
QMPI_HIDDEN int qmpi_elf_kind(const struct qmpi_elf *elf, char *why)
{
    int mpi = 0, core = 0;
    size_t i, pmpi = 0;

    for (i = 1; i < elf->nsymbols; i++) {
        const char *name = qmpi_elf_string(elf, elf->symbols[i].st_name);
        if (name == NULL || !qmpi_elf_defines(&elf->symbols[i]))
            continue;
        if (strcmp(name, "get_interceptions") == 0)
            return QMPI_NOT_PMPI;
        mpi |= strncmp(name, "MPI_", 4) == 0 && qmpi_function_index(name) >= 0;
        pmpi += qmpi_is_c_pmpi(name);
        core |= strcmp(name, "QMPI_Get_calling_address") == 0;
    }
    if (mpi && pmpi >= QMPI_MPI_LIBRARY_PMPI)
        return qmpi_why(why, "cannot load: an MPI library (it defines %zu PMPI_ functions), not a tool", pmpi);
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
