/* loading.c: the tool lists (QMPI_TOOLS, TOOLS, QMPI_TOOL_LIST, or QMPI_CONF), thesis-style
 * tools by dlopen, callback tools by name, and the block of the chain's tables. */
#define _GNU_SOURCE
#include "qmpi_internal.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

/* The tables of all levels, one block. A call walks one cell per level, each in
 * another level's table: with hundreds of tools that is a new 4 KiB page per level
 * and the TLB, not the cache, sets the pace. Large blocks therefore ask for
 * transparent huge pages (where the kernel offers them; plain pages otherwise). */
#define QMPI_HUGE_PAGE ((size_t)2 << 20)

QMPI_HIDDEN cell *qmpi_alloc_cells(size_t count)
{
    size_t bytes;
    char *block;

    if (count > SIZE_MAX / sizeof(cell) - QMPI_HUGE_PAGE)
        qmpi_fatalf("QMPI: the chain is too long to allocate (%zu cells)", count);
    bytes = count * sizeof(cell);
    if (bytes < QMPI_HUGE_PAGE)
        return (cell *)qmpi_alloc(count, sizeof(cell));
#ifdef MADV_HUGEPAGE
    block = mmap(NULL, bytes + QMPI_HUGE_PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (block != MAP_FAILED) {
        char *aligned = block + (QMPI_HUGE_PAGE - (uintptr_t)block % QMPI_HUGE_PAGE) % QMPI_HUGE_PAGE;
        (void)madvise(aligned, bytes, MADV_HUGEPAGE); /* advice only: fine if refused */
        return (cell *)aligned;                       /* zero-filled, like calloc */
    }
#endif
    (void)block;
    return (cell *)qmpi_alloc(count, sizeof(cell));
}

/* The text of a refusal: "TOOLS entry 2 (./libt.so): <why>"; stops the job. */
QMPI_HIDDEN void qmpi_refuse_entry(const struct qmpi_entry *entry, const char *why)
{
    qmpi_fatalf("%s entry %d (%s): %s", entry->where, entry->position, entry->text, why);
}

QMPI_HIDDEN void qmpi_resolve(struct qmpi_library *lib, const struct qmpi_entry *entry)
{
    typedef char *(*get_interceptions_t)(int);
    const char *stamp;
    get_interceptions_t get_interceptions;
    int i;

    stamp = (const char *)dlsym(lib->handle, "qmpi_tool_enum_hash");
    if (stamp != NULL && strcmp(stamp, QMPI_ENUM_HASH) != 0)
        qmpi_fatalf("%s entry %d (%s): built for function enumeration %s, but this core has %s "
                    "(%s); rebuild the tool against this core's qmpi.h",
                    entry->where, entry->position, entry->text, stamp, QMPI_ENUM_HASH, QMPI_MPI_LIBRARY);
    *(void **)&get_interceptions = dlsym(lib->handle, "get_interceptions");
    if (get_interceptions == NULL && qmpi_refused_name[0] != '\0')
        qmpi_fatalf("%s entry %d (%s): not a QMPI tool but the library of callback tool '%s': name it "
                    "'@%s' in TOOLS or in QMPI_TOOL_LIST, with the library linked or preloaded",
                    entry->where, entry->position, entry->text, qmpi_refused_name, qmpi_refused_name);
    if (get_interceptions == NULL)
        qmpi_refuse_found_pmpi_tool(lib->handle, entry);
    if (get_interceptions == NULL)
        qmpi_fatalf("%s entry %d (%s): neither a QMPI tool (it has no get_interceptions function) nor a PMPI tool (it "
                    "defines none of the %d MPI functions this core intercepts)",
                    entry->where, entry->position, entry->text, NUM_MPI_FUNCS);

    lib->names = (const char **)qmpi_alloc(NUM_MPI_FUNCS, sizeof *lib->names);
    lib->wrappers = (void **)qmpi_alloc(NUM_MPI_FUNCS, sizeof *lib->wrappers);
    for (i = 0; i < NUM_MPI_FUNCS; i++) {
        const char *name = get_interceptions(i);
        if (name == NULL || strcmp(name, "NULL") == 0)
            continue;
        dlerror();
        lib->wrappers[i] = dlsym(lib->handle, name);
        if (lib->wrappers[i] == NULL)
            qmpi_fatalf("%s entry %d (%s): wrapper '%s' for %s not found: %s", entry->where, entry->position,
                        entry->text, name, QMPI_Function_name(i), dlerror());
        lib->names[i] = name;
    }
}

/* Splits a colon-separated list into entries. In TOOLS, "@name" is a callback tool. */
QMPI_HIDDEN int qmpi_split(const char *list, const char *where, int callback_only, struct qmpi_entry *out)
{
    const char *cursor = list;
    int position = 0;

    while (1) {
        const char *end = strchr(cursor, ':');
        size_t length = end ? (size_t)(end - cursor) : strlen(cursor);
        position++;
        if (length == 0)
            qmpi_fatalf("%s entry %d is empty (%s=\"%s\")", where, position, where, list);
        if (out != NULL) {
            struct qmpi_entry *entry = &out[position - 1];
            entry->callback = callback_only || cursor[0] == '@';
            entry->where = where;
            entry->position = position;
            if (!callback_only && cursor[0] == '@') {
                cursor++;
                length--;
                if (length == 0)
                    qmpi_fatalf("%s entry %d: '@' needs a callback tool name", where, position);
            }
            entry->text = strndup(cursor, length);
            if (entry->text == NULL)
                qmpi_fatal("QMPI: out of memory reading the tool list");
        }
        if (end == NULL)
            return position;
        cursor = end + 1;
    }
}

/* Secure-execution mode (AT_SECURE: set-user-ID, set-group-ID, file capabilities):
 * whoever sets the environment is not whom the process runs as. As ld.so ignores
 * LD_PRELOAD there, the core then ignores every variable that picks code or names a
 * file, and says once which were set (names only: a value may be a secret's path). */
static const char *const qmpi_tool_variables[] = {"QMPI_TOOLS", "TOOLS", "QMPI_TOOL_LIST", "MPIR_CVAR_QMPI_TOOL_LIST",
                                                  "QMPI_CONF"};

static int qmpi_secure(void)
{
    static int secure = -1;
    if (secure < 0)
        secure = getauxval(AT_SECURE) != 0;
    return secure;
}

/* A tool variable: NULL in secure-execution mode. */
static const char *qmpi_tool_getenv(const char *name)
{
    return qmpi_secure() ? NULL : getenv(name);
}

QMPI_HIDDEN void qmpi_secure_notice(void)
{
    char names[160] = "";
    size_t i;

    if (!qmpi_secure())
        return;
    for (i = 0; i < sizeof qmpi_tool_variables / sizeof *qmpi_tool_variables; i++) {
        const char *value = getenv(qmpi_tool_variables[i]);
        if (value != NULL && *value != '\0') {
            if (names[0] != '\0')
                strcat(names, ", ");
            strcat(names, qmpi_tool_variables[i]);
        }
    }
    if (names[0] != '\0')
        qmpi_warnf("secure-execution mode (set-user-ID, set-group-ID or file capabilities): %s ignored, as the "
                   "dynamic linker ignores LD_PRELOAD: running with no tools",
                   names);
}

/* QMPI_CONF, if set and not empty. */
QMPI_HIDDEN const char *qmpi_conf_variable(void)
{
    const char *file = qmpi_tool_getenv("QMPI_CONF");
    return file != NULL && *file != '\0' ? file : NULL;
}

/* Does a TOOLS entry name a tool at all: '@name', '%name', a library name (a file name
 * ending in ".so" or with ".so." in it), or an existing ELF file? A directory, a
 * program or a word does not. stat() and a 4-byte read of a regular file: no blocking. */
static int qmpi_names_a_tool(const char *entry, size_t length)
{
    char text[4096], file[4096];
    unsigned char magic[SELFMAG];
    const char *base, *so;
    struct stat status;
    int fd, elf = 0;

    if (length == 0)
        return 0;
    if (entry[0] == '@' || entry[0] == '%' || length >= sizeof text)
        return 1; /* too long to be a path: the loader says what it is */
    memcpy(text, entry, length);
    text[length] = '\0';
    base = strrchr(text, '/') != NULL ? strrchr(text, '/') + 1 : text;
    for (so = strstr(base, ".so"); so != NULL; so = strstr(so + 1, ".so"))
        if (so[3] == '\0' || so[3] == '.')
            return 1;
    if (!qmpi_tool_file(text, file, sizeof file) || stat(file, &status) != 0 || !S_ISREG(status.st_mode))
        return 0;
    fd = open(file, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd >= 0) {
        elf = read(fd, magic, sizeof magic) == (ssize_t)sizeof magic && memcmp(magic, ELFMAG, SELFMAG) == 0;
        close(fd);
    }
    return elf;
}

/* TOOLS is a generic name: another program's TOOLS (TOOLS=/usr/local/bin:/opt/tools)
 * must not stop a job. It is read as a tool list when at least one entry names a tool;
 * then every entry must be one, and a typo stops the job as in QMPI_TOOLS. */
static int qmpi_tools_list_names_a_tool(const char *list)
{
    const char *cursor = list, *end;

    for (;; cursor = end + 1) {
        end = strchrnul(cursor, ':');
        if (qmpi_names_a_tool(cursor, (size_t)(end - cursor)))
            return 1;
        if (*end == '\0')
            return 0;
    }
}

/* The thesis-style tool list: QMPI_TOOLS, else the thesis's TOOLS. QMPI_TOOLS set at
 * all, even empty, wins, and is always a tool list; TOOLS is one when it names a tool. */
QMPI_HIDDEN const char *qmpi_tools_variable(const char **where)
{
    const char *list = qmpi_tool_getenv("QMPI_TOOLS");
    *where = "QMPI_TOOLS";
    if (list == NULL) {
        list = qmpi_tool_getenv("TOOLS");
        *where = "TOOLS";
        if (list != NULL && *list != '\0' && !qmpi_tools_list_names_a_tool(list)) {
            qmpi_warn_once_per_job("TOOLS=%.300s names no tool (no shared library, @name or %%name): ignored as "
                                   "another program's variable; QMPI_TOOLS is always read as a tool list",
                                   list);
            list = NULL;
        }
    }
    return list != NULL && *list != '\0' ? list : NULL;
}

/* An on/off variable: set to anything but "" or "0" is on. Read in secure-execution
 * mode too (QMPI_VERBOSE: the chain on stderr, which names no file). */
QMPI_HIDDEN int qmpi_flag(const char *name)
{
    const char *value = getenv(name);
    return value != NULL && *value != '\0' && strcmp(value, "0") != 0;
}

QMPI_HIDDEN const char *qmpi_tool_list(const char **where)
{
    const char *list = qmpi_tool_getenv("QMPI_TOOL_LIST");
    *where = "QMPI_TOOL_LIST";
    if (list == NULL || *list == '\0') {
        list = qmpi_tool_getenv("MPIR_CVAR_QMPI_TOOL_LIST"); /* MPICH's spelling */
        *where = "MPIR_CVAR_QMPI_TOOL_LIST";
    }
    return list != NULL && *list != '\0' ? list : NULL;
}

/* A tool named by a path (or found in LD_LIBRARY_PATH) must be a regular file: open()
 * of a FIFO blocks every rank, and a directory or a device is no library. stat() does
 * not block. A file not found this way is dlopen's to search for and to report. */
QMPI_HIDDEN void qmpi_check_tool_file(const struct qmpi_entry *entry)
{
    char file[4096], why[160];
    struct stat status;

    if (!qmpi_tool_file(entry->text, file, sizeof file) || stat(file, &status) != 0 || S_ISREG(status.st_mode))
        return;
    snprintf(why, sizeof why, "not a regular file (%s): a tool is a shared library file",
             qmpi_file_kind(status.st_mode));
    qmpi_refuse_entry(entry, why);
}

QMPI_HIDDEN const struct qmpi_registration *qmpi_registered_tool(const struct qmpi_entry *entry)
{
    int i;
    for (i = 0; i < qmpi_registered; i++)
        if (strcmp(qmpi_registry[i].name, entry->text) == 0)
            return &qmpi_registry[i];
    return NULL;
}

QMPI_HIDDEN void qmpi_unknown_tool(const struct qmpi_entry *entry)
{
    size_t length = 1;
    char *known;
    int i;

    for (i = 0; i < qmpi_registered; i++)
        length += strlen(qmpi_registry[i].name) + 2;
    known = (char *)qmpi_alloc(length, 1);
    for (i = 0; i < qmpi_registered; i++) {
        if (i)
            strcat(known, ", ");
        strcat(known, qmpi_registry[i].name);
    }
    qmpi_fatalf("%s entry %d: no callback tool named '%s' is registered (registered: %s); link or preload the "
                "tool's library so its constructor calls QMPI_Register_tool_name",
                entry->where, entry->position, entry->text, qmpi_registered ? known : "none");
}

/* QMPI_CONF is set: the stack is the file's. The tool variables are then not read;
 * QMPI_VERBOSE's chain line says which of them were set and ignored. */
QMPI_HIDDEN int qmpi_conf_stack(const char **tools, const char *tools_where, const char **list, const char *list_where)
{
    int count = qmpi_conf_read(qmpi_conf_variable());

    if (*tools != NULL || *list != NULL)
        snprintf(qmpi_chain_sources, sizeof qmpi_chain_sources,
                 "QMPI_CONF=%.4000s (%s%s%s set but ignored: QMPI_CONF wins)", qmpi_conf_file,
                 *tools ? tools_where : "", *tools && *list ? " and " : "", *list ? list_where : "");
    else
        snprintf(qmpi_chain_sources, sizeof qmpi_chain_sources, "QMPI_CONF=%.4000s", qmpi_conf_file);
    *tools = NULL;
    *list = NULL;
    return count;
}

/* A thesis-style tool that says which arguments it takes (qmpi_tool_arguments: spec
 * tools do) gets no others: a key it does not know is a typo, said with its line. Tools
 * that do not say (hand-written, callback) get every key of their section. */
QMPI_HIDDEN void qmpi_conf_check_arguments(int count)
{
    int level, i;

    for (level = 1; level <= count; level++) {
        const struct qmpi_conf_instance *instance = qmpi_conf_level[level];
        const struct dynamic_lib *tool = qmpi_chain.items[level];
        const char *known = NULL, *name;

        if (instance == NULL || qmpi_levels[level].kind != QMPI_THESIS_LEVEL)
            continue;
        if (tool->handle != NULL)
            known = (const char *)dlsym(tool->handle, "qmpi_tool_arguments");
        else if (tool->path[0] == '%')
            known = qmpi_static_arguments(tool->path + 1);
        for (i = 0; known != NULL && i < instance->count; i++) {
            for (name = known; *name != '\0' && strcmp(name, instance->arguments[i].key) != 0; name += strlen(name) + 1)
                ;
            if (*name == '\0') {
                size_t length = 1;
                char *list;
                for (name = known; *name != '\0'; name += strlen(name) + 1)
                    length += strlen(name) + 2;
                list = (char *)qmpi_alloc(length, 1);
                for (name = known; *name != '\0'; name += strlen(name) + 1) {
                    if (name != known)
                        strcat(list, ", ");
                    strcat(list, name);
                }
                qmpi_fatalf("%s:%d: [%s] unknown argument '%s': %s takes %s%s", qmpi_conf_file,
                            instance->arguments[i].line, instance->name, instance->arguments[i].key, instance->tool,
                            *known ? "" : "no arguments", list);
            }
        }
    }
}
