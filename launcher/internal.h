/* What the files of the `commscope` command-line tool share. */
#ifndef COMMSCOPE_LAUNCHER_INTERNAL_H
#define COMMSCOPE_LAUNCHER_INTERNAL_H

/*
 * One subcommand.  fn gets argv with argv[0] = the subcommand's name and returns the process exit
 * status.  Every subcommand answers --help on stdout with status 0 and reports a usage error with
 * one sentence on stderr and status 2.
 */
struct cs__cmd {
    const char *name;
    int (*fn)(int argc, char **argv);
    const char *summary;
};

/* Exit statuses of the launcher's own failures (the program's status is passed through). */
enum {
    CS__EXIT_USAGE = 2,     /* bad option, missing argument, refused run directory */
    CS__EXIT_NOEXEC = 126,  /* PROGRAM exists but cannot be executed (as a shell does) */
    CS__EXIT_NOTFOUND = 127 /* PROGRAM not found (as a shell does) */
};

int cs__cmd_run(int argc, char **argv);
int cs__cmd_version(int argc, char **argv);
int cs__cmd_topo(int argc, char **argv);
int cs__cmd_fabric(int argc, char **argv);

#include <stddef.h>
/* Preload choice of `commscope run` (preload.c).  force: 1 --mpi, -1 --no-mpi, 0 decide from the
 * command line argv[0..argc).  Returns 1 to preload libcommscope_mpi.so, with why in why. */
int cs__choose_mpi_preload(int force, int argc, char **argv, char *why, size_t cap);
/* 1 for Open MPI / MPICH launchers (mpirun, mpiexec, orterun, ... and .suffixed variants). */
int cs__is_mpi_launcher(const char *prog);
/* 1 when the ELF file at path links an MPI library, 0 when not, -1 not a readable ELF64 file. */
int cs__elf_links_mpi(const char *path);

#endif
