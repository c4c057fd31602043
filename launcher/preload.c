/*
 * Which collector libraries `commscope run` preloads: libcommscope.so always, libcommscope_mpi.so
 * (which links libmpi) only into MPI jobs.  Preloading it into a torchrun or NCCL-only job would
 * load libmpi into every Python process and worker for nothing, or fail where no MPI is installed.
 *
 * The choice, in order:
 *   1. --mpi / --no-mpi on the command line;
 *   2. the program is an MPI launcher (mpirun, mpiexec, orterun, and their .openmpi/.mpich/.hydra
 *      variants): MPI;
 *   3. a known launcher of jobs that are not MPI programs by themselves (torchrun,
 *      python -m torch.distributed.run, deepspeed, accelerate): core only;
 *   4. otherwise (srun, a plain program, a shell script): MPI when an argument names an
 *      executable ELF file that links an MPI library (DT_NEEDED libmpi* / libmpich*): the
 *      program itself, or the program srun starts; else core only.
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

/*
 * 1 when the 64-bit little-endian ELF file at path names an MPI library in its DT_NEEDED entries,
 * 0 when it does not, -1 when it is not such an ELF file (or cannot be read).
 */
int cs__elf_links_mpi(const char *path)
{
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
    rc = 0; /* an ELF file: statically linked ones have no DT_NEEDED */
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
        if (!strncmp(name, "libmpi.", 7) || !strncmp(name, "libmpi_", 7) ||
            !strncmp(name, "libmpich", 8))
            rc = 1;
    }
out:
    free(img);
    close(fd);
    return rc;
}

int cs__choose_mpi_preload(int force, int argc, char **argv, char *why, size_t cap)
{
    if (force) {
        snprintf(why, cap, "%s given", force > 0 ? "--mpi" : "--no-mpi");
        return force > 0;
    }
    if (cs__is_mpi_launcher(argv[0])) {
        snprintf(why, cap, "%s is an MPI launcher", base_name(argv[0]));
        return 1;
    }
    if (is_torch_launcher(argc, argv)) {
        snprintf(why, cap, "%s starts torch.distributed jobs (NCCL)", base_name(argv[0]));
        return 0;
    }
    /* Every argument naming an executable ELF file counts (srun's or env's program follows
     * their options), so `srun -N 2 ./mpi_app` is an MPI job and `srun python train.py` not. */
    for (int i = 0; i < argc; i++) {
        char path[PATH_MAX];
        if (argv[i][0] == '-' || resolve(argv[i], path) || cs__elf_links_mpi(path) != 1)
            continue;
        snprintf(why, cap, "%s links an MPI library", path);
        return 1;
    }
    snprintf(why, cap, "no MPI launcher or program linking MPI on the command line");
    return 0;
}
