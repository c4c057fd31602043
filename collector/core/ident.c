/*
 * Who a process is in a job started without MPI (torchrun, srun, a plain launcher), from the
 * environment variables the launchers set.  Precedence (first complete, valid pair wins):
 *
 *   RANK / WORLD_SIZE                          torchrun and torch.distributed launchers; they run
 *                                              one worker per GPU under srun or mpirun too, so
 *                                              their numbering is the one NCCL uses
 *   SLURM_PROCID / SLURM_NTASKS                srun
 *   OMPI_COMM_WORLD_RANK / OMPI_COMM_WORLD_SIZE  Open MPI's mpirun
 *   PMI_RANK / PMI_SIZE                        MPICH / Intel MPI (Hydra)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "front.h"
#include "internal.h"

/* Parse a decimal in [lo, hi].  Returns 0, 1 when unset, -1 when malformed. */
static int env_int(const char *name, long lo, long hi, int *out)
{
    const char *v = getenv(name);
    if (!v || !*v)
        return 1;
    char *end;
    long x = strtol(v, &end, 10);
    if (*end || x < lo || x > hi)
        return -1;
    *out = (int)x;
    return 0;
}

void cs__ident_from_env(struct cs__ident *id)
{
    static const struct {
        const char *rank, *size;
        uint32_t source;
    } pairs[] = {
        {"RANK", "WORLD_SIZE", CS_RANKSRC_TORCH},
        {"SLURM_PROCID", "SLURM_NTASKS", CS_RANKSRC_SLURM},
        {"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", CS_RANKSRC_OMPI},
        {"PMI_RANK", "PMI_SIZE", CS_RANKSRC_PMI},
    };
    *id = (struct cs__ident){
        .rank = 0, .size = 1, .local_rank = -1, .source = CS_RANKSRC_SINGLE, .rank_var = ""};
    for (size_t i = 0; i < sizeof pairs / sizeof pairs[0]; i++) {
        int r = 0, n = 0;
        int rr = env_int(pairs[i].rank, 0, (1 << 24) - 1, &r);
        int rn = env_int(pairs[i].size, 1, 1 << 24, &n);
        if (rr == 1 && rn == 1)
            continue;
        if (rr != 0 || rn != 0 || r >= n) {
            const char *rv = getenv(pairs[i].rank), *nv = getenv(pairs[i].size);
            cs_warn("%s=\"%s\" and %s=\"%s\" do not give a rank below a world size; ignoring them",
                    pairs[i].rank, rv ? rv : "(unset)", pairs[i].size, nv ? nv : "(unset)");
            continue;
        }
        id->rank = r;
        id->size = n;
        id->source = pairs[i].source;
        id->rank_var = pairs[i].rank;
        break;
    }
    id->local_rank = cs__ident_local_rank();
}

int cs__ident_local_rank(void)
{
    static const char *const local[] = {"LOCAL_RANK", "SLURM_LOCALID", "OMPI_COMM_WORLD_LOCAL_RANK",
                                        "MPI_LOCALRANKID", "PMI_LOCAL_RANK"};
    for (size_t i = 0; i < sizeof local / sizeof local[0]; i++) {
        int l;
        if (env_int(local[i], 0, 1 << 20, &l) == 0)
            return l;
    }
    return -1;
}

static uint64_t fnv(uint64_t h, const char *s)
{
    for (; s && *s; s++) {
        h ^= (unsigned char)*s;
        h *= 0x100000001b3ull;
    }
    h ^= 0xff; /* separator, so ("ab","c") and ("a","bc") differ */
    h *= 0x100000001b3ull;
    return h;
}

uint64_t cs__ident_run_id(int world_size)
{
    const char *v = getenv("COMMSCOPE_RUN_ID");
    if (v && *v) {
        char *end;
        unsigned long long x = strtoull(v, &end, 16);
        if (!*end && x)
            return x;
        cs_warn("COMMSCOPE_RUN_ID=\"%s\" is not a non-zero hex number; deriving the run id from "
                "the job's environment",
                v);
    }
    static const char *const vars[] = {"TORCHELASTIC_RUN_ID", "SLURM_JOB_ID", "SLURM_STEP_ID",
                                       "MASTER_ADDR",         "MASTER_PORT",  "COMMSCOPE_DIR"};
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++)
        h = fnv(h, getenv(vars[i]));
    char ws[16];
    snprintf(ws, sizeof ws, "%d", world_size);
    h = fnv(h, ws);
    return h ? h : 1;
}

void cs__clock_sample_realtime(struct cs_clock_sample *s)
{
    memset(s, 0, sizeof *s);
    uint64_t best = UINT64_MAX;
    for (int k = 0; k < 8; k++) {
        struct timespec rt;
        uint64_t a = cs_now();
        clock_gettime(CLOCK_REALTIME, &rt);
        uint64_t b = cs_now();
        if (b - a < best) {
            best = b - a;
            s->local_ns = a + (b - a) / 2;
            s->offset_ns =
                (int64_t)((uint64_t)rt.tv_sec * 1000000000ull + (uint64_t)rt.tv_nsec - s->local_ns);
            s->rtt_ns = best;
        }
    }
    s->rounds = 8;
    s->valid = 1;
    /* Tests only: COMMSCOPE_TEST_REALTIME_SKEW=RANK:NS makes this rank's host look NS away from
     * the others' CLOCK_REALTIME (hosts whose time is not synchronised). */
    const char *v = getenv("COMMSCOPE_TEST_REALTIME_SKEW");
    if (v && *v) {
        char *end;
        long r = strtol(v, &end, 10);
        long long ns = *end == ':' ? strtoll(end + 1, &end, 10) : 0;
        if (*end == '\0' && r == cs__rank)
            s->offset_ns += ns;
    }
}
