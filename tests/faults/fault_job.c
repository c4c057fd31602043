/*
 * Test program of the fault-injection suite (test_faults.py): an MPI job that counts its own
 * calls and computes a result, and does one unkind thing on request.  Run with and without the
 * collector, its exit status and its printed results must be the same; the counts are what the
 * trace must hold (recorded plus counted as dropped).
 *
 * usage: cs_fault_job [options]
 *   --calls N          8-byte MPI_Allreduce calls per rank (default 1000), then one MPI_Barrier
 *   --rmdir DIR        rank 0 removes the directory tree DIR after half the calls
 *   --fork             every rank forks a child that computes and _exits, and runs /bin/true
 *                      through fork + exec, after half the calls
 *   --handlers         install the program's own handlers for SIGSEGV, SIGBUS, SIGTERM, SIGXFSZ
 *                      and SIGUSR1, raise SIGUSR1 (handled) and check they are still installed
 *   --threads T        MPI_THREAD_MULTIPLE; T threads share the calls, each on its own dup
 *   --abort R          rank R calls MPI_Abort(MPI_COMM_WORLD, 7) after half the calls
 *   --kill R           rank R (-1: every rank) raises SIGKILL after half the calls
 *   --no-finalize      exit(0) without MPI_Finalize
 *   --double-finalize  call MPI_Finalize twice
 *   --sleep-ms M       sleep M ms after half the calls (to be caught running)
 *   --step-every K     MPI_Pcontrol(1) before every K-th all-reduce (a step marker; one thread)
 *
 * Prints per rank: "fault_job: rank R result=X" (the sum of every all-reduce result), and
 * "fault_job: rank R op NAME calls=C" for each MPI call it made that the collector records.
 */
#include <ftw.h>
#include <mpi.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static long calls = 1000;
static const char *rmdir_path;
static int do_fork, do_handlers, nthreads, abort_rank = -2, kill_rank = -2, no_finalize,
                                           double_finalize, sleep_ms;
static long step_every, markers, reduced;
static int rank, size;
static volatile sig_atomic_t usr1_seen;

static void on_usr1(int sig)
{
    (void)sig;
    usr1_seen = 1;
}

static void on_fatal(int sig)
{
    /* never expected to run: the collector must not raise these */
    char msg[64];
    int n = snprintf(msg, sizeof msg, "fault_job: rank %d got signal %d\n", rank, sig);
    if (n > 0)
        (void)!write(2, msg, (size_t)n);
    _exit(90 + sig);
}

static int rm_entry(const char *p, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb;
    (void)flag;
    (void)ftw;
    return remove(p);
}

struct worker {
    MPI_Comm comm;
    long n;
    double sum;
};

static void *work(void *arg)
{
    struct worker *w = arg;
    for (long i = 0; i < w->n; i++) {
        if (step_every > 0 && reduced++ % step_every == 0) {
            MPI_Pcontrol(1);
            markers++;
        }
        double x = (double)(rank + 1) * (double)(i % 7 + 1), y = 0;
        MPI_Allreduce(&x, &y, 1, MPI_DOUBLE, MPI_SUM, w->comm);
        w->sum += y;
    }
    return NULL;
}

/* The unkind things done half way. */
static void midway(void)
{
    if (rmdir_path && rank == 0)
        nftw(rmdir_path, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
    if (do_fork) {
        pid_t c = fork();
        if (c == 0) {
            volatile double s = 0;
            for (int i = 0; i < 100000; i++)
                s += i;
            _exit(s > 0 ? 0 : 1);
        }
        if (c > 0)
            waitpid(c, NULL, 0);
        c = fork();
        if (c == 0) {
            execl("/bin/true", "true", (char *)NULL);
            _exit(127);
        }
        if (c > 0)
            waitpid(c, NULL, 0);
    }
    if (sleep_ms) {
        struct timespec ts = {sleep_ms / 1000, (long)(sleep_ms % 1000) * 1000000L};
        nanosleep(&ts, NULL);
    }
    if (abort_rank == rank) {
        fflush(stdout);
        MPI_Abort(MPI_COMM_WORLD, 7);
    }
    if (kill_rank == rank || kill_rank == -1) {
        fflush(stdout);
        raise(SIGKILL);
    }
}

static long arg_long(const char *v)
{
    char *e;
    long x = strtol(v, &e, 10);
    if (*e) {
        fprintf(stderr, "cs_fault_job: '%s' is not a number\n", v);
        exit(2);
    }
    return x;
}

int main(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : "";
        if (!strcmp(a, "--calls"))
            calls = arg_long(v), i++;
        else if (!strcmp(a, "--rmdir"))
            rmdir_path = v, i++;
        else if (!strcmp(a, "--fork"))
            do_fork = 1;
        else if (!strcmp(a, "--handlers"))
            do_handlers = 1;
        else if (!strcmp(a, "--threads"))
            nthreads = (int)arg_long(v), i++;
        else if (!strcmp(a, "--abort"))
            abort_rank = (int)arg_long(v), i++;
        else if (!strcmp(a, "--kill"))
            kill_rank = (int)arg_long(v), i++;
        else if (!strcmp(a, "--no-finalize"))
            no_finalize = 1;
        else if (!strcmp(a, "--double-finalize"))
            double_finalize = 1;
        else if (!strcmp(a, "--sleep-ms"))
            sleep_ms = (int)arg_long(v), i++;
        else if (!strcmp(a, "--step-every"))
            step_every = arg_long(v), i++;
        else {
            fprintf(stderr, "cs_fault_job: unknown option '%s'\n", a);
            return 2;
        }
    }
    if (do_handlers) {
        static const int fatal[] = {SIGSEGV, SIGBUS, SIGTERM, SIGXFSZ};
        for (size_t i = 0; i < sizeof fatal / sizeof fatal[0]; i++)
            signal(fatal[i], on_fatal);
        signal(SIGUSR1, on_usr1);
    }
    long init_calls = 1;
    if (nthreads > 0 && step_every > 0) {
        fprintf(stderr, "cs_fault_job: --step-every needs one thread\n");
        return 2;
    }
    if (nthreads > 0) {
        int provided;
        MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
        if (provided < MPI_THREAD_MULTIPLE) {
            fprintf(stderr, "cs_fault_job: MPI_THREAD_MULTIPLE not provided\n");
            MPI_Abort(MPI_COMM_WORLD, 3);
        }
    } else {
        MPI_Init(&argc, &argv);
    }
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    double sum = 0;
    long dups = 0;
    if (nthreads > 0) {
        struct worker *w = calloc((size_t)nthreads, sizeof *w);
        pthread_t *t = calloc((size_t)nthreads, sizeof *t);
        for (int k = 0; k < nthreads; k++) {
            MPI_Comm_dup(MPI_COMM_WORLD, &w[k].comm);
            dups++;
            w[k].n = calls / nthreads / 2;
        }
        for (int k = 0; k < nthreads; k++)
            pthread_create(&t[k], NULL, work, &w[k]);
        for (int k = 0; k < nthreads; k++)
            pthread_join(t[k], NULL);
        midway();
        for (int k = 0; k < nthreads; k++)
            pthread_create(&t[k], NULL, work, &w[k]);
        for (int k = 0; k < nthreads; k++)
            pthread_join(t[k], NULL);
        for (int k = 0; k < nthreads; k++) {
            sum += w[k].sum;
            MPI_Comm_free(&w[k].comm);
        }
        calls = 2 * (calls / nthreads / 2) * nthreads;
        free(w);
        free(t);
    } else {
        struct worker w = {MPI_COMM_WORLD, calls / 2, 0};
        work(&w);
        midway();
        w.n = calls - calls / 2;
        work(&w);
        sum = w.sum;
    }
    MPI_Barrier(MPI_COMM_WORLD);
    if (do_handlers) {
        raise(SIGUSR1);
        struct sigaction sa;
        sigaction(SIGSEGV, NULL, &sa);
        if (!usr1_seen || sa.sa_handler != on_fatal) {
            fprintf(stderr, "cs_fault_job: rank %d: the program's signal handlers changed\n", rank);
            return 4;
        }
    }
    printf("fault_job: rank %d result=%.1f\n", rank, sum);
    printf("fault_job: rank %d op %s calls=%ld\n", rank,
           nthreads > 0 ? "MPI_Init_thread" : "MPI_Init", init_calls);
    printf("fault_job: rank %d op MPI_Allreduce calls=%ld\n", rank, calls);
    printf("fault_job: rank %d op MPI_Barrier calls=1\n", rank);
    if (markers)
        printf("fault_job: rank %d op MPI_Pcontrol calls=%ld\n", rank, markers);
    if (dups) {
        printf("fault_job: rank %d op MPI_Comm_dup calls=%ld\n", rank, dups);
        printf("fault_job: rank %d op MPI_Comm_free calls=%ld\n", rank, dups);
    }
    fflush(stdout);
    if (no_finalize)
        exit(0);
    MPI_Finalize();
    if (double_finalize)
        MPI_Finalize();
    return 0;
}
