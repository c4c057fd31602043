/* What the files of the `commscope` command-line tool share. */
#ifndef COMMSCOPE_LAUNCHER_INTERNAL_H
#define COMMSCOPE_LAUNCHER_INTERNAL_H

#include <limits.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

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

/* In a child about to exec a program: give it back the signal dispositions commscope changed
 * for itself (SIGXFSZ, ignored by commscope; main.c). */
void cs__restore_child_signals(void);

int cs__cmd_run(int argc, char **argv);
int cs__cmd_version(int argc, char **argv);
int cs__cmd_topo(int argc, char **argv);
int cs__cmd_fabric(int argc, char **argv);
int cs__cmd_node_snapshot(int argc, char **argv);

/* capture_opts.c: --capture, --capture-expect, --capture-bucket-ms, --capture-raw(-max). */
struct cs__capture_opts {
    const char *ifaces, *expect, *bucket_ms, *raw_max;
    int raw;
};
/* Parse argv[i] (a --capture* option).  Returns the arguments used (1 or 2), or -1 after a usage
 * message naming cmd. */
int cs__capture_arg(struct cs__capture_opts *o, int argc, char **argv, int i, const char *cmd);
/* The options' help lines. */
const char *cs__capture_usage(void);
/* Set COMMSCOPE_CAPTURE* for the collector when capture was asked for.  A missing helper is said
 * on stderr and the run goes on without capture.  Returns 0, -1 when setenv failed. */
int cs__capture_env(const struct cs__capture_opts *o, const char *cmd);
int cs__cmd_compare(int argc, char **argv);

#include <stddef.h>
/* MPI families (preload.c), in order of how much they tell. */
enum { CS__MPI_NONE = 0, CS__MPI_UNKNOWN = 1, CS__MPI_OPENMPI = 2, CS__MPI_MPICH = 3 };
/* "none", "an unknown MPI", "Open MPI", "MPICH", indexed by family. */
extern const char *const cs__mpi_family_name[];
/* One MPI collector build: its path and the family its DT_NEEDED names. */
struct cs__mpi_collector {
    char path[PATH_MAX + 64];
    int family;
};
/* The MPI collector builds in libdir (libcommscope_mpi.so, then mpich/ and openmpi/ ones), at
 * most max into out.  Returns how many. */
int cs__mpi_collectors(const char *libdir, struct cs__mpi_collector *out, int max);
/*
 * Preload choice of `commscope run` (preload.c).  force: 1 --mpi, -1 --no-mpi, 0 decide from the
 * command line argv[0..argc).  Returns 1 with the MPI collector to preload in lib; 0 when the job
 * is no MPI job; -1 when it is one but no collector of its MPI family was built (the job runs
 * untraced for MPI).  why gets the reasons, as a sentence fragment.
 */
int cs__choose_mpi_preload(int force, int argc, char **argv, const char *libdir, char *lib,
                           size_t libcap, char *why, size_t cap);
/* 1 for Open MPI / MPICH launchers (mpirun, mpiexec, orterun, ... and .suffixed variants). */
int cs__is_mpi_launcher(const char *prog);
/* The MPI family (CS__MPI_*) the ELF file at path links by its DT_NEEDED entries (soname gets
 * the library that says so), CS__MPI_NONE when it links no MPI, -1 when it is not a readable
 * 64-bit ELF file. */
int cs__elf_mpi_family(const char *path, char *soname, size_t cap);

/* root_service.c: the TCP clock/gather service for ranks without MPI (include/commscope/root.h).
 * Start it on spec ("HOST:PORT"; NULL: every IPv4 interface, a free port) for run_dir; addr gets
 * what the ranks must be told (COMMSCOPE_ROOT).  Returns 0 (hosting, *out set), 1 (spec is
 * another node's address: nothing hosted here, addr = spec), -1 (could not; said on stderr). */
struct cs__root_svc;
int cs__root_svc_start(const char *spec, const char *run_dir, struct cs__root_svc **out, char *addr,
                       size_t cap);
/* The ranks reporting progress (COMMSCOPE_WATCH_MS): the number whose reports go on, with *calls
 * the sum of the calls every rank that reported has completed. */
int cs__root_svc_progress(struct cs__root_svc *s, uint64_t *calls);
/* Ask every reporting rank for a snapshot of its live trace into the run directory (never over
 * the live trace itself) and wait up to wait_ms for them.  Returns the number of ranks whose
 * trace is in the run directory now, *copied those that came as snapshots (the others write
 * there themselves); silent lists the ranks without one and why (never reported, reports
 * stopped, none for stale_s). */
int cs__root_svc_snapshot(struct cs__root_svc *s, int wait_ms, double stale_s, int *copied,
                          char *silent, size_t cap);
/* Live metrics (commscope run --metrics): judge the collectives the ranks report (every
 * report_s seconds); 0, or -1 out of memory.  write_metrics writes FILE (a Prometheus text
 * exposition, through FILE.tmp renamed); final judges every instance still open.  0 or -1. */
int cs__root_svc_metrics_on(struct cs__root_svc *s, double report_s);
int cs__root_svc_write_metrics(struct cs__root_svc *s, const char *path, int final);

/* live.c: the cross-rank part of the live metrics, under the root service's lock. */
struct cs_root_coll;
struct cs__live;
struct cs__live *cs__live_new(void);
void cs__live_free(struct cs__live *l);
/* Records of rank's completed blocking collectives, arrived at now (CLOCK_MONOTONIC s). */
void cs__live_colls(struct cs__live *l, int32_t rank, const struct cs_root_coll *c, uint32_t n,
                    double now);
/* Judge the instances older than settle_s (all, when negative), and close the bandwidth
 * window. */
void cs__live_settle(struct cs__live *l, double now, double settle_s);
double cs__live_wait_s(const struct cs__live *l, int32_t rank);
double cs__live_caused_s(const struct cs__live *l, int32_t rank);
/* commscope_busbw_gbytes_per_second samples (job: the job label and a comma, or ""). */
void cs__live_write_busbw(const struct cs__live *l, FILE *f, const char *job);
uint64_t cs__live_dropped(const struct cs__live *l);

/* After the program: wait up to wait_ms for transfers, recover traces of ranks that did not hand
 * theirs over from their local files on this host, warn about the rest, stop and free the
 * service; a one-line summary goes to summary. */
void cs__root_svc_finish(struct cs__root_svc *s, int wait_ms, char *summary, size_t cap);
/* 1 when spec is HOST:PORT or [ADDR]:PORT. */
int cs__root_valid_spec(const char *spec);

/* hang_watch.c: progress of the traces under run_dir (and COMMSCOPE_LOCAL_DIR) while the job
 * runs.  poll returns 1 when some rank completed a call since the last poll (or at the first),
 * 0 when none did, -1 when no trace exists yet. */
struct cs__hang_watch;
struct cs__hang_watch *cs__hang_watch_new(const char *run_dir);
int cs__hang_watch_poll(struct cs__hang_watch *w);
void cs__hang_watch_free(struct cs__hang_watch *w);

#endif
