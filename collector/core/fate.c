/*
 * How a traced process ended when it did not reach MPI_Finalize: the exit and fatal-signal
 * handlers write it into the open trace's header (exit_kind, exit_code, t_exit, exit_check;
 * include/commscope/trace.h), so an analysis of a hung or crashed job can tell a rank that
 * exited early or was terminated from one that vanished without warning (SIGKILL, the OOM killer,
 * a lost node).
 *
 * Never changes what the program does:
 *  - only signals whose disposition is the default when the trace opens get a handler; one the
 *    program or the MPI library handles or ignores is left exactly as it is;
 *  - the handler restores the default disposition and raises the signal again, so the process
 *    ends exactly as it would have (same signal, same core dump, same status seen by the
 *    launcher);
 *  - a program that installs its own handler later simply replaces this one;
 *  - COMMSCOPE_SIGNALS=0 installs none.
 * The mark takes no lock and calls only async-signal-safe functions (clock_gettime, stores).
 */
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "internal.h"

static const int watched[] = {SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGABRT,
                              SIGSEGV, SIGBUS, SIGFPE, SIGILL};
#define NWATCHED (sizeof watched / sizeof watched[0])

static void mark(uint32_t kind, int32_t code)
{
    static int marked;
    if (!__atomic_load_n(&cs__t.open, __ATOMIC_ACQUIRE) || !cs__t.hdr ||
        __atomic_exchange_n(&marked, 1, __ATOMIC_ACQ_REL))
        return;
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    uint64_t t = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
    struct cs_file_header *h = cs__t.hdr;
    h->exit_code = code;
    h->t_exit = t;
    h->exit_kind = kind;
    /* The check last: a reader that sees it matching sees the fields it covers. */
    __atomic_store_n(&h->exit_check, cs_exit_check(kind, code, t), __ATOMIC_RELEASE);
}

static void on_signal(int sig, siginfo_t *si, void *uc)
{
    (void)uc;
    mark(CS_EXIT_SIGNAL, sig);
    /* The default action, as if this handler had never been there: a fault re-executes with the
     * default disposition on return; a signal sent by someone is raised again (blocked until this
     * handler returns, then delivered with the default action). */
    struct sigaction dfl;
    memset(&dfl, 0, sizeof dfl);
    dfl.sa_handler = SIG_DFL;
    sigemptyset(&dfl.sa_mask);
    sigaction(sig, &dfl, NULL);
    if (si && si->si_code > 0 &&
        (sig == SIGSEGV || sig == SIGBUS || sig == SIGFPE || sig == SIGILL))
        return;
    raise(sig);
}

static void on_exit_handler(int status, void *arg)
{
    (void)arg;
    mark(CS_EXIT_EXIT, status);
}

void cs__fate_watch(void)
{
    static int once;
    if (__atomic_exchange_n(&once, 1, __ATOMIC_ACQ_REL))
        return;
    on_exit(on_exit_handler, NULL);
    const char *v = getenv("COMMSCOPE_SIGNALS");
    if (v && (strcmp(v, "0") == 0 || strcmp(v, "off") == 0 || strcmp(v, "no") == 0))
        return;
    for (size_t i = 0; i < NWATCHED; i++) {
        struct sigaction old;
        /* Only where nobody handles the signal: a handler of the program's or the MPI
         * library's stays exactly as it is (and what sigaction() tells the program about it). */
        if (sigaction(watched[i], NULL, &old) != 0 || (old.sa_flags & SA_SIGINFO) ||
            old.sa_handler != SIG_DFL)
            continue;
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_sigaction = on_signal;
        sigemptyset(&sa.sa_mask);
        sa.sa_flags = SA_SIGINFO | SA_RESTART | SA_ONSTACK | SA_RESETHAND;
        sigaction(watched[i], &sa, NULL);
    }
}
