/* pmpi_load.c - make an unmodified PMPI tool one level of a QMPI chain, at load time.
 *
 * 1. Read the tool's ELF file (mmap, <elf.h>): classify it, find its dynamic symbols.
 * 2. Copy it into a memfd (its own file: dlopen's same-file check keys on the inode,
 *    so every copy -- also of the same tool -- gets its own globals).
 * 3. In the copy's .dynstr, change the first byte of every UNDEFINED "PMPI_X" name whose
 *    X the core intercepts: "PMPI_X" -> "XMPI_X". Same length, nothing moves. Only the
 *    first byte changes, so names the linker tail-merged into it ("MPI_X" = "PMPI_X"+1,
 *    the tool's own definitions) stay intact; GNU hash tables cover only defined symbols
 *    and lookups never match undefined ones, so no hash needs updating.
 * 4. dlopen("/proc/<pid>/fd/<memfd>", RTLD_NOW | RTLD_LOCAL): ld.so binds the renamed
 *    imports to the core's XMPI_X (global scope first), the tool's own MPI_X calls to the
 *    entry wrappers (global scope: app / libqmpi), and its definitions stay private.
 * 5. Its MPI_X definitions (base + st_value, no dlsym: dlsym on a RTLD_LOCAL handle
 *    would fall through to libmpi for names the tool does not define) are the wrappers.
 */
#define _GNU_SOURCE
#include "pmpi_load.h"
#include <dlfcn.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/sendfile.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#if defined(__x86_64__)
#define QM_MACHINE EM_X86_64
#elif defined(__aarch64__)
#define QM_MACHINE EM_AARCH64
#elif defined(__powerpc64__)
#define QM_MACHINE EM_PPC64
#else
#error "add this architecture's EM_ value"
#endif

struct scan {
  const unsigned char *img;
  size_t size;
  const ElfW(Ehdr) *eh;
  const ElfW(Sym) *sym;
  size_t nsym;
  const char *str;   /* .dynstr */
  size_t stroff;     /* its file offset */
  size_t strsz;
  const ElfW(Dyn) *dyn;
  size_t ndyn;
  const ElfW(Shdr) *verneed, *verdef;
  int symbolic;
};

static int fail(char *why, size_t n, const char *fmt, ...)
{
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(why, n, fmt, ap);
  va_end(ap);
  return -1;
}

static int in_file(const struct scan *s, size_t off, size_t len)
{
  return off <= s->size && len <= s->size - off;
}

static const char *dynstr(const struct scan *s, size_t off)
{
  return off < s->strsz && memchr(s->str + off, 0, s->strsz - off) ? s->str + off : NULL;
}

/* Checks the header and finds .dynsym/.dynstr/.dynamic. */
static int scan_elf(struct scan *s, char *why, size_t n)
{
  const ElfW(Ehdr) *eh = (const ElfW(Ehdr) *)s->img;
  const ElfW(Shdr) *sh;
  int i;

  if (s->size < sizeof *eh || memcmp(eh->e_ident, ELFMAG, SELFMAG) != 0)
    return fail(why, n, "not an ELF file");
  if (eh->e_ident[EI_CLASS] != (sizeof(void *) == 8 ? ELFCLASS64 : ELFCLASS32) || eh->e_machine != QM_MACHINE)
    return fail(why, n, "built for another architecture (ELF class %d, machine %d)", eh->e_ident[EI_CLASS],
                eh->e_machine);
  if (eh->e_type == ET_REL)
    return fail(why, n, "an object file, not a shared object: link it with -shared");
  if (eh->e_type != ET_DYN)
    return fail(why, n, "not a shared object (ELF type %d, an executable?)", eh->e_type);
  if (eh->e_shoff == 0 || eh->e_shentsize != sizeof *sh || !in_file(s, eh->e_shoff, (size_t)eh->e_shnum * sizeof *sh))
    return fail(why, n, "no section headers (stripped with sstrip?)");
  s->eh = eh;
  sh = (const ElfW(Shdr) *)(s->img + eh->e_shoff);
  for (i = 0; i < eh->e_shnum; i++) {
    if (!in_file(s, sh[i].sh_offset, sh[i].sh_type == SHT_NOBITS ? 0 : sh[i].sh_size))
      return fail(why, n, "section %d lies outside the file", i);
    if (sh[i].sh_type == SHT_DYNSYM && sh[i].sh_link < eh->e_shnum) {
      const ElfW(Shdr) *st = &sh[sh[i].sh_link];
      if (!in_file(s, st->sh_offset, st->sh_size) || st->sh_size == 0 || s->img[st->sh_offset + st->sh_size - 1])
        return fail(why, n, "bad .dynstr");
      s->sym = (const ElfW(Sym) *)(s->img + sh[i].sh_offset);
      s->nsym = sh[i].sh_size / sizeof(ElfW(Sym));
      s->str = (const char *)s->img + st->sh_offset;
      s->stroff = st->sh_offset;
      s->strsz = st->sh_size;
    } else if (sh[i].sh_type == SHT_DYNAMIC) {
      s->dyn = (const ElfW(Dyn) *)(s->img + sh[i].sh_offset);
      s->ndyn = sh[i].sh_size / sizeof(ElfW(Dyn));
    } else if (sh[i].sh_type == SHT_GNU_verneed) {
      s->verneed = &sh[i];
    } else if (sh[i].sh_type == SHT_GNU_verdef) {
      s->verdef = &sh[i];
    }
  }
  if (s->sym == NULL || s->dyn == NULL)
    return fail(why, n, "no dynamic symbol table: not a shared library");
  for (i = 0; (size_t)i < s->ndyn && s->dyn[i].d_tag != DT_NULL; i++) {
    if (s->dyn[i].d_tag == DT_FLAGS_1 && (s->dyn[i].d_un.d_val & DF_1_PIE))
      return fail(why, n, "a position-independent executable, not a shared library");
    if (s->dyn[i].d_tag == DT_SYMBOLIC || (s->dyn[i].d_tag == DT_FLAGS && (s->dyn[i].d_un.d_val & DF_SYMBOLIC)))
      s->symbolic = 1;
  }
  return 0;
}

/* An MPI function this core intercepts, defined here as a function? */
static int defined_mpi(const struct scan *s, const ElfW(Sym) *y, const char *name, qm_index_fn index)
{
  int t = ELF64_ST_TYPE(y->st_info);
  (void)s;
  return y->st_shndx != SHN_UNDEF && (t == STT_FUNC || t == STT_GNU_IFUNC) &&
         ELF64_ST_BIND(y->st_info) != STB_LOCAL && strncmp(name, "MPI_", 4) == 0 && index(name + 4) >= 0;
}

static int tool_kind(const struct scan *s, qm_index_fn index)
{
  int kind = QM_NOT_A_TOOL;
  size_t i;
  for (i = 1; i < s->nsym; i++) {
    const char *name = dynstr(s, s->sym[i].st_name);
    if (name == NULL)
      continue;
    if (s->sym[i].st_shndx != SHN_UNDEF && strcmp(name, "get_interceptions") == 0)
      return QM_NATIVE_TOOL; /* (the mini core's spelling is qm_get_wrapper) */
    if (s->sym[i].st_shndx != SHN_UNDEF && strcmp(name, "qm_get_wrapper") == 0)
      return QM_NATIVE_TOOL;
    if (defined_mpi(s, &s->sym[i], name, index))
      kind = QM_PMPI_TOOL;
  }
  return kind;
}

static int map_file(const char *path, struct scan *s, int *fd, char *why, size_t n)
{
  struct stat st;
  memset(s, 0, sizeof *s);
  *fd = open(path, O_RDONLY | O_CLOEXEC);
  if (*fd < 0)
    return fail(why, n, "cannot open: %s", strerror(errno));
  if (fstat(*fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size < (off_t)sizeof(ElfW(Ehdr))) {
    close(*fd);
    return fail(why, n, "not an ELF file (not a regular file of ELF size)");
  }
  s->size = (size_t)st.st_size;
  s->img = mmap(NULL, s->size, PROT_READ, MAP_PRIVATE, *fd, 0);
  if (s->img == MAP_FAILED) {
    close(*fd);
    return fail(why, n, "cannot map: %s", strerror(errno));
  }
  return 0;
}

enum qm_tool_kind qm_classify(const char *path, qm_index_fn index, char *why, size_t n)
{
  struct scan s;
  int fd, kind = -1;
  if (map_file(path, &s, &fd, why, n) != 0)
    return -1;
  if (scan_elf(&s, why, n) == 0) {
    kind = tool_kind(&s, index);
    if (kind == QM_NOT_A_TOOL)
      fail(why, n, "neither a QMPI tool (no get_interceptions) nor a PMPI tool (defines none of the MPI "
                   "functions this core intercepts)");
  }
  munmap((void *)s.img, s.size);
  close(fd);
  return kind;
}

/* Would changing byte `p` of .dynstr alter a name other than the one starting at p?
 * Every user of .dynstr: symbols, the dynamic section's strings, version strings. */
static int shares(const struct scan *s, const size_t *patch, int npatch, size_t start, int own)
{
  size_t len;
  int k;
  const char *t = dynstr(s, start);
  if (t == NULL)
    return 0;
  len = strlen(t);
  for (k = 0; k < npatch; k++)
    if (patch[k] >= start && patch[k] < start + len && !(own && patch[k] == start))
      return 1;
  return 0;
}

static int check_shared_strings(const struct scan *s, const size_t *patch, const char *own_flag, int npatch,
                                const char **culprit)
{
  size_t i;
  const unsigned char *p, *end;
  for (i = 1; i < s->nsym; i++)
    if (shares(s, patch, npatch, s->sym[i].st_name, own_flag[i])) {
      *culprit = dynstr(s, s->sym[i].st_name);
      return 1;
    }
  for (i = 0; i < s->ndyn && s->dyn[i].d_tag != DT_NULL; i++) {
    ElfW(Sxword) t = s->dyn[i].d_tag;
    if ((t == DT_NEEDED || t == DT_SONAME || t == DT_RPATH || t == DT_RUNPATH || t == DT_AUXILIARY ||
         t == DT_FILTER) && shares(s, patch, npatch, s->dyn[i].d_un.d_val, 0)) {
      *culprit = dynstr(s, s->dyn[i].d_un.d_val);
      return 1;
    }
  }
  if (s->verneed) { /* Verneed: vn_file, then Vernaux: vna_name */
    p = s->img + s->verneed->sh_offset;
    end = p + s->verneed->sh_size;
    while (p + sizeof(ElfW(Verneed)) <= end) {
      const ElfW(Verneed) *vn = (const void *)p;
      const unsigned char *a = p + vn->vn_aux;
      int k;
      if (shares(s, patch, npatch, vn->vn_file, 0))
        return *culprit = "a version requirement", 1;
      for (k = 0; k < vn->vn_cnt && a + sizeof(ElfW(Vernaux)) <= end; k++) {
        const ElfW(Vernaux) *va = (const void *)a;
        if (shares(s, patch, npatch, va->vna_name, 0))
          return *culprit = "a version name", 1;
        if (!va->vna_next)
          break;
        a += va->vna_next;
      }
      if (!vn->vn_next)
        break;
      p += vn->vn_next;
    }
  }
  if (s->verdef) { /* Verdef -> Verdaux: vda_name */
    p = s->img + s->verdef->sh_offset;
    end = p + s->verdef->sh_size;
    while (p + sizeof(ElfW(Verdef)) <= end) {
      const ElfW(Verdef) *vd = (const void *)p;
      const unsigned char *a = p + vd->vd_aux;
      int k;
      for (k = 0; k < vd->vd_cnt && a + sizeof(ElfW(Verdaux)) <= end; k++) {
        const ElfW(Verdaux) *va = (const void *)a;
        if (shares(s, patch, npatch, va->vda_name, 0))
          return *culprit = "a version definition", 1;
        if (!va->vda_next)
          break;
        a += va->vda_next;
      }
      if (!vd->vd_next)
        break;
      p += vd->vd_next;
    }
  }
  return 0;
}

/* A private file holding the image: memfd, else an unlinked temporary file. */
static int private_copy(const char *path, int src, size_t size, char *tmpname, size_t tmplen)
{
  const char *base = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
  off_t off = 0;
  int fd = -1;
  tmpname[0] = '\0';
#ifdef MFD_EXEC
  fd = memfd_create(base, MFD_CLOEXEC | MFD_EXEC); /* vm.memfd_noexec=2 needs MFD_EXEC */
#endif
  if (fd < 0)
    fd = memfd_create(base, MFD_CLOEXEC);
  if (fd < 0) { /* no memfd (old kernel, seccomp): a temp file on an exec-mountable fs */
    const char *dir = getenv("TMPDIR");
    snprintf(tmpname, tmplen, "%s/qmpi-%s-XXXXXX", dir && *dir ? dir : "/tmp", base);
    fd = mkostemp(tmpname, O_CLOEXEC);
    if (fd < 0)
      return -1;
  }
  while ((size_t)off < size) {
    ssize_t w = sendfile(fd, src, &off, size - (size_t)off);
    if (w <= 0) {
      close(fd);
      return -1;
    }
  }
  return fd;
}

int qm_pmpi_load(const char *path, char first, qm_index_fn index, int nfuncs, struct qm_pmpi_copy *out, char *why, size_t n)
{
  struct timespec t0, t1;
  struct scan s;
  struct link_map *lm;
  size_t *patch, i;
  char *own, copyname[64], tmpname[4096];
  const char *culprit = NULL;
  int src, npatch = 0, rc = -1, k;
  uintptr_t lo = UINTPTR_MAX, hi = 0;

  clock_gettime(CLOCK_MONOTONIC, &t0);
  memset(out, 0, sizeof *out);
  out->memfd = -1;
  if (map_file(path, &s, &src, why, n) != 0)
    return -1;
  patch = calloc(s.size / sizeof(ElfW(Sym)) + 1, sizeof *patch);
  own = NULL;
  if (scan_elf(&s, why, n) != 0)
    goto out;
  if (tool_kind(&s, index) != QM_PMPI_TOOL) {
    fail(why, n, "not a PMPI tool (defines none of the MPI functions this core intercepts)");
    goto out;
  }
  own = calloc(s.nsym, 1);
  /* Which imports to rename; which tell of another MPI. */
  for (i = 1; i < s.nsym; i++) {
    const ElfW(Sym) *y = &s.sym[i];
    const char *name = dynstr(&s, y->st_name);
    if (name == NULL || y->st_shndx != SHN_UNDEF)
      continue;
    if (strncmp(name, "PMPI_", 5) == 0 && index(name + 5) >= 0) {
      patch[npatch++] = y->st_name;
      own[i] = 1;
    } else if ((strncmp(name, "PMPI_", 5) == 0 || strncmp(name, "MPI_", 4) == 0 || strncmp(name, "ompi_", 5) == 0) &&
               ELF64_ST_BIND(y->st_info) != STB_WEAK && dlsym(RTLD_DEFAULT, name) == NULL) {
      fail(why, n, "built for another MPI: it needs %s, which this MPI does not define", name);
      goto out;
    }
  }
  for (i = 0; i < s.ndyn && s.dyn[i].d_tag != DT_NULL; i++) { /* libmpi.so.40 vs .12 */
    const char *need = s.dyn[i].d_tag == DT_NEEDED ? dynstr(&s, s.dyn[i].d_un.d_val) : NULL;
    if (need && (strncmp(need, "libmpi.so", 9) == 0 || strncmp(need, "libmpich.so", 11) == 0) &&
        dlopen(need, RTLD_LAZY | RTLD_NOLOAD) == NULL) {
      fail(why, n, "built for another MPI: linked with %s, which this process has not loaded", need);
      goto out;
    }
  }
  if (check_shared_strings(&s, patch, own, npatch, &culprit)) {
    fail(why, n, "cannot rename its PMPI_ imports: their names share bytes with %s", culprit);
    goto out;
  }
  /* The private copy; then flip 'P' -> 'X' at each renamed import's name. */
  out->memfd = private_copy(path, src, s.size, tmpname, sizeof tmpname);
  if (out->memfd < 0) {
    fail(why, n, "cannot make a private copy: %s", strerror(errno));
    goto out;
  }
  for (k = 0; k < npatch; k++)
    if (pwrite(out->memfd, &first, 1, (off_t)(s.stroff + patch[k])) != 1) {
      fail(why, n, "cannot patch the private copy: %s", strerror(errno));
      goto out;
    }
  /* /proc/<pid>/fd/<n>: keep n open, or a later copy reusing n gets this handle back
   * (dlopen matches already-loaded objects by name before it looks at the file). */
  if (tmpname[0])
    snprintf(copyname, sizeof copyname, "%s", tmpname);
  else
    snprintf(copyname, sizeof copyname, "/proc/%d/fd/%d", (int)getpid(), out->memfd);
  out->handle = dlopen(tmpname[0] ? tmpname : copyname, RTLD_NOW | RTLD_LOCAL);
  if (tmpname[0])
    unlink(tmpname);
  if (out->handle == NULL) {
    fail(why, n, "cannot load its private copy: %s", dlerror());
    goto out;
  }
  dlinfo(out->handle, RTLD_DI_LINKMAP, &lm);
  if (getenv("QM_DEMO_CLOSE_FD")) { /* demonstrates the pitfall: the next copy reuses the fd number */
    close(out->memfd);
    out->memfd = -1;
  }
  out->wrappers = calloc((size_t)nfuncs, sizeof *out->wrappers);
  for (i = 1; i < s.nsym; i++) {
    const ElfW(Sym) *y = &s.sym[i];
    const char *name = dynstr(&s, y->st_name);
    if (name && defined_mpi(&s, y, name, index)) {
      if (ELF64_ST_TYPE(y->st_info) == STT_GNU_IFUNC)
        out->wrappers[index(name + 4)] = dlsym(out->handle, name);
      else
        out->wrappers[index(name + 4)] = (void *)(lm->l_addr + y->st_value);
      if (ELF64_ST_VISIBILITY(y->st_other) == STV_PROTECTED)
        s.symbolic = 1;
    }
  }
  {
    const ElfW(Phdr) *ph = (const ElfW(Phdr) *)(s.img + s.eh->e_phoff);
    for (k = 0; k < s.eh->e_phnum; k++)
      if (ph[k].p_type == PT_LOAD) {
        if (lm->l_addr + ph[k].p_vaddr < lo)
          lo = lm->l_addr + ph[k].p_vaddr;
        if (lm->l_addr + ph[k].p_vaddr + ph[k].p_memsz > hi)
          hi = lm->l_addr + ph[k].p_vaddr + ph[k].p_memsz;
      }
  }
  out->lo = lo;
  out->hi = hi;
  out->renamed = npatch;
  out->symbolic = s.symbolic;
  rc = 0;
out:
  if (rc != 0 && out->memfd >= 0) {
    close(out->memfd);
    out->memfd = -1;
  }
  free(patch);
  free(own);
  munmap((void *)s.img, s.size);
  close(src);
  clock_gettime(CLOCK_MONOTONIC, &t1);
  out->ms = (t1.tv_sec - t0.tv_sec) * 1e3 + (t1.tv_nsec - t0.tv_nsec) / 1e6;
  return rc;
}
