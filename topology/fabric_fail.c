/*
 * A node that fails in the middle of `commscope fabric`: which one.  The benchmark's own output
 * stops when the job dies (an MPI job without fault tolerance is ended as a whole by its
 * launcher), so the node is named from what the launcher says on stderr about the process that
 * failed first, mapped to its node through the benchmark's "rank" lines, together with where the
 * benchmark was when its output stopped.
 *
 * Recognised launcher messages (the forms Open MPI 4 and Slurm print):
 *   mpirun  "Process name: [[JOB,1],RANK]" then "Exit code: N"   (a non-zero exit)
 *           "mpirun noticed that process rank RANK with PID P on node HOST exited on signal N
 *            (NAME)."                                             (a signal)
 *   srun    "srun: error: HOST: task RANK: Exited with exit code N" / "...: Killed" (the first)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fabric.h"
#include "internal.h"

static void set_failure(struct cs_fabric *f, int rank, const char *host, const char *what,
                        const char *source)
{
    if (f->failed_rank >= 0 || rank < 0)
        return; /* the first failure is the cause; later ones are the launcher's clean-up */
    f->failed_rank = rank;
    CS__COPY(f->failed_host, host ? host : "");
    CS__COPY(f->failed_what, what);
    CS__COPY(f->failed_source, source);
}

int cs_fabric_launcher_line(struct cs_fabric *f, const char *line)
{
    const char *p;
    int job, step, rank, code, sig, pid;
    char host[256], name[64];
    if ((p = strstr(line, "Process name: [["))) {
        /* Step 0 of a job family is Open MPI's own daemons, not the application. */
        if (sscanf(p, "Process name: [[%d,%d],%d]", &job, &step, &rank) == 3 && step >= 1 &&
            rank >= 0) {
            f->fail_pending = rank + 1;
            return 1;
        }
        return 0;
    }
    if (f->fail_pending && (p = strstr(line, "Exit code:"))) {
        rank = f->fail_pending - 1;
        f->fail_pending = 0;
        if (sscanf(p, "Exit code: %d", &code) == 1) {
            char what[96];
            snprintf(what, sizeof(what), "exited with status %d", code);
            set_failure(f, rank, NULL, what, "mpirun");
            return 1;
        }
        return 0;
    }
    if ((p = strstr(line, "noticed that process rank ")) &&
        sscanf(p, "noticed that process rank %d with PID %d on node %255s exited on signal %d",
               &rank, &pid, host, &sig) == 4) {
        char what[96];
        const char *paren = strchr(strstr(p, "on signal"), '(');
        if (paren && sscanf(paren, "(%63[^)])", name) == 1)
            snprintf(what, sizeof(what), "was killed by signal %d (%s)", sig, name);
        else
            snprintf(what, sizeof(what), "was killed by signal %d", sig);
        set_failure(f, rank, host, what, "mpirun");
        return 1;
    }
    if ((p = strstr(line, "srun: error: ")) &&
        sscanf(p, "srun: error: %255[^:]: task %d: %63[^\r\n]", host, &rank, name) == 3) {
        char what[96];
        if (sscanf(name, "Exited with exit code %d", &code) == 1)
            snprintf(what, sizeof(what), "exited with status %d", code);
        else
            snprintf(what, sizeof(what), "ended: %s", name);
        set_failure(f, rank, host, what, "srun");
        return 1;
    }
    return 0;
}

/* Mark the node of the failed rank (called by cs_fabric_judge before the verdicts). */
void cs__fabric_apply_failure(struct cs_fabric *f)
{
    if (f->failed_rank < 0)
        return;
    int k = -1;
    if ((size_t)f->failed_rank < f->n_rank_node)
        k = f->rank_node[f->failed_rank];
    for (size_t i = 0; k < 0 && f->failed_host[0] && i < f->n_nodes; i++)
        if (!strcmp(f->nodes[i].host, f->failed_host))
            k = (int)i;
    char where[96];
    if (f->complete)
        snprintf(where, sizeof(where), "after the benchmark finished");
    else if (f->in_collectives)
        snprintf(where, sizeof(where), "during the collectives sweep");
    else if (f->rounds > 0 && f->rounds_done < f->rounds)
        snprintf(where, sizeof(where), "during node-to-node round %d of %d", f->rounds_done + 1,
                 f->rounds);
    else if (f->rounds > 0)
        snprintf(where, sizeof(where), "after the node-to-node test, before the collectives");
    else
        snprintf(where, sizeof(where), "before the node-to-node test");
    if (k < 0 || (size_t)k >= f->n_nodes) {
        cs__fabric_note(f, "rank %d %s %s (reported by %s); its node is unknown to the benchmark",
                        f->failed_rank, f->failed_what, where, f->failed_source);
        return;
    }
    struct cs_fabric_node *n = &f->nodes[k];
    snprintf(n->failure, sizeof(n->failure), "rank %d %.80s %.70s (reported by %.15s)",
             f->failed_rank, f->failed_what, where, f->failed_source);
    cs__fabric_note(f, "node %s failed mid-benchmark: %s; what was measured before is reported",
                    n->host, n->failure);
}
