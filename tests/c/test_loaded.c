/* loaded.c: reading loaded objects in memory, and re-pointing a loaded library's
 * references to a symbol (GOT slots, PLT slots, data words), RELRO pages included. The
 * library is built here with $CC, with and without lazy binding and -fno-plt. */
#define _GNU_SOURCE
#include "../../qmpigen/runtime/qmpi_runtime.h"
#include "check.h"

#include <dlfcn.h>
#include <link.h>

static char dir[] = "/tmp/qmpi-loaded-XXXXXX";

static const char *build(const char *name, const char *flags, const char *source)
{
    static char paths[4][512];
    static int next;
    char command[2048], *path = paths[next++ % 4];
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

/* A library that calls getpid, takes its address into data and a GOT slot. */
static const char *library_source = "#include <unistd.h>\n"
                                    "pid_t (*const in_data)(void) = getpid;\n"
                                    "pid_t by_call(void) { return getpid(); }\n"
                                    "pid_t by_pointer(void) { pid_t (*volatile p)(void) = getpid; return p(); }\n"
                                    "pid_t by_data(void) { return in_data(); }\n";
static const char *lazy, *now, *noplt;

static pid_t not_getpid(void)
{
    return -42;
}

static void *to_not_getpid(const char *name, const ElfW(Sym) * symbol, void *data)
{
    (void)symbol;
    ++*(int *)data;
    return strcmp(name, "getpid") == 0 ? (void *)not_getpid : NULL;
}

static void rebinds(const char *file)
{
    void *handle = dlopen(file, RTLD_NOW | RTLD_LOCAL);
    pid_t (*by_call)(void), (*by_pointer)(void), (*by_data)(void);
    struct link_map *map;
    struct qmpi_object object;
    char why[QMPI_WHY] = "";
    int asked = 0;

    CHECK(handle != NULL && dlinfo(handle, RTLD_DI_LINKMAP, &map) == 0);
    *(void **)&by_call = dlsym(handle, "by_call");
    *(void **)&by_pointer = dlsym(handle, "by_pointer");
    *(void **)&by_data = dlsym(handle, "by_data");
    CHECK(by_call() == getpid() && by_pointer() == getpid() && by_data() == getpid());
    CHECK(qmpi_loaded_at(map->l_ld, &object) == 0);
    CHECK(object.nsymbols > 4 && qmpi_loaded_lookup(&object, "by_call") == (void *)by_call);
    CHECK(qmpi_loaded_rebind(&object, to_not_getpid, &asked, why) == 0);
    CHECK(asked > 0);
    CHECK(by_call() == -42 && by_pointer() == -42 && by_data() == -42);
}

static void rebinds_lazy(void)
{
    rebinds(lazy);
}

static void rebinds_bound_now_with_relro(void)
{
    rebinds(now);
}

static void rebinds_without_plt(void)
{
    rebinds(noplt);
}

static int count_libc(struct dl_phdr_info *info, size_t size, void *data)
{
    struct qmpi_object object;

    (void)size;
    if (info->dlpi_name == NULL || strstr(info->dlpi_name, "libc.so") == NULL || qmpi_loaded_read(info, &object) != 0)
        return 0;
    *(void **)data = qmpi_loaded_lookup(&object, "getenv");
    return 1;
}

/* What the reader finds is what the dynamic linker finds. */
static void reads_the_c_library_as_the_loader_does(void)
{
    void *found = NULL;
    CHECK(dl_iterate_phdr(count_libc, &found) == 1);
    CHECK(found != NULL && found == dlsym(RTLD_DEFAULT, "getenv"));
}

static void finds_no_object_outside_every_one(void)
{
    struct qmpi_object object;
    CHECK(qmpi_loaded_at((void *)16, &object) != 0);
}

int main(void)
{
    if (mkdtemp(dir) == NULL)
        return 2;
    lazy = build("liblazy.so", "-shared -fPIC -O1 -Wl,-z,lazy -Wl,-z,norelro", library_source);
    now = build("libnow.so", "-shared -fPIC -O1 -Wl,-z,now -Wl,-z,relro", library_source);
    noplt = build("libnoplt.so", "-shared -fPIC -O1 -fno-plt -Wl,-z,now -Wl,-z,relro", library_source);
    check_case("rebinds a lazily bound library", rebinds_lazy, NULL);
    check_case("rebinds a library bound at load, its GOT read-only", rebinds_bound_now_with_relro, NULL);
    check_case("rebinds a library built without PLT", rebinds_without_plt, NULL);
    check_case("reads the C library as the loader does", reads_the_c_library_as_the_loader_does, NULL);
    check_case("finds no object outside every one", finds_no_object_outside_every_one, NULL);
    printf("%d passed, %d failed\n", check_passed, check_failed);
    return check_failed != 0;
}
