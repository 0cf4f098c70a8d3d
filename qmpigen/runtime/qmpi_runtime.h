/* qmpi_runtime.h: what the QMPI core's fixed C files share; not for tools.
 *
 * The files of qmpigen/runtime are the same for every MPI: `qmpigen build-core` copies
 * them byte for byte into the core's runtime/ directory, and the core's Makefile
 * compiles each as its own translation unit. What varies per MPI is generated beside
 * them: qmpi.h, qmpi_internal.h (the MPI's facts as macros, e.g. the parameter lists of
 * QMPI_Register_*, then this header), the function tables, entry wrappers and end links.
 *
 * Two parts. The first needs no MPI: errors.c, conf.c, elf.c and elf_copy.c include this header
 * alone, so they compile, and are unit-tested (tests/c), without any mpi.h. The second
 * needs the MPI: the other files include the generated qmpi_internal.h, which defines
 * QMPI_CORE_BUILD, includes qmpi.h and then this header.
 *
 * What each file owns (its state and the functions other files call):
 *
 *   errors.c        the core's one error line, "qmpi: error: ..." in one write
 *                   (qmpi_fatal, qmpi_fatalf, qmpi_write_error), warnings (qmpi_warnf),
 *                   escaping what is not printable UTF-8 in both (qmpi_escape),
 *                   allocation that stops the job when it fails (qmpi_alloc). Stopping
 *                   is stop_job.c's.
 *   stop_job.c      qmpi_stop_job: MPI_Abort (initializing MPI first if need be), so
 *                   that every launcher ends the whole job.
 *   conf.c          QMPI_CONF: the configuration file's parser, the stacks it lays out
 *                   (qmpi_stacks), the chain entries it lists, and tool arguments
 *                   (QMPI_Get_tool_argument, QMPI_Tool_argument_error).
 *   elf_copy.c      a PMPI tool's private copy and the renaming of its PMPI_ imports.
 *   elf.c           reading a tool's ELF file: checked against its size and for what
 *                   the loader would trust (before any dlopen of a tool file); is it
 *                   a PMPI tool; which names share .dynstr bytes; the private copy
 *                   (loadable bytes only) and renaming PMPI_ imports in it.
 *   contexts.c      QMPI_Set_context / the init-once context (thesis 2.5.5).
 *   registration.c  callback tools: QMPI_Register_*, QMPI_Get_* (MPICH's interface),
 *                   the registry of tool names and the registration lock.
 *   services.c      services and globals between tools (a hash table), the current
 *                   call (QMPI_Call_*), the stacks' names (QMPI_Stack_*).
 *   threads.c       the thread level the stack supports (QMPI_Set_thread_level).
 *   pmpi_load.c     unmodified PMPI tools: checks, private copy, loading into a slot.
 *   loading.c       the environment (TOOLS, QMPI_TOOLS, QMPI_TOOL_LIST, QMPI_CONF,
 *                   QMPI_VERBOSE), ignored in secure-execution mode (AT_SECURE); the
 *                   tool lists; thesis-style tools by dlopen, the chain's cell block.
 *   static_tools.c  statically linked thesis-style tools (TOOLS=%NAME).
 *   chain_report.c  QMPI_VERBOSE: the chain, said once by world rank 0.
 *   chain.c         the chain's state, building it on the first MPI call, bottom-up,
 *                   and QMPI_Get_stack_function.
 *   identity.c      on that first call: the MPI library reached is the one the core
 *                   was generated for, and no other MPI library is loaded.
 */
#ifndef QMPI_RUNTIME_H_INCLUDED
#define QMPI_RUNTIME_H_INCLUDED

#include <elf.h>
#include <link.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

/* Internal symbols are hidden: no PLT or GOT hop inside the core, nothing for
 * tools or applications to collide with. */
#define QMPI_HIDDEN __attribute__((visibility("hidden")))

/* ==== part 1: without MPI ============================================================ */

/* errors.c, stop_job.c */
QMPI_HIDDEN void qmpi_fatal(const char *message) __attribute__((noreturn));
QMPI_HIDDEN void qmpi_fatalf(const char *format, ...) __attribute__((format(printf, 1, 2), noreturn));
QMPI_HIDDEN void qmpi_write_error(const char *format, va_list args) __attribute__((format(printf, 1, 0)));
QMPI_HIDDEN void qmpi_write_warning(const char *format, va_list args) __attribute__((format(printf, 1, 0)));
QMPI_HIDDEN void qmpi_warnf(const char *format, ...) __attribute__((format(printf, 1, 2)));
QMPI_HIDDEN size_t qmpi_escape(char *out, const char *text, size_t length);
QMPI_HIDDEN const char *qmpi_file_kind(unsigned int mode);
QMPI_HIDDEN void *qmpi_alloc(size_t count, size_t size);
QMPI_HIDDEN void qmpi_stop_job(void) __attribute__((noreturn));

/* One link of the chain as the user listed it (loading.c; conf.c for QMPI_CONF). */
struct qmpi_entry {
    int callback;      /* a registered callback tool, by name */
    const char *where; /* the variable it came from: QMPI_TOOLS, TOOLS, QMPI_TOOL_LIST, ... */
    int position;      /* 1-based position in that variable */
    char *text;        /* path or name */
    int stack_top;     /* not a tool: the top of a named stack (QMPI_CONF) */
};

/* The named stacks (QMPI_CONF's [stack NAME]): stack s is level `top` (a core level
 * with no tool, the stack's handle) and the `count` levels below it. Stack 0 is the
 * default stack, top 0: the application's calls enter it. Laid out by conf.c. */
struct qmpi_stack {
    const char *name;
    int top;
    int count;
};
QMPI_HIDDEN extern struct qmpi_stack *qmpi_stacks;
QMPI_HIDDEN extern int qmpi_stack_count;

/* conf.c: an instance's section and its arguments. */
struct qmpi_argument {
    char *key;
    char *value;
    int line;
};

struct qmpi_conf_instance {
    char *name;
    int line;   /* of its [NAME] header */
    char *tool; /* the tool = value */
    int tool_line;
    char *where; /* "FILE:LINE: QMPI_CONF", how errors about its entry start */
    struct qmpi_argument *arguments;
    int count, capacity;
};

QMPI_HIDDEN extern const char *qmpi_conf_file;                  /* QMPI_CONF's value, once read */
QMPI_HIDDEN extern struct qmpi_conf_instance **qmpi_conf_level; /* by level; NULL for a stack's top */
QMPI_HIDDEN int qmpi_conf_read(const char *file);
QMPI_HIDDEN void qmpi_conf_entries(struct qmpi_entry *out);
QMPI_HIDDEN const char *qmpi_get_argument(int level, const char *name);
QMPI_HIDDEN void qmpi_argument_error(int level, const char *name, const char *why) __attribute__((noreturn));

/* elf.c: a tool's file, mapped read-only, and where its dynamic linking data are: found
 * as the loader finds them, from the program headers (PT_DYNAMIC, then the dynamic
 * entries' addresses through the PT_LOAD segments), never from the section headers.
 * qmpi_elf_open has checked every one against the file before anything maps it. */
#define QMPI_WHY 512 /* room for a refusal's reason */
enum { QMPI_REFUSED = -1, QMPI_NOT_PMPI = 0, QMPI_IS_PMPI = 1 };

struct qmpi_elf {
    const unsigned char *image;
    size_t size;
    int fd;
    const ElfW(Ehdr) * header;
    const ElfW(Phdr) * segments;
    size_t nsegments;
    const ElfW(Sym) * symbols; /* DT_SYMTAB; the count from DT_GNU_HASH or DT_HASH */
    size_t nsymbols;
    const char *strings; /* DT_STRTAB: file offset and DT_STRSZ */
    size_t strings_offset, strings_size;
    const ElfW(Dyn) * dynamic;
    size_t ndynamic;                /* up to its DT_NULL */
    size_t verneed, verdef;         /* file offsets of DT_VERNEED, DT_VERDEF; 0: none */
    size_t verneed_end, verdef_end; /* the end of the segment's file bytes holding them */
};

QMPI_HIDDEN int qmpi_why(char *why, const char *format, ...) __attribute__((format(printf, 2, 3)));
QMPI_HIDDEN int qmpi_tool_file(const char *path, char *file, size_t size);
QMPI_HIDDEN int qmpi_elf_open(const char *file, struct qmpi_elf *elf, char *why);
QMPI_HIDDEN void qmpi_elf_close(struct qmpi_elf *elf);
QMPI_HIDDEN int qmpi_elf_kind(const struct qmpi_elf *elf, char *why);
QMPI_HIDDEN const char *qmpi_elf_string(const struct qmpi_elf *elf, size_t offset);
/* [offset, offset + length) inside the file; [start, start + length) inside [low, low + size). */
QMPI_HIDDEN int qmpi_elf_within(const struct qmpi_elf *elf, size_t offset, size_t length);
/* Whether `offset` is aligned for a `type` in the mapped image (page aligned). */
#define QMPI_ELF_ALIGNED(offset, type) ((offset) % _Alignof(type) == 0)
QMPI_HIDDEN int qmpi_inside(ElfW(Addr) start, size_t length, ElfW(Addr) low, ElfW(Xword) size);
QMPI_HIDDEN int qmpi_elf_defines(const ElfW(Sym) * symbol);
QMPI_HIDDEN const char *qmpi_elf_shared_string(const struct qmpi_elf *elf, const size_t *patch, size_t npatch,
                                               const unsigned char *renamed);
QMPI_HIDDEN int qmpi_elf_rename(int fd, const struct qmpi_elf *elf, const size_t *patch, size_t npatch, char letter);
QMPI_HIDDEN int qmpi_elf_copy(const struct qmpi_elf *elf, int fd);

/* The enumeration index of an MPI function's name, or -1 (generated: qmpi_pmpi.c). */
QMPI_HIDDEN int qmpi_function_index(const char *name);

/* What makes a library an MPI library rather than a tool that defines some PMPI_
 * functions (Darshan aliases its wrappers as PMPI_X, Recorder defines PMPI_Init): an
 * implementation defines the C PMPI_ function of (nearly) every MPI function, at least
 * this many (MPI-2 has over 280; MPICH 5 defines 700, Open MPI 5 468); a tool only what
 * it wraps (Darshan 3.5: 48). Counted by name (qmpi_is_c_pmpi), not by enumeration, so
 * that a core made for a few functions judges alike. */
#define QMPI_MPI_LIBRARY_PMPI 200
/* A C binding's PMPI_ name ("PMPI_Send"), not a Fortran one (PMPI_SEND, pmpi_send_). */
QMPI_HIDDEN int qmpi_is_c_pmpi(const char *name);

/* loaded.c: an object the dynamic linker has loaded, read in memory from its program
 * headers (dl_iterate_phdr); every table bounded by its loaded segments. */
struct qmpi_object {
    const char *name; /* as the dynamic linker names it; "" for the main program */
    uintptr_t base;   /* load bias */
    uintptr_t low, high;
    uintptr_t relro_low, relro_high; /* read-only after relocation */
    const ElfW(Phdr) * segments;
    size_t nsegments;
    const ElfW(Dyn) * dynamic;
    size_t ndynamic;
    const ElfW(Sym) * symbols;
    size_t nsymbols;
    const char *strings;
    size_t strings_size;
    const ElfW(Rela) * relocations[2]; /* DT_RELA, DT_JMPREL */
    size_t nrelocations[2];
};
/* The address a reference to `name` (its symbol `symbol` in the object) is to hold from
 * now on, or NULL to leave it as the dynamic linker bound it. */
typedef void *(*qmpi_rebind_fn)(const char *name, const ElfW(Sym) * symbol, void *data);
struct dl_phdr_info; /* <link.h> declares it with _GNU_SOURCE only */
QMPI_HIDDEN int qmpi_loaded_read(const struct dl_phdr_info *info, struct qmpi_object *object);
QMPI_HIDDEN int qmpi_loaded_at(const void *address, struct qmpi_object *object);
QMPI_HIDDEN const char *qmpi_loaded_name(const struct qmpi_object *object, size_t index);
QMPI_HIDDEN void *qmpi_loaded_lookup(const struct qmpi_object *object, const char *name);
QMPI_HIDDEN size_t qmpi_loaded_count(const struct qmpi_object *object, int (*wanted)(const char *name));
QMPI_HIDDEN int qmpi_loaded_rebind(const struct qmpi_object *object, qmpi_rebind_fn target, void *data, char *why);

/* ==== part 2: with the MPI (qmpi_internal.h includes qmpi.h, then this) =============== */
#ifdef QMPI_CORE_BUILD

#include <pthread.h>

/* Entry wrappers start a 32-byte fetch block, so the no-tools path (load, compare,
 * branch, jump: about 17 bytes) never straddles two. */
#define QMPI_ENTRY __attribute__((aligned(32)))
#define QMPI_LIKELY(x) __builtin_expect(!!(x), 1)
#define QMPI_UNLIKELY(x) __builtin_expect(!!(x), 0)

/* QMPI_UNBUILT until the first MPI call of any kind; then QMPI_DIRECT (no tools:
 * entry wrappers call PMPI at once) or QMPI_CHAINED (entry wrappers record the call
 * site for QMPI_Get_calling_address and enter the chain). Never changes afterwards. */
enum { QMPI_UNBUILT = 0, QMPI_DIRECT = 1, QMPI_CHAINED = 2 };

/* How the tool at a level is called: the thesis's wrapper(args, level, v) or the
 * callback interface's fn(context, tool_id, args). Level 0, the core, is a thesis
 * level. A level's table holds its next links in its own calling convention. */
enum { QMPI_THESIS_LEVEL = 0, QMPI_CALLBACK_LEVEL = 1, QMPI_PMPI_LEVEL = 2 };

/* An unmodified PMPI tool at one level (QMPI_PMPI_LEVEL): a private copy of its library
 * whose PMPI_X imports call slot `slot`'s continuation entries (qmpi_pmpi.c). Its own
 * MPI_X are the level's wrappers, called in the thesis form: the extra trailing
 * arguments (level, chain) are ignored by a function that does not declare them on the
 * ABIs the loader accepts (x86-64, AArch64, ppc64le ELFv2: the caller pops them).
 * QMPI_PMPI_SLOTS is the MPI's (qmpi_internal.h). */
struct qmpi_pmpi_copy {
    void *handle;   /* dlopen handle of the private copy */
    int memfd;      /* kept open for the life of the process: /proc/self/fd/N names the copy */
    int slot;       /* 0 .. QMPI_PMPI_SLOTS-1 */
    int symbolic;   /* -Bsymbolic or protected MPI_X: its own calls bypass the levels above */
    double load_ms; /* time to check, copy, patch and load it */
    uintptr_t low, high; /* where the copy is loaded: its dlsym calls come from there */
    void **own;     /* per function: the copy's own MPI_X, or NULL */
};

struct qmpi_level {
    int kind;
    void **native;               /* per function: this level's own wrapper/callback, or NULL */
    struct qmpi_pmpi_copy *pmpi; /* QMPI_PMPI_LEVEL only */
};

/* chain.c: the chain's state. */
QMPI_HIDDEN extern int qmpi_state;
QMPI_HIDDEN extern vector qmpi_chain;
QMPI_HIDDEN extern cell *qmpi_top; /* the core's own table (level 0) */
QMPI_HIDDEN extern struct qmpi_level *qmpi_levels;
QMPI_HIDDEN extern void **qmpi_storage; /* callback tools' storage, by tool id (= level) */
QMPI_HIDDEN extern __thread void *qmpi_call_site __attribute__((tls_model("initial-exec")));

/* The call that entered the chain at its top (QMPI_Call_*), kept while
 * QMPI_Record_calls is on: nested calls of tools link to the outer one. */
struct qmpi_call {
    int function;
    int count;
    void *const *arguments; /* addresses of the arguments */
    void *site;
    const struct qmpi_call *outer;
};
QMPI_HIDDEN extern __thread const struct qmpi_call *qmpi_current_call __attribute__((tls_model("initial-exec")));
QMPI_HIDDEN extern int qmpi_recording;
/* The variadic tail of the call being handed to a callback tool (QMPI_Get_variadic_args). */
QMPI_HIDDEN extern __thread va_list *qmpi_variadic_tail __attribute__((tls_model("initial-exec")));
QMPI_HIDDEN int qmpi_build_chain(void);

/* neighbours.c: the loaded objects in load order, as the core sees them. */
#define QMPI_MAX_OUTER 16
struct qmpi_survey {
    int stop_at_core; /* the walk ends at the core (at load: only what comes ahead of it) */
    int core_found;
    struct qmpi_object core;
    int nmpi; /* MPI libraries (QMPI_MPI_LIBRARY_PMPI); the first two are kept */
    struct qmpi_object mpi[2];
    int mpi_ahead; /* the first of them comes before the core */
    int nouter;    /* objects before the core that define MPI functions of the enumeration */
    struct qmpi_object outer[QMPI_MAX_OUTER];
    int inner; /* an object between the core and the MPI defines some */
};
QMPI_HIDDEN void qmpi_survey(struct qmpi_survey *survey, int stop_at_core);
QMPI_HIDDEN void qmpi_follow_inner(const struct qmpi_survey *survey);
QMPI_HIDDEN extern int (*qmpi_own_comm_rank)(MPI_Comm comm, int *rank);
QMPI_HIDDEN void qmpi_inner_names(char *out, size_t size);
QMPI_HIDDEN void qmpi_rebind_downward(const struct qmpi_object *object, const char *what);
QMPI_HIDDEN void qmpi_rebind_library_downward(void *handle, const char *what);
QMPI_HIDDEN void qmpi_check_neighbours(void);
QMPI_HIDDEN void qmpi_say_load_notes(void);
QMPI_HIDDEN int qmpi_launched(void); /* the launcher made this process a rank */
QMPI_HIDDEN void *qmpi_dl_lookup_for(const char *name);
QMPI_HIDDEN void qmpi_outer_names(char *out, size_t size);
QMPI_HIDDEN void qmpi_warn_once_per_job(const char *format, ...) __attribute__((format(printf, 1, 2)));
/* The core's own entry wrappers by function (NULL for names the MPI defines as macros):
 * the address of MPI_X seen from inside the core may be a preloaded tool's (generated). */
QMPI_HIDDEN extern void *const qmpi_entries[NUM_MPI_FUNCS];

/* exit_finalize.c: MPI_Finalize put off to exit handlers by tools (IPM). */
QMPI_HIDDEN void qmpi_finalize_returned(void);
QMPI_HIDDEN int qmpi_end_of_finalize(void);

/* identity.c */
QMPI_HIDDEN void qmpi_check_mpi_library(const struct qmpi_survey *survey);
QMPI_HIDDEN void qmpi_check_mpi_ahead(const struct qmpi_object *mpi);

/* Generated per MPI: qmpi_entry.c, qmpi_exec.c, qmpi_links.c. */
QMPI_HIDDEN extern void *const qmpi_end_links[NUM_MPI_FUNCS];
QMPI_HIDDEN extern void *const qmpi_callback_end_links[NUM_MPI_FUNCS];
QMPI_HIDDEN extern void *const qmpi_callback_as_thesis[NUM_MPI_FUNCS];
QMPI_HIDDEN extern void *const qmpi_thesis_as_callback[NUM_MPI_FUNCS];
QMPI_HIDDEN extern const int qmpi_forum_slot[MPI_LAST_FUNC_T]; /* enumeration index + 1; 0: not ours */
QMPI_HIDDEN extern const qmpi_exec_fn qmpi_exec_entries[NUM_MPI_FUNCS];
QMPI_HIDDEN void qmpi_bad_exec(int level, int func_index, int total) __attribute__((noreturn));
/* The end of the chain for function `i` in the convention of the level above it. */
QMPI_HIDDEN void *qmpi_end_link(int i, int callback);
/* 1 for the functions that pass through every stack (start and end of MPI, fan-out). */
QMPI_HIDDEN extern const unsigned char qmpi_every_stack[NUM_MPI_FUNCS];

/* PMPI tool slots (generated: qmpi_pmpi.c). */
QMPI_HIDDEN extern const char qmpi_pmpi_letters[QMPI_PMPI_SLOTS];
QMPI_HIDDEN extern const cell *qmpi_pmpi_tables[QMPI_PMPI_SLOTS];
QMPI_HIDDEN extern const unsigned char qmpi_pmpi_continued[NUM_MPI_FUNCS]; /* 1: continued, 2: fanned out */
QMPI_HIDDEN extern void *const qmpi_pmpi_fan_out[NUM_MPI_FUNCS];

/* contexts.c */
QMPI_HIDDEN void qmpi_set_context(vector *v, int index, const void *cntxt, size_t size);
QMPI_HIDDEN void *qmpi_init_context(vector *v, int index, const void *cntxt, size_t size);

/* registration.c: callback tools as registered by their constructors. */
struct qmpi_registration {
    char *name;
    void (*init)(int tool_id);
};
QMPI_HIDDEN extern pthread_mutex_t qmpi_registry_lock;
QMPI_HIDDEN extern struct qmpi_registration *qmpi_registry;
QMPI_HIDDEN extern int qmpi_registered;
QMPI_HIDDEN extern int qmpi_registration_closed;   /* set once the chain is being built */
QMPI_HIDDEN extern int qmpi_initializing;          /* tool id whose init function runs now */
QMPI_HIDDEN extern void **qmpi_pending;            /* its registered functions, by enumeration index */
QMPI_HIDDEN extern __thread int qmpi_opening_tool; /* this thread is in dlopen of a TOOLS entry */
QMPI_HIDDEN extern char qmpi_refused_name[QMPI_MAX_TOOL_NAME_LENGTH];
QMPI_HIDDEN int qmpi_refuse(int code, const char *format, ...) __attribute__((format(printf, 2, 3)));
QMPI_HIDDEN int qmpi_forum_index(int function_enum);

/* services.c */
QMPI_HIDDEN int qmpi_stack_holding(int level);

/* threads.c */
QMPI_HIDDEN int qmpi_capped_thread_level(int required);
QMPI_HIDDEN void qmpi_cap_provided(int *provided);
QMPI_HIDDEN void qmpi_report_thread_cap(int rank);

/* pmpi_load.c */
QMPI_HIDDEN extern int qmpi_warnings; /* a PMPI tool binds its own MPI calls locally */
QMPI_HIDDEN int qmpi_load_pmpi_tool(const struct qmpi_entry *entry, int level, int *slots);
QMPI_HIDDEN void qmpi_refuse_found_pmpi_tool(void *handle, const struct qmpi_entry *entry);
/* The private copy holding `address`, or NULL; the continuation of slot `slot` for
 * "PMPI_X" or "MPI_X", or NULL if the slots do not continue it (dlsym of a copy). */
QMPI_HIDDEN const struct qmpi_pmpi_copy *qmpi_pmpi_copy_at(const void *address);
QMPI_HIDDEN void *qmpi_pmpi_continuation(int slot, const char *name);

/* loading.c: what one tool library (one dlopen handle) offers; shared by its instances. */
struct qmpi_library {
    void *handle;
    const char **names; /* wrapper name per function, NULL if not intercepted */
    void **wrappers;    /* wrapper address per function, NULL if not intercepted */
};
QMPI_HIDDEN cell *qmpi_alloc_cells(size_t count);
QMPI_HIDDEN void qmpi_refuse_entry(const struct qmpi_entry *entry, const char *why) __attribute__((noreturn));
QMPI_HIDDEN void qmpi_resolve(struct qmpi_library *lib, const struct qmpi_entry *entry);
QMPI_HIDDEN int qmpi_split(const char *list, const char *where, int callback_only, struct qmpi_entry *out);
QMPI_HIDDEN void qmpi_secure_notice(void);
QMPI_HIDDEN const char *qmpi_conf_variable(void);
QMPI_HIDDEN void qmpi_check_tool_file(const struct qmpi_entry *entry);
QMPI_HIDDEN const char *qmpi_tools_variable(const char **where);
QMPI_HIDDEN const char *qmpi_tool_list(const char **where);
QMPI_HIDDEN int qmpi_flag(const char *name);
QMPI_HIDDEN int qmpi_conf_stack(const char **tools, const char *tools_where, const char **list, const char *list_where);
QMPI_HIDDEN void qmpi_conf_check_arguments(int count);
QMPI_HIDDEN const struct qmpi_registration *qmpi_registered_tool(const struct qmpi_entry *entry);
QMPI_HIDDEN void qmpi_unknown_tool(const struct qmpi_entry *entry) __attribute__((noreturn));

/* static_tools.c */
QMPI_HIDDEN void qmpi_load_static_tool(const struct qmpi_entry *entry, int level, struct qmpi_library *libraries,
                                       int *distinct);
QMPI_HIDDEN const char *qmpi_static_arguments(const char *name);

/* chain_report.c */
QMPI_HIDDEN extern int qmpi_verbose;
QMPI_HIDDEN extern char qmpi_chain_sources[4400]; /* the variables (or the file) that listed the tools */
QMPI_HIDDEN int qmpi_world_rank(void);
QMPI_HIDDEN void qmpi_report_chain_world(void);
#ifdef QMPI_SESSION_REPORT
QMPI_HIDDEN void qmpi_report_chain_session(MPI_Session session);
#endif

/* The wrapper of `level` for `index` in the thesis's calling convention. */
static inline void *qmpi_thesis_form(int level, int index)
{
    return qmpi_levels[level].kind == QMPI_CALLBACK_LEVEL ? qmpi_callback_as_thesis[index]
                                                          : qmpi_levels[level].native[index];
}

static inline int qmpi_current_state(void)
{
    return __atomic_load_n(&qmpi_state, __ATOMIC_ACQUIRE);
}

#endif /* QMPI_CORE_BUILD */
#endif /* QMPI_RUNTIME_H_INCLUDED */
