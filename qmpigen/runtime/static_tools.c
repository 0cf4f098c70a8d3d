/* static_tools.c: statically linked thesis-style tools (TOOLS=%NAME). */
#define _GNU_SOURCE
#include "qmpi_internal.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

/* A tool compiled with -DQMPI_STATIC_TOOL=NAME and linked into the program registers
 * from a constructor (qmpi.h): no dlopen, for systems without dynamic loading. */
struct qmpi_static_tool {
    char *name;
    char *(*interceptions)(int);
    const struct qmpi_static_symbol *symbols; /* NULL: look wrappers up with dlsym(RTLD_DEFAULT) */
    const char *enum_hash;
};

static struct qmpi_static_tool *qmpi_static_tools;
static int qmpi_static_count, qmpi_static_capacity;

int QMPI_Register_static_tool(const char *name, char *(*interceptions)(int), const struct qmpi_static_symbol *symbols,
                              const char *enum_hash)
{
    int i, rc = MPI_SUCCESS;

    if (name == NULL || *name == '\0' || interceptions == NULL)
        return qmpi_refuse(MPI_ERR_ARG, "QMPI_Register_static_tool: a static tool needs a name and get_interceptions");
    pthread_mutex_lock(&qmpi_registry_lock);
    if (qmpi_registration_closed) {
        rc = qmpi_refuse(MPI_ERR_OTHER,
                         "QMPI_Register_static_tool(\"%.300s\") after the chain was built: refused (it registers from "
                         "a constructor)",
                         name);
        goto out;
    }
    if (strchr(name, ':') != NULL) {
        rc = qmpi_refuse(MPI_ERR_ARG, "QMPI_Register_static_tool(\"%.300s\"): a name has no ':'", name);
        goto out;
    }
    for (i = 0; i < qmpi_static_count; i++) {
        if (strcmp(qmpi_static_tools[i].name, name) != 0)
            continue;
        if (qmpi_static_tools[i].interceptions != interceptions)
            rc = qmpi_refuse(MPI_ERR_ARG,
                             "QMPI_Register_static_tool(\"%.300s\"): two static tools of that name are linked", name);
        else if (qmpi_static_tools[i].symbols == NULL) /* another file of the same tool */
            qmpi_static_tools[i].symbols = symbols;
        goto out;
    }
    if (qmpi_static_count == qmpi_static_capacity) {
        int capacity = qmpi_static_capacity ? 2 * qmpi_static_capacity : 8;
        struct qmpi_static_tool *grown = realloc(qmpi_static_tools, (size_t)capacity * sizeof *grown);
        if (grown == NULL) {
            rc = qmpi_refuse(MPI_ERR_NO_MEM, "QMPI_Register_static_tool(\"%.300s\"): out of memory", name);
            goto out;
        }
        qmpi_static_tools = grown;
        qmpi_static_capacity = capacity;
    }
    qmpi_static_tools[qmpi_static_count].name = strdup(name);
    qmpi_static_tools[qmpi_static_count].interceptions = interceptions;
    qmpi_static_tools[qmpi_static_count].symbols = symbols;
    qmpi_static_tools[qmpi_static_count].enum_hash = enum_hash;
    if (qmpi_static_tools[qmpi_static_count].name == NULL)
        rc = qmpi_refuse(MPI_ERR_NO_MEM, "QMPI_Register_static_tool(\"%.300s\"): out of memory", name);
    else
        qmpi_static_count++;
out:
    pthread_mutex_unlock(&qmpi_registry_lock);
    return rc;
}

/* The symbol table (.symtab) of the object a static tool is linked into: hand-written
 * tools have no QMPI_STATIC_SYMBOLS, but the linker keeps their wrapper names there
 * unless the program is stripped. Read with <elf.h> and dl_iterate_phdr, no dlopen. */
struct qmpi_symtab {
    const void *inside; /* an address in the object: the tool's get_interceptions */
    const char *file;   /* the object's file; "/proc/self/exe" for the program */
    ElfW(Addr) base;    /* its load bias */
    unsigned char *map;
    size_t size;
    const ElfW(Sym) * symbols;
    size_t count;
    const char *names;
    size_t names_size;
    int opened;
};

static int qmpi_find_object(struct dl_phdr_info *info, size_t size, void *data)
{
    struct qmpi_symtab *table = (struct qmpi_symtab *)data;
    ElfW(Addr) address = (ElfW(Addr))(uintptr_t)table->inside;
    int i;

    (void)size;
    for (i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *segment = &info->dlpi_phdr[i];
        ElfW(Addr) start = info->dlpi_addr + segment->p_vaddr;
        if (segment->p_type == PT_LOAD && address >= start && address - start < segment->p_memsz) {
            table->file = info->dlpi_name != NULL && info->dlpi_name[0] != '\0' ? info->dlpi_name : "/proc/self/exe";
            table->base = info->dlpi_addr;
            return 1;
        }
    }
    return 0;
}

static void qmpi_symtab_open(struct qmpi_symtab *table)
{
    const ElfW(Ehdr) * header;
    const ElfW(Shdr) * sections;
    struct stat status;
    void *map;
    int fd, i;

    table->opened = 1;
    if (dl_iterate_phdr(qmpi_find_object, table) == 0 || table->file == NULL)
        return;
    fd = open(table->file, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return;
    if (fstat(fd, &status) == 0 && (size_t)status.st_size >= sizeof(ElfW(Ehdr))) {
        map = mmap(NULL, (size_t)status.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (map != MAP_FAILED) {
            table->map = (unsigned char *)map;
            table->size = (size_t)status.st_size;
        }
    }
    close(fd);
    if (table->map == NULL)
        return;
    header = (const ElfW(Ehdr) *)table->map;
    if (memcmp(header->e_ident, ELFMAG, SELFMAG) != 0 || header->e_shentsize != sizeof(ElfW(Shdr)) ||
        header->e_shoff > table->size || header->e_shnum > (table->size - header->e_shoff) / sizeof(ElfW(Shdr)))
        return;
    sections = (const ElfW(Shdr) *)(table->map + header->e_shoff);
    for (i = 0; i < header->e_shnum; i++) {
        const ElfW(Shdr) *symtab = &sections[i], *strtab;
        if (symtab->sh_type != SHT_SYMTAB || symtab->sh_link >= header->e_shnum)
            continue;
        strtab = &sections[symtab->sh_link];
        if (symtab->sh_offset > table->size || symtab->sh_size > table->size - symtab->sh_offset ||
            strtab->sh_offset > table->size || strtab->sh_size > table->size - strtab->sh_offset)
            return;
        table->symbols = (const ElfW(Sym) *)(table->map + symtab->sh_offset);
        table->count = symtab->sh_size / sizeof(ElfW(Sym));
        table->names = (const char *)(table->map + strtab->sh_offset);
        table->names_size = strtab->sh_size;
        return;
    }
}

static void *qmpi_symtab_find(struct qmpi_symtab *table, const char *name)
{
    size_t i;

    if (!table->opened)
        qmpi_symtab_open(table);
    for (i = 0; i < table->count; i++) {
        const ElfW(Sym) *symbol = &table->symbols[i];
        if (ELF64_ST_TYPE(symbol->st_info) == STT_FUNC && symbol->st_shndx != SHN_UNDEF &&
            symbol->st_name < table->names_size &&
            strncmp(table->names + symbol->st_name, name, table->names_size - symbol->st_name) == 0 &&
            ELF64_ST_BIND(symbol->st_info) != STB_LOCAL)
            return (void *)(uintptr_t)(table->base + symbol->st_value);
    }
    return NULL;
}

static void qmpi_symtab_close(struct qmpi_symtab *table)
{
    if (table->map != NULL)
        munmap(table->map, table->size);
}

/* A wrapper of a static tool: from its table, else from the symbol table of the object
 * it is linked into, else among the program's exported symbols. */
static void *qmpi_static_wrapper(const struct qmpi_static_tool *tool, const char *name, struct qmpi_symtab *symtab)
{
    const struct qmpi_static_symbol *symbol;
    void *address;

    for (symbol = tool->symbols; symbol != NULL && symbol->name != NULL; symbol++)
        if (strcmp(symbol->name, name) == 0)
            return symbol->address;
    address = qmpi_symtab_find(symtab, name);
    return address != NULL ? address : dlsym(RTLD_DEFAULT, name);
}

/* The arguments a static tool takes (qmpi_tool_arguments in its QMPI_STATIC_SYMBOLS), or NULL. */
QMPI_HIDDEN const char *qmpi_static_arguments(const char *name)
{
    const struct qmpi_static_symbol *symbol;
    int i;

    for (i = 0; i < qmpi_static_count; i++)
        if (strcmp(qmpi_static_tools[i].name, name) == 0)
            for (symbol = qmpi_static_tools[i].symbols; symbol != NULL && symbol->name != NULL; symbol++)
                if (strcmp(symbol->name, "qmpi_tool_arguments") == 0)
                    return (const char *)symbol->address;
    return NULL;
}

static void qmpi_unknown_static_tool(const struct qmpi_entry *entry)
{
    size_t length = 1;
    char *known;
    int i;

    for (i = 0; i < qmpi_static_count; i++)
        length += strlen(qmpi_static_tools[i].name) + 2;
    known = (char *)qmpi_alloc(length, 1);
    for (i = 0; i < qmpi_static_count; i++) {
        if (i)
            strcat(known, ", ");
        strcat(known, qmpi_static_tools[i].name);
    }
    qmpi_fatalf("%s entry %d (%s): no statically linked tool named '%s' (linked: %s); compile it with "
                "-DQMPI_STATIC_TOOL=%s and link its object files into the program",
                entry->where, entry->position, entry->text, entry->text + 1, qmpi_static_count ? known : "none",
                entry->text + 1);
}

/* TOOLS entry "%NAME": the static tool registered as NAME becomes the instance at
 * `level`. Instances of one static tool share its names and wrappers, as instances of
 * one library do; `libraries` (keyed by the registration) holds them. */
QMPI_HIDDEN void qmpi_load_static_tool(const struct qmpi_entry *entry, int level, struct qmpi_library *libraries,
                                       int *distinct)
{
    const struct qmpi_static_tool *tool = NULL;
    struct qmpi_library *lib;
    struct qmpi_symtab symtab;
    int i, d;

    if (entry->text[1] == '\0')
        qmpi_fatalf("%s entry %d: '%%' needs the name of a statically linked tool", entry->where, entry->position);
    for (i = 0; i < qmpi_static_count && tool == NULL; i++)
        if (strcmp(qmpi_static_tools[i].name, entry->text + 1) == 0)
            tool = &qmpi_static_tools[i];
    if (tool == NULL)
        qmpi_unknown_static_tool(entry);
    for (d = 0; d < *distinct && libraries[d].handle != (void *)tool; d++)
        ;
    lib = &libraries[d];
    if (d == *distinct) {
        if (tool->enum_hash != NULL && !qmpi_stamp_matches(tool->enum_hash))
            qmpi_fatalf("%s entry %d (%s): built for function enumeration %s, but this core has %s "
                        "(%s); rebuild the tool against this core's qmpi.h",
                        entry->where, entry->position, entry->text, tool->enum_hash, QMPI_ENUM_HASH, QMPI_MPI_LIBRARY);
        memset(&symtab, 0, sizeof symtab);
        symtab.inside = (const void *)(uintptr_t)tool->interceptions;
        lib->handle = (void *)tool;
        lib->names = (const char **)qmpi_alloc(NUM_MPI_FUNCS, sizeof *lib->names);
        lib->wrappers = (void **)qmpi_alloc(NUM_MPI_FUNCS, sizeof *lib->wrappers);
        for (i = 0; i < NUM_MPI_FUNCS; i++) {
            const char *name = tool->interceptions(i);
            if (name == NULL || strcmp(name, "NULL") == 0)
                continue;
            lib->wrappers[i] = qmpi_static_wrapper(tool, name, &symtab);
            if (lib->wrappers[i] == NULL)
                qmpi_fatalf("%s entry %d (%s): wrapper '%s' for %s not found: not in the tool's QMPI_STATIC_SYMBOLS, "
                            "not in the symbol table of %s (stripped?), not exported (-rdynamic)",
                            entry->where, entry->position, entry->text, name, QMPI_Function_name(i),
                            symtab.file ? symtab.file : "the program");
            lib->names[i] = name;
        }
        qmpi_symtab_close(&symtab);
        (*distinct)++;
    }
    qmpi_chain.items[level]->handle = NULL;
    qmpi_chain.items[level]->mpi_interceptions = lib->names;
    qmpi_levels[level].kind = QMPI_THESIS_LEVEL;
    qmpi_levels[level].native = lib->wrappers;
}
