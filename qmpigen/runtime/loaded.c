/* loaded.c: objects the dynamic linker has loaded, read in memory the way it reads them
 * (their dynamic symbols, strings and relocations, found from the program headers and
 * bounded by their loaded segments), and re-pointing an object's bound references to a
 * symbol (its GOT slots and data words) once the dynamic linker has relocated it. The
 * core uses this for the tools it shares the process with (neighbours.c) and for PMPI
 * tools' private copies (pmpi_load.c). Needs no MPI. */
#define _GNU_SOURCE
#include "qmpi_runtime.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

/* The relocation types that hold a symbol's address in a word: a PLT slot, a GOT slot,
 * and an absolute address (S + A) in data. Other types against a symbol the core
 * re-points (a text relocation) cannot be changed after loading. */
#if defined(__x86_64__)
#define QMPI_R_JUMP_SLOT R_X86_64_JUMP_SLOT
#define QMPI_R_GLOB_DAT R_X86_64_GLOB_DAT
#define QMPI_R_ABS64 R_X86_64_64
#elif defined(__aarch64__)
#define QMPI_R_JUMP_SLOT R_AARCH64_JUMP_SLOT
#define QMPI_R_GLOB_DAT R_AARCH64_GLOB_DAT
#define QMPI_R_ABS64 R_AARCH64_ABS64
#elif defined(__powerpc64__) && defined(_CALL_ELF) && _CALL_ELF == 2
#define QMPI_R_JUMP_SLOT R_PPC64_JMP_SLOT
#define QMPI_R_GLOB_DAT R_PPC64_GLOB_DAT
#define QMPI_R_ABS64 R_PPC64_ADDR64
#endif

/* Is [address, address + length) inside one of the object's loaded segments with all of
 * `flags` (PF_R, PF_W)? */
static int qmpi_loaded_inside(const struct qmpi_object *object, uintptr_t address, size_t length, ElfW(Word) flags)
{
    size_t k;

    for (k = 0; k < object->nsegments; k++) {
        const ElfW(Phdr) *p = &object->segments[k];
        uintptr_t start = object->base + p->p_vaddr;
        if (p->p_type == PT_LOAD && (p->p_flags & flags) == flags && address >= start &&
            address - start <= p->p_memsz && length <= p->p_memsz - (address - start))
            return 1;
    }
    return 0;
}

/* A dynamic entry's address: relocated in place by the dynamic linker on most
 * machines, left as a virtual address where the dynamic section is read-only. */
static const void *qmpi_loaded_pointer(const struct qmpi_object *object, ElfW(Addr) value, size_t length)
{
    if (qmpi_loaded_inside(object, value, length, PF_R))
        return (const void *)value;
    if (value <= UINTPTR_MAX - object->base && qmpi_loaded_inside(object, object->base + value, length, PF_R))
        return (const void *)(object->base + value);
    return NULL;
}

static int qmpi_loaded_tag(const struct qmpi_object *object, ElfW(Sxword) tag, ElfW(Xword) * value)
{
    size_t i;

    for (i = 0; i < object->ndynamic; i++)
        if (object->dynamic[i].d_tag == tag) {
            *value = object->dynamic[i].d_un.d_val;
            return 1;
        }
    return 0;
}

/* The number of dynamic symbols: DT_HASH's chain count, else one past the last symbol
 * DT_GNU_HASH's chains reach. 0 if neither table can be read. */
static size_t qmpi_loaded_symbol_count(const struct qmpi_object *object)
{
    const uint32_t *words, *buckets, *chains;
    ElfW(Xword) value;
    uint32_t nbuckets, first, nbloom, last = 0, k;

    if (qmpi_loaded_tag(object, DT_HASH, &value) &&
        (words = (const uint32_t *)qmpi_loaded_pointer(object, value, 2 * sizeof(uint32_t))) != NULL)
        return words[1];
    if (!qmpi_loaded_tag(object, DT_GNU_HASH, &value) ||
        (words = (const uint32_t *)qmpi_loaded_pointer(object, value, 4 * sizeof(uint32_t))) == NULL)
        return 0;
    nbuckets = words[0], first = words[1], nbloom = words[2];
    buckets = (const uint32_t *)((const ElfW(Addr) *)(words + 4) + nbloom);
    if (!qmpi_loaded_inside(object, (uintptr_t)buckets, (size_t)nbuckets * sizeof(uint32_t), PF_R))
        return 0;
    for (k = 0; k < nbuckets; k++)
        last = buckets[k] > last ? buckets[k] : last;
    if (last < first)
        return first;
    chains = buckets + nbuckets;
    for (;; last++) { /* the last bucket's chain ends with the last symbol */
        if (!qmpi_loaded_inside(object, (uintptr_t)&chains[last - first], sizeof(uint32_t), PF_R))
            return 0;
        if (chains[last - first] & 1)
            return (size_t)last + 1;
    }
}

QMPI_HIDDEN int qmpi_loaded_read(const struct dl_phdr_info *info, struct qmpi_object *object)
{
    const ElfW(Phdr) *dynamic = NULL;
    ElfW(Xword) value = 0, size = 0, entry = 0;
    size_t k, n;

    memset(object, 0, sizeof *object);
    object->name = info->dlpi_name != NULL ? info->dlpi_name : "";
    object->base = info->dlpi_addr;
    object->segments = info->dlpi_phdr;
    object->nsegments = info->dlpi_phnum;
    object->low = UINTPTR_MAX;
    for (k = 0; k < object->nsegments; k++) {
        const ElfW(Phdr) *p = &object->segments[k];
        if (p->p_type == PT_LOAD) {
            uintptr_t start = object->base + p->p_vaddr;
            object->low = start < object->low ? start : object->low;
            object->high = start + p->p_memsz > object->high ? start + p->p_memsz : object->high;
        } else if (p->p_type == PT_DYNAMIC) {
            dynamic = p;
        } else if (p->p_type == PT_GNU_RELRO) {
            object->relro_low = object->base + p->p_vaddr;
            object->relro_high = object->relro_low + p->p_memsz;
        }
    }
    if (dynamic == NULL || !qmpi_loaded_inside(object, object->base + dynamic->p_vaddr, dynamic->p_memsz, PF_R))
        return -1; /* the vdso's is readable too; a static program has none */
    object->dynamic = (const ElfW(Dyn) *)(object->base + dynamic->p_vaddr);
    for (n = dynamic->p_memsz / sizeof(ElfW(Dyn)), k = 0; k < n && object->dynamic[k].d_tag != DT_NULL; k++)
        ;
    object->ndynamic = k;
    if (!qmpi_loaded_tag(object, DT_STRTAB, &value) || !qmpi_loaded_tag(object, DT_STRSZ, &size) ||
        (object->strings = (const char *)qmpi_loaded_pointer(object, value, size)) == NULL)
        return -1;
    object->strings_size = size;
    object->nsymbols = qmpi_loaded_symbol_count(object);
    if (!qmpi_loaded_tag(object, DT_SYMTAB, &value) || object->nsymbols > SIZE_MAX / sizeof(ElfW(Sym)) ||
        (object->symbols = (const ElfW(Sym) *)qmpi_loaded_pointer(object, value,
                                                                  object->nsymbols * sizeof(ElfW(Sym)))) == NULL)
        object->nsymbols = 0;
    /* Relocations with an addend: the only kind on the machines PMPI tools load on. */
    if (qmpi_loaded_tag(object, DT_RELA, &value) && qmpi_loaded_tag(object, DT_RELASZ, &size) &&
        (!qmpi_loaded_tag(object, DT_RELAENT, &entry) || entry == sizeof(ElfW(Rela))) &&
        (object->relocations[0] = (const ElfW(Rela) *)qmpi_loaded_pointer(object, value, size)) != NULL)
        object->nrelocations[0] = size / sizeof(ElfW(Rela));
    if (qmpi_loaded_tag(object, DT_JMPREL, &value) && qmpi_loaded_tag(object, DT_PLTRELSZ, &size) &&
        qmpi_loaded_tag(object, DT_PLTREL, &entry) && entry == DT_RELA &&
        (object->relocations[1] = (const ElfW(Rela) *)qmpi_loaded_pointer(object, value, size)) != NULL)
        object->nrelocations[1] = size / sizeof(ElfW(Rela));
    return 0;
}

QMPI_HIDDEN const char *qmpi_loaded_name(const struct qmpi_object *object, size_t index)
{
    size_t offset;

    if (index >= object->nsymbols)
        return NULL;
    offset = object->symbols[index].st_name;
    return offset < object->strings_size && memchr(object->strings + offset, 0, object->strings_size - offset)
               ? object->strings + offset
               : NULL;
}

/* The address of the function or object `name` the object itself defines, or NULL (an
 * indirect function's is its resolver's answer, which only dlsym gives). */
QMPI_HIDDEN void *qmpi_loaded_lookup(const struct qmpi_object *object, const char *name)
{
    size_t i;

    for (i = 1; i < object->nsymbols; i++) {
        const ElfW(Sym) *symbol = &object->symbols[i];
        const char *found = qmpi_loaded_name(object, i);
        if (found != NULL && qmpi_elf_defines(symbol) && ELF64_ST_TYPE(symbol->st_info) != STT_GNU_IFUNC &&
            symbol->st_shndx != SHN_ABS && strcmp(found, name) == 0)
            return (void *)(object->base + symbol->st_value);
    }
    return NULL;
}

QMPI_HIDDEN size_t qmpi_loaded_count(const struct qmpi_object *object, int (*wanted)(const char *name))
{
    size_t i, count = 0;

    for (i = 1; i < object->nsymbols; i++) {
        const char *name = qmpi_loaded_name(object, i);
        count += name != NULL && qmpi_elf_defines(&object->symbols[i]) && wanted(name);
    }
    return count;
}

/* Writes `value` into the word at `where`, making a read-only-after-relocation page
 * writable for the time of the write. 0, or -1 with the reason in `why`. */
static int qmpi_loaded_store(const struct qmpi_object *object, uintptr_t where, uintptr_t value, char *why)
{
    uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE), first = where / page * page;
    int relro = where >= object->relro_low && where < object->relro_high;

    if (where % sizeof(void *) != 0 || !qmpi_loaded_inside(object, where, sizeof(void *), PF_W))
        return qmpi_why(why, "a relocation at 0x%lx outside its writable data", (unsigned long)(where - object->base));
    if (relro && mprotect((void *)first, page, PROT_READ | PROT_WRITE) != 0)
        return qmpi_why(why, "cannot make its relocated data writable (mprotect)");
    __atomic_store_n((uintptr_t *)where, value, __ATOMIC_RELEASE);
    if (relro && mprotect((void *)first, page, PROT_READ) != 0)
        return qmpi_why(why, "cannot make its relocated data read-only again (mprotect)");
    return 0;
}

QMPI_HIDDEN int qmpi_loaded_rebind(const struct qmpi_object *object, qmpi_rebind_fn target, void *data, char *why)
{
    size_t table, i;

#ifndef QMPI_R_JUMP_SLOT
    (void)object, (void)target, (void)data;
    return qmpi_why(why, "re-pointing a library's references is supported on x86-64, AArch64 and ppc64le only");
#else
    for (table = 0; table < 2; table++)
        for (i = 0; i < object->nrelocations[table]; i++) {
            const ElfW(Rela) *r = &object->relocations[table][i];
            size_t symbol = ELF64_R_SYM(r->r_info), type = ELF64_R_TYPE(r->r_info);
            const char *name = symbol != 0 ? qmpi_loaded_name(object, symbol) : NULL;
            void *address = name != NULL ? target(name, &object->symbols[symbol], data) : NULL;
            if (address == NULL)
                continue;
            if (type != QMPI_R_JUMP_SLOT && type != QMPI_R_GLOB_DAT && type != QMPI_R_ABS64)
                return qmpi_why(why, "it refers to %s with relocation type %zu, which cannot be changed after loading",
                                name, type);
            if (qmpi_loaded_store(object, object->base + r->r_offset,
                                  (uintptr_t)address + (type == QMPI_R_ABS64 ? (uintptr_t)r->r_addend : 0), why) != 0)
                return QMPI_REFUSED;
        }
    return 0;
#endif
}

QMPI_HIDDEN int qmpi_is_c_pmpi(const char *name)
{
    const char *rest = name + 5;

    if (strncmp(name, "PMPI_", 5) != 0 || *rest < 'A' || *rest > 'Z')
        return 0;
    while (*++rest != '\0')
        if (*rest >= 'a' && *rest <= 'z')
            return 1;
    return 0;
}

struct qmpi_loaded_search {
    uintptr_t address;
    struct qmpi_object *object;
    int found;
};

static int qmpi_loaded_search(struct dl_phdr_info *info, size_t size, void *data)
{
    struct qmpi_loaded_search *search = (struct qmpi_loaded_search *)data;
    struct qmpi_object object;

    (void)size;
    if (qmpi_loaded_read(info, &object) != 0 || search->address < object.low || search->address >= object.high)
        return 0;
    *search->object = object;
    search->found = 1;
    return 1;
}

QMPI_HIDDEN int qmpi_loaded_at(const void *address, struct qmpi_object *object)
{
    struct qmpi_loaded_search search = {(uintptr_t)address, object, 0};

    dl_iterate_phdr(qmpi_loaded_search, &search);
    return search.found ? 0 : -1;
}
