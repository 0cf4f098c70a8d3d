/* elf.c: recognizing a PMPI tool from its dynamic symbols, refusing what is no shared
 * object, and renaming PMPI_ imports in a copy. The inputs are built here with $CC. */
#include "../../qmpigen/runtime/qmpi_runtime.h"
#include "check.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <sys/stat.h>

static char dir[] = "/tmp/qmpi-elf-XXXXXX";

/* Compiles `source` with `flags` into dir/name; returns the path. */
static const char *build(const char *name, const char *flags, const char *source)
{
    static char paths[8][512];
    static int next;
    char command[2048], *path = paths[next++ % 8];
    const char *cc = getenv("CC") ? getenv("CC") : "cc";
    FILE *out;

    snprintf(path, 512, "%s/%s.c", dir, name);
    out = fopen(path, "w");
    fputs(source, out);
    fclose(out);
    snprintf(command, sizeof command, "%s %s -o %s/%s %s", cc, flags, dir, name, path);
    if (system(command) != 0) {
        fprintf(stderr, "cannot build: %s\n", command);
        exit(2);
    }
    snprintf(path, 512, "%s/%s", dir, name);
    return path;
}

static const char *pmpi_tool, *debug_tool, *verdef_tool, *thesis_tool, *mpi_library, *aliasing_tool, *object_file,
    *executable;

static int kind_of(const char *file, char *why)
{
    struct qmpi_elf elf;
    int kind = qmpi_elf_open(file, &elf, why);

    if (kind == QMPI_NOT_PMPI && elf.image != NULL)
        kind = qmpi_elf_kind(&elf, why);
    qmpi_elf_close(&elf);
    return kind;
}

static void recognizes_a_pmpi_tool(void)
{
    char why[QMPI_WHY] = "";
    CHECK(kind_of(pmpi_tool, why) == QMPI_IS_PMPI);
}

static void a_thesis_tool_is_no_pmpi_tool(void)
{
    char why[QMPI_WHY] = "";
    CHECK(kind_of(thesis_tool, why) == QMPI_NOT_PMPI);
}

static void refuses(const char *file, const char *expected)
{
    char why[QMPI_WHY] = "";
    CHECK(kind_of(file, why) == QMPI_REFUSED);
    if (strstr(why, expected) == NULL) {
        fprintf(stderr, "%s: \"%s\", expected \"%s\"\n", file, why, expected);
        _exit(1);
    }
}

static void refuses_an_mpi_library(void)
{
    refuses(mpi_library, "an MPI library");
}

/* Darshan defines its wrappers as MPI_X and PMPI_X alike: a tool all the same. */
static void a_tool_defining_a_few_pmpi_functions_is_a_pmpi_tool(void)
{
    char why[QMPI_WHY] = "";
    CHECK(kind_of(aliasing_tool, why) == QMPI_IS_PMPI);
}

static void tells_c_pmpi_names(void)
{
    CHECK(qmpi_is_c_pmpi("PMPI_Send") && qmpi_is_c_pmpi("PMPI_File_write_at") && qmpi_is_c_pmpi("PMPI_T_init_thread"));
    CHECK(!qmpi_is_c_pmpi("PMPI_SEND") && !qmpi_is_c_pmpi("pmpi_send_") && !qmpi_is_c_pmpi("MPI_Send"));
    CHECK(!qmpi_is_c_pmpi("PMPI_") && !qmpi_is_c_pmpi("PMPI_X") && !qmpi_is_c_pmpi("__real_PMPI_Send"));
}

static void refuses_an_object_file(void)
{
    refuses(object_file, "an object file");
}

static void refuses_an_executable(void)
{
    refuses(executable, "executable");
}

static void refuses_text_and_short_files(void)
{
    refuses(check_file("not an ELF file, but long enough to hold an ELF header: 0123456789012345678901234567890123"),
            "not an ELF file");
    refuses(check_file("\177ELF"), "file is truncated");
    refuses("/dev/zero", "not a regular file");
}

static void a_missing_file_is_left_to_dlopen(void)
{
    struct qmpi_elf elf;
    char why[QMPI_WHY] = "";
    CHECK(qmpi_elf_open("/nonexistent.so", &elf, why) == QMPI_NOT_PMPI && elf.image == NULL);
    qmpi_elf_close(&elf);
}

/* The symbol named `name`: 1 defined, 0 undefined, -1 absent. */
static int symbol_state(const struct qmpi_elf *elf, const char *name)
{
    size_t i;
    for (i = 1; i < elf->nsymbols; i++) {
        const char *s = qmpi_elf_string(elf, elf->symbols[i].st_name);
        if (s != NULL && strcmp(s, name) == 0)
            return elf->symbols[i].st_shndx != SHN_UNDEF;
    }
    return -1;
}

/* Renames the PMPI_ imports of the enumeration's functions of `source` (open in
 * `elf`, which this closes) in a copy named `copy_name` in the test directory, the way
 * pmpi_load.c does, and opens the copy in `renamed`. Checks that there are two (the
 * tools' PMPI_Send and PMPI_Comm_rank) and that they share no string. */
static void rename_in_copy(struct qmpi_elf *elf, const char *source, const char *copy_name, struct qmpi_elf *renamed)
{
    size_t patch[16], npatch = 0, i;
    unsigned char marked[4096] = {0};
    char why[QMPI_WHY] = "", copy[600], command[1300];
    int fd;

    CHECK(elf->nsymbols < sizeof marked);
    for (i = 1; i < elf->nsymbols; i++) {
        const char *name = qmpi_elf_string(elf, elf->symbols[i].st_name);
        if (name != NULL && elf->symbols[i].st_shndx == SHN_UNDEF && strncmp(name, "PMPI_", 5) == 0 &&
            qmpi_function_index(name + 1) >= 0) {
            patch[npatch++] = elf->symbols[i].st_name;
            marked[i] = 1;
        }
    }
    CHECK(npatch == 2);
    CHECK(qmpi_elf_shared_string(elf, patch, npatch, marked) == NULL);
    snprintf(copy, sizeof copy, "%s/%s", dir, copy_name);
    snprintf(command, sizeof command, "cp %s %s", source, copy);
    CHECK(system(command) == 0);
    fd = open(copy, O_WRONLY);
    CHECK(fd >= 0 && qmpi_elf_rename(fd, elf, patch, npatch, 'Y') == 0);
    close(fd);
    qmpi_elf_close(elf);
    CHECK(qmpi_elf_open(copy, renamed, why) == QMPI_NOT_PMPI);
}

static void renames_pmpi_imports_in_a_copy(void)
{
    struct qmpi_elf elf, renamed;
    char why[QMPI_WHY] = "";

    CHECK(qmpi_elf_open(pmpi_tool, &elf, why) == QMPI_NOT_PMPI && qmpi_elf_kind(&elf, why) == QMPI_IS_PMPI);
    rename_in_copy(&elf, pmpi_tool, "copy.so", &renamed);
    CHECK(symbol_state(&renamed, "YMPI_Send") == 0 && symbol_state(&renamed, "YMPI_Comm_rank") == 0);
    CHECK(symbol_state(&renamed, "PMPI_Send") == -1);
    CHECK(symbol_state(&renamed, "MPI_Send") == 1); /* its own definition, the tail of the name, intact */
    qmpi_elf_close(&renamed);
}

/* ---- crafted files: a built tool, cut short or with one field changed ---------------- */

struct image {
    unsigned char *data;
    size_t size;
};

static struct image load(const char *file)
{
    struct image im;
    FILE *in = fopen(file, "rb");
    CHECK(in != NULL);
    fseek(in, 0, SEEK_END);
    im.size = (size_t)ftell(in);
    rewind(in);
    im.data = malloc(im.size);
    CHECK(im.data != NULL && fread(im.data, 1, im.size, in) == im.size);
    fclose(in);
    return im;
}

/* Writes the first `size` bytes of `im` to dir/name; returns the path. */
static const char *save(const struct image *im, size_t size, const char *name)
{
    static char paths[8][512];
    static int next;
    char *path = paths[next++ % 8];
    FILE *out;

    snprintf(path, 512, "%s/%s", dir, name);
    out = fopen(path, "wb");
    CHECK(out != NULL && fwrite(im->data, 1, size, out) == size);
    fclose(out);
    return path;
}

static ElfW(Ehdr) * ehdr(const struct image *im)
{
    return (ElfW(Ehdr) *)im->data;
}

static ElfW(Phdr) * segment(const struct image *im, ElfW(Word) type, int nth)
{
    ElfW(Phdr) *ph = (ElfW(Phdr) *)(im->data + ehdr(im)->e_phoff);
    int i;
    for (i = 0; i < ehdr(im)->e_phnum; i++)
        if (ph[i].p_type == type && nth-- == 0)
            return &ph[i];
    return NULL;
}

/* The file offset of virtual address `vaddr` (through the PT_LOAD holding it). */
static size_t file_offset(const struct image *im, ElfW(Addr) vaddr)
{
    const ElfW(Phdr) * load;
    int k;
    for (k = 0; (load = segment(im, PT_LOAD, k)) != NULL; k++)
        if (vaddr >= load->p_vaddr && vaddr < load->p_vaddr + load->p_filesz)
            return load->p_offset + (vaddr - load->p_vaddr);
    CHECK(!"address in no loadable segment");
    return 0;
}

static ElfW(Dyn) * dynamic_entry(const struct image *im, ElfW(Sxword) tag)
{
    ElfW(Dyn) *d = (ElfW(Dyn) *)(im->data + segment(im, PT_DYNAMIC, 0)->p_offset);
    for (; d->d_tag != DT_NULL; d++)
        if (d->d_tag == tag)
            return d;
    return NULL;
}

static const char *kind_text(int kind)
{
    return kind == QMPI_IS_PMPI ? "a PMPI tool" : kind == QMPI_NOT_PMPI ? "not a PMPI tool" : "refused";
}

/* `file` is refused with a reason containing `expected`. */
static void refused_with(const char *file, const char *expected)
{
    char why[QMPI_WHY] = "";
    int kind = kind_of(file, why);
    if (kind != QMPI_REFUSED || strstr(why, expected) == NULL) {
        fprintf(stderr, "%s: %s \"%s\", expected refused with \"%s\"\n", file, kind_text(kind), why, expected);
        _exit(1);
    }
}

/* A tool cut short anywhere, before its last byte the loader reads or at its section
 * headers, is refused as truncated before anything maps it. */
static void refuses_truncated(const char *tool)
{
    struct image im = load(tool);
    const ElfW(Phdr) *last = segment(&im, PT_LOAD, 0), *p;
    size_t cuts[8], n = 0, i;
    int k;

    for (k = 0; (p = segment(&im, PT_LOAD, k)) != NULL; k++)
        last = p;
    cuts[n++] = 4;                                            /* the magic alone */
    cuts[n++] = 40;                                           /* inside the ELF header */
    cuts[n++] = ehdr(&im)->e_phoff + sizeof(ElfW(Phdr)) + 20; /* inside the program headers */
    cuts[n++] = segment(&im, PT_LOAD, 1)->p_offset + 100;     /* inside the second segment */
    cuts[n++] = last->p_offset + last->p_filesz - 1;          /* the last segment's last byte */
    cuts[n++] = segment(&im, PT_DYNAMIC, 0)->p_offset + 8;    /* inside the dynamic section */
    cuts[n++] = ehdr(&im)->e_shoff + sizeof(ElfW(Shdr)) * 2;  /* inside the section headers */
    cuts[n++] = im.size - 1;                                  /* one byte short */
    for (i = 0; i < n; i++) {
        char name[64];
        CHECK(cuts[i] < im.size);
        snprintf(name, sizeof name, "cut-%zu.so", cuts[i]);
        refused_with(save(&im, cuts[i], name), "file is truncated");
    }
    free(im.data);
}

static void refuses_a_truncated_pmpi_tool(void)
{
    refuses_truncated(pmpi_tool);
}

static void refuses_a_truncated_thesis_tool(void)
{
    refuses_truncated(thesis_tool);
}

/* The section headers cut off and forgotten in the ELF header (as `sstrip` leaves a
 * library): the loader needs none of them, and neither does the reader. */
static const char *without_section_headers(void)
{
    struct image im = load(pmpi_tool);
    size_t size = ehdr(&im)->e_shoff;
    const char *file;

    ehdr(&im)->e_shoff = 0;
    ehdr(&im)->e_shnum = 0;
    ehdr(&im)->e_shstrndx = 0;
    file = save(&im, size, "libnosections.so");
    free(im.data);
    return file;
}

static void reads_a_pmpi_tool_without_section_headers(void)
{
    struct qmpi_elf elf, renamed;
    char why[QMPI_WHY] = "";
    const char *file = without_section_headers();

    CHECK(qmpi_elf_open(file, &elf, why) == QMPI_NOT_PMPI);
    CHECK(qmpi_elf_kind(&elf, why) == QMPI_IS_PMPI);
    CHECK(symbol_state(&elf, "MPI_Send") == 1 && symbol_state(&elf, "PMPI_Send") == 0);
    rename_in_copy(&elf, file, "nosections-copy.so", &renamed);
    CHECK(symbol_state(&renamed, "YMPI_Send") == 0 && symbol_state(&renamed, "PMPI_Send") == -1);
    CHECK(symbol_state(&renamed, "MPI_Send") == 1);
    qmpi_elf_close(&renamed);
}

/* One dynamic entry of the PMPI tool set to `value`: refused as damaged. */
static void refuses_dynamic(ElfW(Sxword) tag, ElfW(Xword) value, const char *name)
{
    struct image im = load(pmpi_tool);
    ElfW(Dyn) *d = dynamic_entry(&im, tag);
    CHECK(d != NULL);
    d->d_un.d_val = value;
    refused_with(save(&im, im.size, name), "damaged");
    free(im.data);
}

static void refuses_corrupted_dynamic_entries(void)
{
    refuses_dynamic(DT_STRTAB, 0x7ffffff000, "strtab-out.so");
    refuses_dynamic(DT_STRSZ, 0x7ffffff000, "strsz-huge.so");
    refuses_dynamic(DT_SYMTAB, 0x7ffffff000, "symtab-out.so");
    refuses_dynamic(DT_SYMTAB, 3, "symtab-misaligned.so");
    refuses_dynamic(DT_SYMENT, 7, "syment.so");
    refuses_dynamic(DT_GNU_HASH, 0x7ffffff000, "gnu-hash-out.so");
    refuses_dynamic(DT_RELA, 0x7ffffff000, "rela-out.so");
    refuses_dynamic(DT_RELASZ, 0x7ffffff000, "relasz-huge.so");
    refuses_dynamic(DT_RELAENT, 12, "relaent.so");
    refuses_dynamic(DT_JMPREL, 0x7ffffff000, "jmprel-out.so");
    refuses_dynamic(DT_PLTRELSZ, 0x7ffffff000, "pltrelsz-huge.so");
    refuses_dynamic(DT_NEEDED, 0x7ffffff000, "needed-out.so");
    refuses_dynamic(DT_VERNEED, 0x7ffffff000, "verneed-out.so");
    refuses_dynamic(DT_VERSYM, 0x7ffffff000, "versym-out.so");
    refuses_dynamic(DT_INIT_ARRAY, 0x7ffffff000, "init-array-out.so");
    refuses_dynamic(DT_INIT_ARRAYSZ, 0x7ffffff000, "init-arraysz-huge.so");
}

/* The GNU hash table's header: nbuckets, symoffset, bloom words, shift. */
static void refuses_gnu_hash(int word, uint32_t value, const char *name)
{
    struct image im = load(pmpi_tool);
    uint32_t *hash = (uint32_t *)(im.data + file_offset(&im, dynamic_entry(&im, DT_GNU_HASH)->d_un.d_ptr));
    hash[word] = value;
    refused_with(save(&im, im.size, name), "damaged");
    free(im.data);
}

static void refuses_a_damaged_gnu_hash_table(void)
{
    refuses_gnu_hash(0, 0, "gnu-hash-no-buckets.so");       /* the loader divides by it */
    refuses_gnu_hash(0, 0x40000000, "gnu-hash-buckets.so"); /* beyond the file */
    refuses_gnu_hash(2, 3, "gnu-hash-bloom.so");            /* not a power of two: the loader asserts */
    refuses_gnu_hash(1, 0x40000000, "gnu-hash-symoffset.so");
}

/* The first relocation of DT_RELA (or DT_JMPREL) with its target or symbol changed. */
static void refuses_relocation(ElfW(Sxword) table, int field, ElfW(Xword) value, const char *name)
{
    struct image im = load(pmpi_tool);
    ElfW(Rela) *r = (ElfW(Rela) *)(im.data + file_offset(&im, dynamic_entry(&im, table)->d_un.d_ptr));
    if (field == 0)
        r->r_offset = value;
    else if (value == 0)
        r->r_info = 0; /* R_*_NONE */
    else
        r->r_info = ELF64_R_INFO(value, ELF64_R_TYPE(r->r_info));
    refused_with(save(&im, im.size, name), "damaged");
    free(im.data);
}

static void refuses_corrupted_relocations(void)
{
    refuses_relocation(DT_RELA, 0, 0x7ffffff000, "rela-target-out.so");
    refuses_relocation(DT_RELA, 0, 0, "rela-target-read-only.so"); /* the ELF header's page */
    refuses_relocation(DT_JMPREL, 0, 0x7ffffff000, "jmprel-target-out.so");
    refuses_relocation(DT_JMPREL, 1, 0xffffff, "jmprel-symbol-out.so");
}

/* vn_next of the first version requirement: a misaligned or out-of-file next entry. */
static void refuses_verneed_next(ElfW(Word) value, const char *name)
{
    struct image im = load(pmpi_tool);
    ElfW(Verneed) *need = (ElfW(Verneed) *)(im.data + file_offset(&im, dynamic_entry(&im, DT_VERNEED)->d_un.d_ptr));
    need->vn_next = value;
    refused_with(save(&im, im.size, name), "damaged");
    free(im.data);
}

static void refuses_a_bad_vn_next(void)
{
    refuses_verneed_next(3, "vn-next-misaligned.so");
    refuses_verneed_next(0x40000000, "vn-next-out.so");
}

/* The first version definition's vd_next, or its first name. */
static void refuses_verdef(int field, ElfW(Word) value, const char *name)
{
    struct image im = load(verdef_tool);
    ElfW(Verdef) *def = (ElfW(Verdef) *)(im.data + file_offset(&im, dynamic_entry(&im, DT_VERDEF)->d_un.d_ptr));
    if (field == 0)
        def->vd_next = value;
    else
        ((ElfW(Verdaux) *)((unsigned char *)def + def->vd_aux))->vda_name = value;
    refused_with(save(&im, im.size, name), "damaged");
    free(im.data);
}

static void refuses_bad_version_definitions(void)
{
    char why[QMPI_WHY] = "";
    CHECK(kind_of(verdef_tool, why) == QMPI_IS_PMPI);
    refuses_verdef(0, 2, "vd-next-misaligned.so");
    refuses_verdef(0, 0x40000000, "vd-next-out.so");
    refuses_verdef(1, 0x40000000, "vda-name-out.so");
}

static void refuses_damaged_program_headers(void)
{
    struct image im = load(pmpi_tool);
    ElfW(Phdr) *dyn = segment(&im, PT_DYNAMIC, 0), saved = *dyn;

    dyn->p_vaddr = 0x7ffffff000; /* the loader reads the dynamic section there */
    refused_with(save(&im, im.size, "dynamic-vaddr.so"), "damaged");
    *dyn = saved;
    segment(&im, PT_LOAD, 1)->p_filesz = segment(&im, PT_LOAD, 1)->p_memsz + 4096;
    refused_with(save(&im, im.size, "filesz.so"), "damaged");
    free(im.data);
    im = load(pmpi_tool);
    ehdr(&im)->e_phentsize = 3;
    refused_with(save(&im, im.size, "phentsize.so"), "damaged");
    free(im.data);
    im = load(pmpi_tool); /* the loader would make other mappings' pages read-only */
    segment(&im, PT_GNU_RELRO, 0)->p_memsz = 0x7fffffff;
    refused_with(save(&im, im.size, "relro.so"), "damaged");
    free(im.data);
    im = load(pmpi_tool); /* the loader takes the last dynamic segment */
    segment(&im, PT_GNU_STACK, 0)->p_type = PT_DYNAMIC;
    refused_with(save(&im, im.size, "two-dynamic.so"), "damaged");
    free(im.data);
    im = load(pmpi_tool); /* the headers and tables in a segment mapped PROT_NONE */
    segment(&im, PT_LOAD, 0)->p_flags = 0;
    refused_with(save(&im, im.size, "unreadable.so"), "damaged");
    free(im.data);
}

/* What glibc's loader asserts on (it ends the process with "Inconsistency detected"). */
static void refuses_what_the_loader_asserts(void)
{
    struct image im = load(pmpi_tool);
    ElfW(Verneed) *need = (ElfW(Verneed) *)(im.data + file_offset(&im, dynamic_entry(&im, DT_VERNEED)->d_un.d_ptr));
    need->vn_file += 3; /* "c.so.6": no library it needs */
    refused_with(save(&im, im.size, "vn-file.so"), "damaged");
    free(im.data);
    refuses_dynamic(DT_PLTREL, DT_REL, "pltrel-rel.so");
    refuses_relocation(DT_RELA, 1, 0, "relacount-none.so"); /* the first of DT_RELACOUNT: R_*_NONE */
}

/* The loader calls every initializer slot: never the ELF header's bytes, never code
 * nobody relocated to. */
static void refuses_initializers_outside_code(void)
{
    refuses_dynamic(DT_INIT_ARRAY, 0, "init-array-at-header.so");
    refuses_dynamic(DT_FINI_ARRAY, 8, "fini-array-at-header.so");
}

/* Libraries of the system, as built by real linkers: none is refused. */
static void accepts_system_libraries(void)
{
    static const char *const libraries[] = {"libc.so.6", "libm.so.6",      "libstdc++.so.6",      "libgcc_s.so.1",
                                            "libz.so.1", "libcrypto.so.3", "libpython3.11.so.1.0"};
    static const char *const dirs[] = {"/lib/x86_64-linux-gnu", "/lib/aarch64-linux-gnu", "/lib/powerpc64le-linux-gnu",
                                       "/lib64"};
    size_t i, d, found = 0;

    for (i = 0; i < sizeof libraries / sizeof *libraries; i++)
        for (d = 0; d < sizeof dirs / sizeof *dirs; d++) {
            char file[512], why[QMPI_WHY] = "";
            snprintf(file, sizeof file, "%s/%s", dirs[d], libraries[i]);
            if (access(file, R_OK) != 0)
                continue;
            found++;
            if (kind_of(file, why) == QMPI_REFUSED) {
                fprintf(stderr, "%s: refused: %s\n", file, why);
                _exit(1);
            }
        }
    CHECK(found > 0);
}

/* The private copy holds what the loader reads and the symbols, not the file's holes
 * nor its debug information; it loads, and readers see its functions. */
static void copies_what_the_loader_reads(void)
{
    struct qmpi_elf elf;
    char why[QMPI_WHY] = "", sparse[600], copy[600], command[1400];
    struct stat st;
    void *handle;
    int fd;

    snprintf(sparse, sizeof sparse, "%s/libsparse.so", dir);
    snprintf(command, sizeof command, "cp %s %s && truncate -s 600M %s", debug_tool, sparse, sparse);
    CHECK(system(command) == 0);
    CHECK(qmpi_elf_open(sparse, &elf, why) == QMPI_NOT_PMPI && qmpi_elf_kind(&elf, why) == QMPI_IS_PMPI);
    snprintf(copy, sizeof copy, "%s/libsparse-copy.so", dir);
    fd = open(copy, O_RDWR | O_CREAT | O_TRUNC, 0700);
    CHECK(fd >= 0 && qmpi_elf_copy(&elf, fd) == 0);
    CHECK(fstat(fd, &st) == 0 && st.st_size == 600 << 20);
    CHECK(st.st_blocks * 512 < 64 << 10); /* the loadable bytes and symbols: a few pages */
    close(fd);
    qmpi_elf_close(&elf);
    handle = dlopen(copy, RTLD_LAZY | RTLD_LOCAL);
    CHECK(handle != NULL && dlsym(handle, "MPI_Send") != NULL);
    dlclose(handle);
    /* The symbol table is there for debuggers; the debug information is marked absent. */
    snprintf(command, sizeof command,
             "readelf -sW %s | grep -q ' MPI_Send$' && readelf -SW %s | grep ' .debug_info ' | grep -q NOBITS", copy,
             copy);
    CHECK(system(command) == 0);
}

static void finds_a_tool_in_ld_library_path(void)
{
    char file[600];
    setenv("LD_LIBRARY_PATH", dir, 1);
    CHECK(qmpi_tool_file("libpmpi.so", file, sizeof file));
    CHECK(strcmp(file, pmpi_tool) == 0);
    CHECK(!qmpi_tool_file("libnothing.so", file, sizeof file));
    CHECK(qmpi_tool_file("./x/libnothing.so", file, sizeof file) && strcmp(file, "./x/libnothing.so") == 0);
}

int main(void)
{
    const char *mpi = "int PMPI_Send(const void *, int, int, int, int, int);\n"
                      "int PMPI_Comm_rank(int, int *);\n"
                      "char *getenv(const char *);\n" /* a versioned import: a version requirement */
                      "int MPI_Send(const void *b, int c, int d, int e, int t, int m)\n"
                      "{ int r; PMPI_Comm_rank(m, &r); return PMPI_Send(b, c, d, e, t + !!getenv(\"T\"), m); }\n";

    if (mkdtemp(dir) == NULL)
        return 2;
    pmpi_tool = build("libpmpi.so", "-shared -fPIC", mpi);
    debug_tool = build("libpmpidebug.so", "-shared -fPIC -g -Wl,-z,undefs", mpi);
    {
        char map[600], flags[700];
        FILE *out;
        snprintf(map, sizeof map, "%s/versions.map", dir);
        out = fopen(map, "w");
        fputs("V_1 { global: MPI_Send; local: *; };\nV_2 { global: getenv_count; } V_1;\n", out);
        fclose(out);
        snprintf(flags, sizeof flags, "-shared -fPIC -Wl,--version-script=%s", map);
        verdef_tool = build("libverdef.so", flags, mpi);
    }
    thesis_tool = build("libthesis.so", "-shared -fPIC",
                        "char *get_interceptions(int i) { (void)i; return 0; }\nint MPI_Send(void) { return 0; }\n");
    {
        /* An MPI library defines the PMPI_ function of every MPI function
         * (QMPI_MPI_LIBRARY_PMPI of them at least); a tool only what it wraps. */
        static char source[QMPI_MPI_LIBRARY_PMPI * 64 + 256];
        size_t used = (size_t)snprintf(source, sizeof source, "int PMPI_Send(void) { return 0; }\n"
                                                               "int MPI_Send(void) { return PMPI_Send(); }\n");
        for (int k = 1; k < QMPI_MPI_LIBRARY_PMPI; k++)
            used += (size_t)snprintf(source + used, sizeof source - used, "int PMPI_Function_%d(void) { return %d; }\n",
                                     k, k);
        mpi_library = build("libfakempi.so", "-shared -fPIC", source);
    }
    aliasing_tool = build("libaliases.so", "-shared -fPIC",
                          "int PMPI_Comm_rank(int, int *);\n"
                          "int wrap_Send(void) { int r; return PMPI_Comm_rank(0, &r); }\n"
                          "int MPI_Send(void) __attribute__((alias(\"wrap_Send\")));\n"
                          "int PMPI_Send(void) __attribute__((alias(\"wrap_Send\")));\n");
    object_file = build("tool.o", "-c -fPIC", mpi);
    executable = build("app", "-pie -fPIE", "int main(void) { return 0; }\nint MPI_Send(void) { return 0; }\n");

    check_case("recognizes a PMPI tool", recognizes_a_pmpi_tool, NULL);
    check_case("a thesis-style tool is no PMPI tool", a_thesis_tool_is_no_pmpi_tool, NULL);
    check_case("refuses an MPI library", refuses_an_mpi_library, NULL);
    check_case("a tool defining a few PMPI_ functions is a PMPI tool", a_tool_defining_a_few_pmpi_functions_is_a_pmpi_tool,
               NULL);
    check_case("tells C PMPI_ names", tells_c_pmpi_names, NULL);
    check_case("refuses an object file", refuses_an_object_file, NULL);
    check_case("refuses an executable", refuses_an_executable, NULL);
    check_case("refuses text, short files and devices", refuses_text_and_short_files, NULL);
    check_case("a missing file is left to dlopen", a_missing_file_is_left_to_dlopen, NULL);
    check_case("renames PMPI_ imports in a copy", renames_pmpi_imports_in_a_copy, NULL);
    check_case("finds a tool in LD_LIBRARY_PATH", finds_a_tool_in_ld_library_path, NULL);
    check_case("refuses a truncated PMPI tool", refuses_a_truncated_pmpi_tool, NULL);
    check_case("refuses a truncated thesis-style tool", refuses_a_truncated_thesis_tool, NULL);
    check_case("reads a PMPI tool without section headers", reads_a_pmpi_tool_without_section_headers, NULL);
    check_case("refuses corrupted dynamic entries", refuses_corrupted_dynamic_entries, NULL);
    check_case("refuses a damaged GNU hash table", refuses_a_damaged_gnu_hash_table, NULL);
    check_case("refuses corrupted relocations", refuses_corrupted_relocations, NULL);
    check_case("refuses a bad vn_next", refuses_a_bad_vn_next, NULL);
    check_case("refuses damaged program headers", refuses_damaged_program_headers, NULL);
    check_case("refuses bad version definitions", refuses_bad_version_definitions, NULL);
    check_case("refuses what the loader asserts", refuses_what_the_loader_asserts, NULL);
    check_case("refuses initializers outside code", refuses_initializers_outside_code, NULL);
    check_case("accepts the system's libraries", accepts_system_libraries, NULL);
    check_case("copies what the loader reads", copies_what_the_loader_reads, NULL);
    return check_summary();
}
