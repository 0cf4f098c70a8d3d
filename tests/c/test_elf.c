/* elf.c: recognizing a PMPI tool from its dynamic symbols, refusing what is no shared
 * object, and renaming PMPI_ imports in a copy. The inputs are built here with $CC. */
#include "../../qmpigen/runtime/qmpi_runtime.h"
#include "check.h"

#include <fcntl.h>

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

static const char *pmpi_tool, *thesis_tool, *mpi_library, *object_file, *executable;

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
    refuses(check_file("\177ELF"), "not a regular file of an ELF header's size");
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

static void renames_pmpi_imports_in_a_copy(void)
{
    struct qmpi_elf elf, renamed;
    size_t patch[16], npatch = 0, i;
    unsigned char marked[4096] = {0};
    char why[QMPI_WHY] = "", copy[600], command[1300];
    int fd;

    CHECK(qmpi_elf_open(pmpi_tool, &elf, why) == QMPI_NOT_PMPI && qmpi_elf_kind(&elf, why) == QMPI_IS_PMPI);
    CHECK(elf.nsymbols < sizeof marked);
    for (i = 1; i < elf.nsymbols; i++) {
        const char *name = qmpi_elf_string(&elf, elf.symbols[i].st_name);
        if (name != NULL && elf.symbols[i].st_shndx == SHN_UNDEF && strncmp(name, "PMPI_", 5) == 0 &&
            qmpi_function_index(name + 1) >= 0) {
            patch[npatch++] = elf.symbols[i].st_name;
            marked[i] = 1;
        }
    }
    CHECK(npatch == 2); /* PMPI_Send, PMPI_Comm_rank */
    CHECK(qmpi_elf_shared_string(&elf, patch, npatch, marked) == NULL);
    snprintf(copy, sizeof copy, "%s/copy.so", dir);
    snprintf(command, sizeof command, "cp %s %s", pmpi_tool, copy);
    CHECK(system(command) == 0);
    fd = open(copy, O_WRONLY);
    CHECK(fd >= 0 && qmpi_elf_rename(fd, &elf, patch, npatch, 'Y') == 0);
    close(fd);
    qmpi_elf_close(&elf);

    CHECK(qmpi_elf_open(copy, &renamed, why) == QMPI_NOT_PMPI);
    CHECK(symbol_state(&renamed, "YMPI_Send") == 0 && symbol_state(&renamed, "YMPI_Comm_rank") == 0);
    CHECK(symbol_state(&renamed, "PMPI_Send") == -1);
    CHECK(symbol_state(&renamed, "MPI_Send") == 1); /* its own definition, the tail of the name, intact */
    qmpi_elf_close(&renamed);
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
                      "int MPI_Send(const void *b, int c, int d, int e, int t, int m)\n"
                      "{ int r; PMPI_Comm_rank(m, &r); return PMPI_Send(b, c, d, e, t, m); }\n";

    if (mkdtemp(dir) == NULL)
        return 2;
    pmpi_tool = build("libpmpi.so", "-shared -fPIC", mpi);
    thesis_tool = build("libthesis.so", "-shared -fPIC",
                        "char *get_interceptions(int i) { (void)i; return 0; }\nint MPI_Send(void) { return 0; }\n");
    mpi_library = build("libfakempi.so", "-shared -fPIC",
                        "int PMPI_Send(void) { return 0; }\nint MPI_Send(void) { return PMPI_Send(); }\n");
    object_file = build("tool.o", "-c -fPIC", mpi);
    executable = build("app", "-pie -fPIE", "int main(void) { return 0; }\nint MPI_Send(void) { return 0; }\n");

    check_case("recognizes a PMPI tool", recognizes_a_pmpi_tool, NULL);
    check_case("a thesis-style tool is no PMPI tool", a_thesis_tool_is_no_pmpi_tool, NULL);
    check_case("refuses an MPI library", refuses_an_mpi_library, NULL);
    check_case("refuses an object file", refuses_an_object_file, NULL);
    check_case("refuses an executable", refuses_an_executable, NULL);
    check_case("refuses text, short files and devices", refuses_text_and_short_files, NULL);
    check_case("a missing file is left to dlopen", a_missing_file_is_left_to_dlopen, NULL);
    check_case("renames PMPI_ imports in a copy", renames_pmpi_imports_in_a_copy, NULL);
    check_case("finds a tool in LD_LIBRARY_PATH", finds_a_tool_in_ld_library_path, NULL);
    return check_summary();
}
