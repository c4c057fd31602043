/*
 * Which collector libraries `commscope run` preloads: libcommscope.so always, an MPI collector
 * (libcommscope_mpi.so) only into MPI jobs, and only the build for the program's MPI family.
 * Preloading an MPI collector into a torchrun or NCCL-only job would load libmpi into every
 * Python process and worker for nothing; preloading the Open MPI build into an MPICH program
 * makes it abort in its first MPI call (the ABIs differ: handles, constants, status layout).
 *
 * Whether the job is an MPI job, in order:
 *   1. --mpi / --no-mpi on the command line;
 *   2. the program is an MPI launcher (mpirun, mpiexec, orterun, and their .openmpi/.mpich/.hydra
 *      variants): MPI;
 *   3. a known launcher of jobs that are not MPI programs by themselves (torchrun,
 *      python -m torch.distributed.run, deepspeed, accelerate): core only;
 *   4. otherwise (srun, a plain program, a shell script): MPI when an argument names an
 *      executable ELF file that links an MPI library (DT_NEEDED libmpi* / libmpich*): the
 *      program itself, or the program srun starts; else core only.
 * Its family: that of the MPI library the program links (libmpi.so.40 and other libmpi.so.N:
 * Open MPI; libmpich.so.N or libmpi.so.12: MPICH and the MPICH-ABI family, Intel MPI, MVAPICH),
 * else the launcher's (its name, or the file a plain mpirun/mpiexec resolves to: orterun and
 * prterun are Open MPI's, mpiexec.hydra MPICH's).  Each collector build says its own family by
 * its DT_NEEDED; where none matches, no MPI collector is preloaded and the reason is given.
 */
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "internal.h"

static const char *base_name(const char *p)
{
    const char *s = strrchr(p, '/');
    return s ? s + 1 : p;
}

const char *const cs__mpi_family_name[] = {[CS__MPI_NONE] = "none",
                                           [CS__MPI_UNKNOWN] = "an unknown MPI",
                                           [CS__MPI_OPENMPI] = "Open MPI",
                                           [CS__MPI_MPICH] = "MPICH"};

/* The family of a library by its soname; CS__MPI_NONE for libraries that are no MPI.  With
 * `runtime`, Open MPI's run-time libraries count too (its launchers link them, not libmpi). */
static int soname_family(const char *name, int runtime)
{
    if (!strncmp(name, "libmpich", 8))
        return CS__MPI_MPICH;
    if (!strcmp(name, "libmpi.so.12"))
        return CS__MPI_MPICH; /* the MPICH ABI's soname (Intel MPI, MVAPICH, Cray) */
    if (!strncmp(name, "libmpi.so", 9))
        return CS__MPI_OPENMPI;
    if (runtime && (!strncmp(name, "libopen-rte", 11) || !strncmp(name, "libopen-pal", 11) ||
                    !strncmp(name, "libprrte", 8)))
        return CS__MPI_OPENMPI;
    if (!strncmp(name, "libmpi.", 7) || !strncmp(name, "libmpi_", 7))
        return CS__MPI_UNKNOWN;
    return CS__MPI_NONE;
}

int cs__is_mpi_launcher(const char *prog)
{
    const char *b = base_name(prog);
    static const char *const names[] = {"mpirun", "mpiexec", "orterun", "prterun", "mpiexec.hydra"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        size_t n = strlen(names[i]);
        if (!strncmp(b, names[i], n) && (b[n] == '\0' || b[n] == '.'))
            return 1;
    }
    return 0;
}

static int is_torch_launcher(int argc, char **argv)
{
    const char *b = base_name(argv[0]);
    if (!strcmp(b, "torchrun") || !strcmp(b, "deepspeed") || !strcmp(b, "accelerate"))
        return 1;
    if (!strncmp(b, "python", 6))
        for (int i = 1; i + 1 < argc; i++)
            if (!strcmp(argv[i], "-m") && !strncmp(argv[i + 1], "torch.distributed", 17))
                return 1;
    return 0;
}

/* Resolve name like execvp would (PATH when it has no slash) into out.  Returns 0 when found. */
static int resolve(const char *name, char out[PATH_MAX])
{
    struct stat st;
    if (strchr(name, '/')) {
        if (stat(name, &st) || !S_ISREG(st.st_mode) || access(name, X_OK))
            return -1;
        snprintf(out, PATH_MAX, "%s", name);
        return 0;
    }
    const char *path = getenv("PATH");
    if (!path || !*name)
        return -1;
    while (*path) {
        size_t n = strcspn(path, ":");
        if (n && n + strlen(name) + 2 < PATH_MAX) {
            snprintf(out, PATH_MAX, "%.*s/%s", (int)n, path, name);
            if (!stat(out, &st) && S_ISREG(st.st_mode) && !access(out, X_OK))
                return 0;
        }
        path += n + (path[n] == ':');
    }
    return -1;
}

/* cs__elf_mpi_family, with Open MPI's run-time libraries counted when `runtime`. */
static int elf_family(const char *path, char *soname, size_t cap, int runtime)
{
    if (soname && cap)
        soname[0] = '\0';
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    struct stat st;
    unsigned char *img = NULL;
    int rc = -1;
    if (fstat(fd, &st) || st.st_size < (off_t)sizeof(Elf64_Ehdr) || st.st_size > (1l << 30))
        goto out;
    size_t size = (size_t)st.st_size;
    img = malloc(size);
    if (!img || pread(fd, img, size, 0) != (ssize_t)size)
        goto out;
    Elf64_Ehdr eh;
    memcpy(&eh, img, sizeof eh);
    if (memcmp(eh.e_ident, ELFMAG, SELFMAG) || eh.e_ident[EI_CLASS] != ELFCLASS64 ||
        eh.e_ident[EI_DATA] != ELFDATA2LSB || eh.e_phentsize != sizeof(Elf64_Phdr) ||
        eh.e_phoff > size || (size - eh.e_phoff) / sizeof(Elf64_Phdr) < eh.e_phnum)
        goto out;
    Elf64_Phdr dyn = {0};
    for (int i = 0; i < eh.e_phnum; i++) {
        Elf64_Phdr ph;
        memcpy(&ph, img + eh.e_phoff + (size_t)i * sizeof ph, sizeof ph);
        if (ph.p_type == PT_DYNAMIC)
            dyn = ph;
    }
    rc = CS__MPI_NONE; /* an ELF file: statically linked ones have no DT_NEEDED */
    if (!dyn.p_filesz || dyn.p_offset > size || size - dyn.p_offset < dyn.p_filesz)
        goto out;
    /* DT_STRTAB is an address: find the file offset through the PT_LOAD segment holding it. */
    size_t ndyn = dyn.p_filesz / sizeof(Elf64_Dyn);
    uint64_t strtab = 0, strsz = 0;
    for (size_t i = 0; i < ndyn; i++) {
        Elf64_Dyn d;
        memcpy(&d, img + dyn.p_offset + i * sizeof d, sizeof d);
        if (d.d_tag == DT_STRTAB)
            strtab = d.d_un.d_ptr;
        else if (d.d_tag == DT_STRSZ)
            strsz = d.d_un.d_val;
    }
    uint64_t stroff = UINT64_MAX;
    for (int i = 0; i < eh.e_phnum; i++) {
        Elf64_Phdr ph;
        memcpy(&ph, img + eh.e_phoff + (size_t)i * sizeof ph, sizeof ph);
        if (ph.p_type == PT_LOAD && strtab >= ph.p_vaddr && strtab - ph.p_vaddr < ph.p_filesz)
            stroff = ph.p_offset + (strtab - ph.p_vaddr);
    }
    if (stroff >= size || size - stroff < strsz)
        goto out;
    for (size_t i = 0; i < ndyn; i++) {
        Elf64_Dyn d;
        memcpy(&d, img + dyn.p_offset + i * sizeof d, sizeof d);
        if (d.d_tag != DT_NEEDED || d.d_un.d_val >= strsz)
            continue;
        const char *name = (const char *)img + stroff + d.d_un.d_val;
        size_t max = strsz - d.d_un.d_val;
        if (strnlen(name, max) == max)
            continue;
        int fam = soname_family(name, runtime);
        if (fam > rc) {
            rc = fam;
            if (soname && cap)
                snprintf(soname, cap, "%s", name);
        }
    }
out:
    free(img);
    close(fd);
    return rc;
}

/* The family of an MPI launcher by its name, or by the file a plain mpirun/mpiexec resolves to
 * (Debian's alternatives); CS__MPI_UNKNOWN when it cannot be told. */
static int launcher_family(const char *prog)
{
    char path[PATH_MAX], real[PATH_MAX];
    const char *b = base_name(prog);
    for (int pass = 0; pass < 2; pass++) {
        if (strstr(b, ".openmpi") || !strncmp(b, "orterun", 7) || !strncmp(b, "prterun", 7))
            return CS__MPI_OPENMPI;
        if (strstr(b, ".mpich") || strstr(b, ".hydra"))
            return CS__MPI_MPICH;
        if (pass || resolve(prog, path) || !realpath(path, real))
            break;
        b = base_name(real);
    }
    /* Open MPI's launchers link its run-time libraries; MPICH's hydra links none. */
    if (!resolve(prog, path)) {
        int fam = elf_family(path, NULL, 0, 1);
        if (fam == CS__MPI_OPENMPI)
            return fam;
    }
    return CS__MPI_UNKNOWN;
}

/* The MPI family the job's program links, from the first argument naming an executable ELF file
 * that links MPI (srun's or env's program follows their options); soname gets the library. */
static int program_family(int argc, char **argv, char *prog, size_t pcap, char *soname, size_t scap)
{
    for (int i = 0; i < argc; i++) {
        char path[PATH_MAX];
        if (argv[i][0] == '-' || resolve(argv[i], path))
            continue;
        int fam = cs__elf_mpi_family(path, soname, scap);
        if (fam > CS__MPI_NONE) {
            snprintf(prog, pcap, "%s", path);
            return fam;
        }
    }
    return CS__MPI_NONE;
}

int cs__mpi_collectors(const char *libdir, struct cs__mpi_collector *out, int max)
{
    static const char *const places[] = {"", "mpich/", "openmpi/"};
    int n = 0;
    for (size_t i = 0; i < sizeof places / sizeof places[0] && n < max; i++) {
        char p[PATH_MAX + 64];
        snprintf(p, sizeof p, "%s/%slibcommscope_mpi.so", libdir, places[i]);
        if (access(p, R_OK) != 0)
            continue;
        snprintf(out[n].path, sizeof out[n].path, "%s", p);
        int fam = cs__elf_mpi_family(p, NULL, 0);
        out[n].family = fam > CS__MPI_NONE ? fam : CS__MPI_UNKNOWN;
        n++;
    }
    return n;
}

int cs__elf_mpi_family(const char *path, char *soname, size_t cap)
{
    return elf_family(path, soname, cap, 0);
}

int cs__choose_mpi_preload(int force, int argc, char **argv, const char *libdir, char *lib,
                           size_t libcap, char *why, size_t cap)
{
    lib[0] = '\0';
    char prog[PATH_MAX] = "", soname[128] = "";
    int fam = program_family(argc, argv, prog, sizeof prog, soname, sizeof soname);
    int mpi;
    char reason[PATH_MAX + 64];
    if (force) {
        mpi = force > 0;
        snprintf(reason, sizeof reason, "%s given", mpi ? "--mpi" : "--no-mpi");
    } else if (cs__is_mpi_launcher(argv[0])) {
        mpi = 1;
        snprintf(reason, sizeof reason, "%s is an MPI launcher", base_name(argv[0]));
    } else if (is_torch_launcher(argc, argv)) {
        mpi = 0;
        snprintf(reason, sizeof reason, "%s starts torch.distributed jobs (NCCL)",
                 base_name(argv[0]));
    } else if (fam > CS__MPI_NONE) {
        mpi = 1;
        snprintf(reason, sizeof reason, "%s links an MPI library", prog);
    } else {
        mpi = 0;
        snprintf(reason, sizeof reason,
                 "no MPI launcher or program linking MPI on the command line");
    }
    if (!mpi) {
        snprintf(why, cap, "%s", reason);
        return 0;
    }
    char from[PATH_MAX + 400];
    if (fam > CS__MPI_NONE && fam != CS__MPI_UNKNOWN) {
        int lf = cs__is_mpi_launcher(argv[0]) ? launcher_family(argv[0]) : CS__MPI_UNKNOWN;
        /* A program started by another family's launcher does not start as one job. */
        if (lf != CS__MPI_UNKNOWN && lf != fam)
            fprintf(stderr,
                    "commscope run: warning: %s is %s's launcher, but %s links %s (%s): the "
                    "job may not start as one MPI job\n",
                    base_name(argv[0]), cs__mpi_family_name[lf], prog, cs__mpi_family_name[fam],
                    soname);
        snprintf(from, sizeof from, "%s links %s (%s)", prog, cs__mpi_family_name[fam], soname);
    } else {
        fam = cs__is_mpi_launcher(argv[0]) ? launcher_family(argv[0]) : CS__MPI_UNKNOWN;
        if (fam != CS__MPI_UNKNOWN)
            snprintf(from, sizeof from, "%s is %s's launcher", base_name(argv[0]),
                     cs__mpi_family_name[fam]);
        else
            snprintf(from, sizeof from, "the MPI family could not be told");
    }
    struct cs__mpi_collector c[4];
    int n = cs__mpi_collectors(libdir, c, 4);
    /* The matching build; with the family unknown, the default build (the first). */
    int pick = -1;
    for (int i = 0; i < n && pick < 0; i++)
        if (c[i].family == fam || (fam == CS__MPI_UNKNOWN && i == 0))
            pick = i;
    if (pick < 0) {
        char have[256] = "";
        size_t k = 0;
        for (int i = 0; i < n && k < sizeof have - 32; i++)
            k += (size_t)snprintf(have + k, sizeof have - k, "%s%s", i ? ", " : "",
                                  cs__mpi_family_name[c[i].family]);
        snprintf(why, cap,
                 "%s; %s; this commscope has no MPI collector built for %s (it has: %s), so "
                 "none is preloaded and the job's MPI calls are not traced",
                 reason, from, cs__mpi_family_name[fam], n ? have : "none");
        return -1;
    }
    snprintf(lib, libcap, "%s", c[pick].path);
    snprintf(why, cap, "%s; %s: %s", reason, from, c[pick].path);
    return 1;
}
