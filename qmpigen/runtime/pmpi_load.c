/* pmpi_load.c: unmodified PMPI tools, a private, renamed copy per TOOLS occurrence.
 *
 * A PMPI tool defines MPI_X, calls PMPI_X, keeps its state in globals. For each TOOLS
 * occurrence the core:
 *   1. reads the library's ELF file (<elf.h>) and classifies it: it defines some MPI_X
 *      of the enumeration and no get_interceptions;
 *   2. copies it into a memfd (an unlinked temporary file where memfd is refused): its
 *      own file, so every occurrence gets its own globals. Only what the loader reads
 *      is written (headers, segments' file bytes); the rest stays a hole (elf.c);
 *   3. in the copy's .dynstr, overwrites the first byte of every undefined PMPI_X name
 *      with its slot's letter (PMPI_Send -> YMPI_Send). Only the first byte: linkers
 *      store MPI_Send as the tail of PMPI_Send, so the tool's own definitions stay
 *      intact; GNU hash tables cover defined symbols only, so no hash changes;
 *   4. dlopens /proc/self/fd/N (RTLD_NOW | RTLD_LOCAL) and keeps N open for the life of
 *      the process: a reused N would make dlopen return the first copy again. The
 *      renamed imports bind to the core's continuation entries (qmpi_pmpi.c), the tool's
 *      own MPI_X calls to the entry wrappers (the top of the chain, as under PMPI);
 *   5. takes the copy's MPI_X definitions (load address + st_value: dlsym would fall
 *      through to the MPI for names the tool does not define) as the level's wrappers. */
#define _GNU_SOURCE
#include "qmpi_internal.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

QMPI_HIDDEN int qmpi_warnings;

/* The address range of the core's own loaded segments: a renamed import must resolve
 * in it (dladdr per import would search the core's thousands of symbols each time). */
struct qmpi_range {
    uintptr_t inside, low, high;
};

static int qmpi_find_range(struct dl_phdr_info *info, size_t size, void *data)
{
    struct qmpi_range *range = (struct qmpi_range *)data;
    uintptr_t low = UINTPTR_MAX, high = 0;
    int k;

    (void)size;
    for (k = 0; k < info->dlpi_phnum; k++)
        if (info->dlpi_phdr[k].p_type == PT_LOAD) {
            uintptr_t start = info->dlpi_addr + info->dlpi_phdr[k].p_vaddr;
            low = start < low ? start : low;
            high = start + info->dlpi_phdr[k].p_memsz > high ? start + info->dlpi_phdr[k].p_memsz : high;
        }
    if (range->inside < low || range->inside >= high)
        return 0;
    range->low = low;
    range->high = high;
    return 1;
}

/* Checks what the copy will bind to: the MPI names it needs exist in this process (else
 * it was built for another MPI), and each renamed import finds this core's entry. */
static int qmpi_pmpi_check_imports(const struct qmpi_elf *elf, int slot, size_t *patch, size_t *npatch,
                                   unsigned char *renamed, char *why)
{
    struct qmpi_range core = {(uintptr_t)qmpi_function_index, 0, 0};
    Dl_info found;
    size_t i;

    if (dl_iterate_phdr(qmpi_find_range, &core) == 0)
        return qmpi_why(why, "cannot find the QMPI core's own segments (dl_iterate_phdr)");
    for (i = 1; i < elf->nsymbols; i++) {
        const ElfW(Sym) *symbol = &elf->symbols[i];
        const char *name = qmpi_elf_string(elf, symbol->st_name);
        int index;
        if (name == NULL || symbol->st_shndx != SHN_UNDEF || name[0] == '\0')
            continue;
        index = strncmp(name, "PMPI_", 5) == 0 ? qmpi_function_index(name + 1) : -1;
        if (index >= 0 && qmpi_pmpi_continued[index] != 0) {
            char entry[256];
            void *address;
            snprintf(entry, sizeof entry, "%c%s", qmpi_pmpi_letters[slot], name + 1);
            address = dlsym(RTLD_DEFAULT, entry);
            if (address == NULL)
                return qmpi_why(why,
                                "the core's entry %s is not visible to the dynamic linker: PMPI tools need "
                                "libqmpi.so linked into the program or preloaded (LD_PRELOAD), not libqmpi.a",
                                entry);
            if ((uintptr_t)address < core.low || (uintptr_t)address >= core.high)
                return qmpi_why(
                    why, "%s, the core's entry for its %s, is also defined by %s, which comes first", entry, name,
                    dladdr(address, &found) != 0 && found.dli_fname != NULL ? found.dli_fname : "another library");
            patch[(*npatch)++] = symbol->st_name;
            renamed[i] = 1;
        } else if ((strncmp(name, "PMPI_", 5) == 0 || strncmp(name, "MPI_", 4) == 0 ||
                    strncmp(name, "ompi_", 5) == 0) &&
                   ELF64_ST_BIND(symbol->st_info) != STB_WEAK && dlsym(RTLD_DEFAULT, name) == NULL) {
            return qmpi_why(why,
                            "built for another MPI: it needs %s, which %s does not define; rebuild it with this "
                            "MPI's mpicc",
                            name, QMPI_MPI_LIBRARY);
        }
    }
    for (i = 0; i < elf->ndynamic && elf->dynamic[i].d_tag != DT_NULL; i++) {
        const char *need = elf->dynamic[i].d_tag == DT_NEEDED ? qmpi_elf_string(elf, elf->dynamic[i].d_un.d_val) : NULL;
        if (need != NULL && (strncmp(need, "libmpi.so", 9) == 0 || strncmp(need, "libmpich.so", 11) == 0) &&
            dlopen(need, RTLD_LAZY | RTLD_NOLOAD) == NULL)
            return qmpi_why(why,
                            "built for another MPI: it is linked with %s, which this program (%s) has not "
                            "loaded; rebuild it with this MPI's mpicc",
                            need, QMPI_MPI_LIBRARY);
    }
    return 0;
}

/* Imports whose renaming would change another name too (linkers store PMPI_Send as the
 * tail of __real_PMPI_Send, a pointer some tools export) are not renamed: the dynamic
 * linker binds them to the MPI, and qmpi_pmpi_rebind re-points them once the copy is
 * loaded. Drops them from `patch` until the renaming left touches no other name. */
static void qmpi_keep_shared_names(const struct qmpi_elf *elf, size_t *patch, size_t *npatch, unsigned char *renamed)
{
    size_t k, i;

    while (qmpi_elf_shared_string(elf, patch, *npatch, renamed) != NULL) {
        for (k = 0; k < *npatch && qmpi_elf_shared_string(elf, &patch[k], 1, renamed) == NULL; k++)
            ;
        if (k == *npatch)
            k = *npatch - 1; /* shared only in combination: drop one at a time */
        for (i = 1; i < elf->nsymbols; i++)
            if (elf->symbols[i].st_name == patch[k])
                renamed[i] = 0;
        patch[k] = patch[--*npatch];
    }
}

/* The private copies by slot, once loaded and re-pointed: dlsym calls come from them. */
static const struct qmpi_pmpi_copy *qmpi_copies[QMPI_PMPI_SLOTS];

QMPI_HIDDEN const struct qmpi_pmpi_copy *qmpi_pmpi_copy_at(const void *address)
{
    int k;

    for (k = 0; k < QMPI_PMPI_SLOTS; k++)
        if (qmpi_copies[k] != NULL && (uintptr_t)address >= qmpi_copies[k]->low &&
            (uintptr_t)address < qmpi_copies[k]->high)
            return qmpi_copies[k];
    return NULL;
}

QMPI_HIDDEN void *qmpi_pmpi_continuation(int slot, const char *name)
{
    struct qmpi_range core = {(uintptr_t)qmpi_function_index, 0, 0};
    int index = qmpi_function_index(strncmp(name, "PMPI_", 5) == 0 ? name + 1 : name);
    char entry[256];
    void *address;

    if (index < 0 || qmpi_pmpi_continued[index] == 0 || dl_iterate_phdr(qmpi_find_range, &core) == 0)
        return NULL;
    snprintf(entry, sizeof entry, "%c%s", qmpi_pmpi_letters[slot], QMPI_Function_name(index));
    address = dlsym(RTLD_DEFAULT, entry);
    return (uintptr_t)address >= core.low && (uintptr_t)address < core.high ? address : NULL;
}

/* What the loaded copy's references are to reach that renaming could not arrange:
 * PMPI_X imports left with their name (qmpi_keep_shared_names); its calls of PMPI_X it
 * defines itself (Darshan aliases its wrappers as PMPI_X and writes its log with them),
 * which the dynamic linker bound to the MPI, past every level below; and dlsym/dlvsym,
 * so that a tool finding its next function by name (Darshan, Recorder: dlsym(RTLD_NEXT,
 * "PMPI_X")) gets the continuation below its level too. */
struct qmpi_copy_binding {
    const struct qmpi_pmpi_copy *copy;
    uintptr_t base; /* the copy's load bias */
};

/* ...and its references to everything else it defines: the dynamic linker binds a
 * default-visibility symbol to the first definition in the process, which is another
 * instance's when the same library is also preloaded (its __real_PMPI_X pointers, its
 * counters, its helper functions), or another tool's of the same name. A copy is its
 * own: bound to its own definitions, but for its MPI_X, which its own calls reach at the
 * top of the chain as under PMPI. */
static void *qmpi_copy_target(const char *name, const ElfW(Sym) * symbol, void *data)
{
    const struct qmpi_copy_binding *binding = (const struct qmpi_copy_binding *)data;
    int type = ELF64_ST_TYPE(symbol->st_info);

    if (strncmp(name, "PMPI_", 5) == 0)
        return qmpi_pmpi_continuation(binding->copy->slot, name);
    if (symbol->st_shndx == SHN_UNDEF)
        return qmpi_dl_lookup_for(name);
    if (strncmp(name, "MPI_", 4) == 0 || symbol->st_shndx == SHN_ABS || type == STT_TLS || type == STT_GNU_IFUNC ||
        !qmpi_elf_defines(symbol))
        return NULL;
    return (void *)(binding->base + symbol->st_value);
}

static int qmpi_pmpi_rebind(struct qmpi_pmpi_copy *copy, const struct link_map *map, char *why)
{
    struct qmpi_copy_binding binding;
    struct qmpi_object object;

    if (qmpi_loaded_at(map->l_ld, &object) != 0)
        return qmpi_why(why, "cannot find its private copy among the loaded objects");
    copy->low = object.low;
    copy->high = object.high;
    binding.copy = copy;
    binding.base = object.base;
    if (qmpi_loaded_rebind(&object, qmpi_copy_target, &binding, why) != 0)
        return QMPI_REFUSED;
    qmpi_copies[copy->slot] = copy;
    return 0;
}

/* A private file holding the library: a memfd, else an unlinked temporary file. It
 * holds what the loader reads (qmpi_elf_copy): its loadable bytes, not the whole file. */
static int qmpi_private_copy(const struct qmpi_elf *elf, char *name, size_t size)
{
    int fd = -1, saved;

#ifdef MFD_EXEC
    fd = memfd_create("qmpi-pmpi-tool", MFD_CLOEXEC | MFD_EXEC); /* vm.memfd_noexec=2 needs MFD_EXEC */
#endif
    if (fd < 0)
        fd = memfd_create("qmpi-pmpi-tool", MFD_CLOEXEC);
    if (fd >= 0) {
        snprintf(name, size, "/proc/self/fd/%d", fd);
    } else {
        const char *dir = getenv("TMPDIR");
        snprintf(name, size, "%s/qmpi-pmpi-tool-XXXXXX", dir != NULL && *dir != '\0' ? dir : "/tmp");
        fd = mkostemp(name, O_CLOEXEC);
        if (fd < 0)
            return -1;
    }
    if (qmpi_elf_copy(elf, fd) != 0) {
        saved = errno;
        if (strncmp(name, "/proc/", 6) != 0)
            unlink(name);
        close(fd);
        errno = saved;
        return -1;
    }
    return fd;
}

/* Loads a private copy of the PMPI tool `elf` into `slot`; fills `copy` and the level's
 * wrappers. 0, or QMPI_REFUSED with the reason in `why`. */
static int qmpi_pmpi_load(const struct qmpi_elf *elf, int slot, struct qmpi_pmpi_copy *copy, void **wrappers, char *why)
{
    struct timespec start, end;
    struct link_map *map;
    size_t *patch = (size_t *)qmpi_alloc(elf->nsymbols, sizeof *patch), npatch = 0, i;
    unsigned char *renamed = (unsigned char *)qmpi_alloc(elf->nsymbols, 1);
    char name[4096];
    int rc = QMPI_REFUSED;

    clock_gettime(CLOCK_MONOTONIC, &start);
    copy->slot = slot;
    copy->memfd = -1;
    if (qmpi_pmpi_check_imports(elf, slot, patch, &npatch, renamed, why) != 0)
        goto out;
    qmpi_keep_shared_names(elf, patch, &npatch, renamed);
    copy->memfd = qmpi_private_copy(elf, name, sizeof name);
    if (copy->memfd < 0) {
        qmpi_why(why, "cannot make a private copy of it: %s", strerror(errno));
        goto out;
    }
    if (qmpi_elf_rename(copy->memfd, elf, patch, npatch, qmpi_pmpi_letters[slot]) != 0) {
        qmpi_why(why, "cannot rename its PMPI_ imports in the private copy: %s", strerror(errno));
        goto out;
    }
    copy->handle = dlopen(name, RTLD_NOW | RTLD_LOCAL);
    if (strncmp(name, "/proc/", 6) != 0)
        unlink(name);
    if (copy->handle == NULL || dlinfo(copy->handle, RTLD_DI_LINKMAP, &map) != 0) {
        qmpi_why(why, "cannot load its private copy: %s", dlerror());
        goto out;
    }
    if (qmpi_pmpi_rebind(copy, map, why) != 0)
        goto out;
    copy->own = (void **)qmpi_alloc(NUM_MPI_FUNCS, sizeof *copy->own);
    for (i = 1; i < elf->nsymbols; i++) {
        const ElfW(Sym) *symbol = &elf->symbols[i];
        const char *symbol_name = qmpi_elf_string(elf, symbol->st_name);
        int index = symbol_name != NULL && strncmp(symbol_name, "MPI_", 4) == 0 ? qmpi_function_index(symbol_name) : -1;
        if (index < 0 || !qmpi_elf_defines(symbol) || ELF64_ST_TYPE(symbol->st_info) == STT_OBJECT)
            continue;
        copy->own[index] = ELF64_ST_TYPE(symbol->st_info) == STT_GNU_IFUNC ? dlsym(copy->handle, symbol_name)
                                                                           : (void *)(map->l_addr + symbol->st_value);
        wrappers[index] = qmpi_pmpi_fan_out[index] != NULL ? qmpi_pmpi_fan_out[index] : copy->own[index];
        copy->symbolic |= ELF64_ST_VISIBILITY(symbol->st_other) == STV_PROTECTED;
    }
    for (i = 0; i < elf->ndynamic && elf->dynamic[i].d_tag != DT_NULL; i++)
        copy->symbolic |= elf->dynamic[i].d_tag == DT_SYMBOLIC ||
                          (elf->dynamic[i].d_tag == DT_FLAGS && (elf->dynamic[i].d_un.d_val & DF_SYMBOLIC));
    rc = 0;
out:
    if (rc != 0 && copy->memfd >= 0)
        close(copy->memfd);
    free(patch);
    free(renamed);
    clock_gettime(CLOCK_MONOTONIC, &end);
    copy->load_ms = (double)(end.tv_sec - start.tv_sec) * 1e3 + (double)(end.tv_nsec - start.tv_nsec) / 1e6;
    return rc;
}

/* Loads `entry` as a PMPI tool at `level` if it is one, into the next free slot: 1 if
 * it is one, 0 if it is anything else (a thesis-style tool, or a file dlopen will say
 * more about). Refusals stop the job. */
QMPI_HIDDEN int qmpi_load_pmpi_tool(const struct qmpi_entry *entry, int level, int *slots)
{
    static const cell *direct;
    struct qmpi_pmpi_copy *copy;
    struct qmpi_elf elf;
    char file[4096], why[QMPI_WHY];
    int kind, i;

    if (!qmpi_tool_file(entry->text, file, sizeof file))
        return 0;
    kind = qmpi_elf_open(file, &elf, why);
    if (kind == QMPI_NOT_PMPI && elf.image != NULL)
        kind = qmpi_elf_kind(&elf, why);
    if (kind == QMPI_IS_PMPI && *slots == QMPI_PMPI_SLOTS)
        kind = qmpi_why(why,
                        "a PMPI tool, but the chain has %d PMPI tool instances above it already, as many as this "
                        "core has slots for private copies",
                        QMPI_PMPI_SLOTS);
    if (kind == QMPI_IS_PMPI) {
        if (direct == NULL) { /* slot tables until the chain is built: straight to the MPI */
            cell *cells = (cell *)qmpi_alloc(NUM_MPI_FUNCS, sizeof *cells);
            for (i = 0; i < NUM_MPI_FUNCS; i++)
                cells[i].func_ptr = qmpi_end_links[i];
            direct = cells;
        }
        qmpi_pmpi_tables[*slots] = direct;
        copy = (struct qmpi_pmpi_copy *)qmpi_alloc(1, sizeof *copy);
        qmpi_levels[level].native = (void **)qmpi_alloc(NUM_MPI_FUNCS, sizeof(void *));
        if (qmpi_pmpi_load(&elf, *slots, copy, qmpi_levels[level].native, why) != 0)
            kind = QMPI_REFUSED;
        qmpi_levels[level].kind = QMPI_PMPI_LEVEL;
        qmpi_levels[level].pmpi = copy;
        qmpi_chain.items[level]->handle = copy->handle;
        qmpi_warnings |= copy->symbolic;
        ++*slots;
    }
    qmpi_elf_close(&elf);
    if (kind == QMPI_REFUSED)
        qmpi_refuse_entry(entry, why);
    return kind == QMPI_IS_PMPI;
}

/* A library that is no QMPI tool: a PMPI tool that dlopen found by its bare name (not
 * in LD_LIBRARY_PATH) was loaded as it is; the core needs its file to copy it. */
QMPI_HIDDEN void qmpi_refuse_found_pmpi_tool(void *handle, const struct qmpi_entry *entry)
{
    struct link_map *map;
    struct qmpi_elf elf = {.fd = -1};
    char why[QMPI_WHY];
    int kind = QMPI_NOT_PMPI;

    if (dlinfo(handle, RTLD_DI_LINKMAP, &map) == 0 && qmpi_elf_open(map->l_name, &elf, why) == QMPI_NOT_PMPI &&
        elf.image != NULL)
        kind = qmpi_elf_kind(&elf, why);
    qmpi_elf_close(&elf);
    if (kind == QMPI_IS_PMPI)
        qmpi_fatalf("%s entry %d (%s): a PMPI tool found through the system's library search (%s): name it by its "
                    "path, or put its directory in LD_LIBRARY_PATH, so that the core can load a private copy",
                    entry->where, entry->position, entry->text, map->l_name);
}
