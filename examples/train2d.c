/*
 * cs_train2d: a small but real 2-D parallel training job (tensor parallel x data parallel) in
 * C + MPI, with known ground truth for commscope's step, gradient-sync and group analysis.
 *
 * The world is split with MPI_Comm_split into TP groups of --tp consecutive ranks (color
 * rank / tp) and DP groups of the ranks with the same TP position (color rank % tp).  The model is
 * a residual MLP of L blocks h <- h + W2 tanh(W1 h), Megatron style: W1 is split by rows (hidden
 * units) and W2 by columns across the TP group, so every block all-reduces its output in the TP
 * group in forward, and its input gradient in backward.  Each TP rank's parameter shard is then
 * averaged over its DP group with one MPI_Allreduce per block (bucket), last block first
 * (--overlap: each block's MPI_Iallreduce starts as soon as backward has produced its gradients,
 * one MPI_Waitall before the update), and SGD updates it.  Each DP replica trains on its own data.
 *
 * The program measures itself: every step's duration (start to the next step's start) and its
 * time in gradient averaging (the DP all-reduces and their MPI_Waitall), printed per rank with
 * its communicator layout after MPI_Finalize.
 */
#include <math.h>
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define D 32     /* model width */
#define HID 128  /* hidden units per block, over the whole TP group */
#define LAYERS 3 /* residual blocks */
#define BATCH 32 /* samples per DP replica per step */

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static double grad_s; /* seconds in gradient averaging this step */

static uint64_t rng_next(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static double rng_sym(uint64_t *s)
{
    return 2.0 * ((double)(rng_next(s) >> 11) * (1.0 / 9007199254740992.0)) - 1.0;
}

struct opts {
    int steps, tp, overlap, marker, slow_rank;
    double slow_factor;
};

static int parse(int argc, char **argv, struct opts *o, int rank)
{
    *o = (struct opts){.steps = 10, .tp = 2, .slow_rank = -1, .slow_factor = 2};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(a, "--overlap") == 0) {
            o->overlap = 1;
        } else if (strcmp(a, "--steps-marker") == 0) {
            o->marker = 1;
        } else if (strcmp(a, "--help") == 0) {
            if (rank == 0)
                printf("usage: cs_train2d [--steps N] [--tp T] [--overlap]\n"
                       "                  [--steps-marker] [--slow-rank R --slow-factor F]\n");
            return 1;
        } else if (v && (strcmp(a, "--steps") == 0 || strcmp(a, "--tp") == 0 ||
                         strcmp(a, "--slow-rank") == 0 || strcmp(a, "--slow-factor") == 0)) {
            char *end;
            double x = strtod(v, &end);
            if (*end || !(x >= 0) || x > 1e6) {
                if (rank == 0)
                    fprintf(stderr, "cs_train2d: bad value '%s' for %s\n", v, a);
                return -1;
            }
            if (strcmp(a, "--steps") == 0)
                o->steps = (int)x;
            else if (strcmp(a, "--tp") == 0)
                o->tp = (int)x;
            else if (strcmp(a, "--slow-rank") == 0)
                o->slow_rank = (int)x;
            else
                o->slow_factor = x;
            i++;
        } else {
            if (rank == 0)
                fprintf(stderr, "cs_train2d: unknown option or missing value '%s'\n", a);
            return -1;
        }
    }
    if (o->steps < 1 || o->tp < 1 || o->slow_factor < 1) {
        if (rank == 0)
            fprintf(stderr, "cs_train2d: --steps and --tp must be >= 1, --slow-factor >= 1\n");
        return -1;
    }
    return 0;
}

/* The slow rank spins (F-1) times as long as each compute phase took. */
static double slow = 1;
static volatile double sink;
static void phase_end(double t0)
{
    if (slow <= 1)
        return;
    double until = t0 + slow * (now_s() - t0), x = 1;
    while (now_s() < until)
        x = x * 1.0000001 + 1e-9;
    sink = x;
}

static void allreduce_timed(double *buf, int n, MPI_Comm c, int is_grad)
{
    double t0 = now_s();
    MPI_Allreduce(MPI_IN_PLACE, buf, n, MPI_DOUBLE, MPI_SUM, c);
    if (is_grad)
        grad_s += now_s() - t0;
}

/* Shard tpr of the weights (the same full model on every replica) and the data of replica dpr. */
static void init_model(double *w, double *x, double *y, int F, int tpr, int dpr)
{
    const size_t per = 2 * (size_t)F * D;
    /* The same full model on every replica: shard tpr of weights drawn from seed 11. */
    uint64_t s = 11;
    for (int l = 0; l < LAYERS; l++)
        for (int k = 0; k < 2; k++)
            for (int i = 0; i < HID; i++)
                for (int j = 0; j < D; j++) {
                    double v = 0.3 * rng_sym(&s) / sqrt(D);
                    if (i / F == tpr)
                        w[l * per + (size_t)k * F * D + (size_t)(i % F) * D + j] = v;
                }
    /* Data of this DP replica (the same on its TP ranks); target: a fixed function of x. */
    uint64_t ds = 500 + (uint64_t)dpr;
    for (int b = 0; b < BATCH; b++) {
        double t = 0;
        for (int j = 0; j < D; j++) {
            x[b * D + j] = rng_sym(&ds);
            t += (j % 3 ? 0.2 : -0.1) * x[b * D + j];
        }
        y[b] = tanh(t);
    }
}

/* Loss 0.5 (mean(h_L) - y)^2 per sample, and its gradient dh. */
static double loss_grad(const double *hL, const double *y, double *dh)
{
    double loss = 0;
    for (int b = 0; b < BATCH; b++) {
        double m = 0;
        for (int j = 0; j < D; j++)
            m += hL[b * D + j] / D;
        loss += 0.5 * (m - y[b]) * (m - y[b]) / BATCH;
        for (int j = 0; j < D; j++)
            dh[b * D + j] = (m - y[b]) / D / BATCH;
    }
    return loss;
}

/* Rank 0's report: the groups and every rank's step times (all: nv values per rank). */
static void print_report(const double *all, int nv, int size, int T, const struct opts *o)
{
    printf("cs_train2d: ranks=%d tp=%d dp=%d steps=%d overlap=%d buckets=%d\n", size, T, size / T,
           o->steps, o->overlap, LAYERS);
    for (int c = 0; c < size / T; c++) {
        printf("cs_train2d: group tp ranks=");
        for (int i = 0; i < T; i++)
            printf("%s%d", i ? "," : "", c * T + i);
        printf("\n");
    }
    for (int c = 0; c < T; c++) {
        printf("cs_train2d: group dp ranks=");
        for (int i = 0; i < size / T; i++)
            printf("%s%d", i ? "," : "", c + i * T);
        printf("\n");
    }
    for (int r = 0; r < size; r++)
        for (int k = 0; k < o->steps; k++)
            printf("cs_train2d: rank %d step %d time_s=%.9f grad_sync_s=%.9f\n", r, k,
                   all[(size_t)r * nv + 2 * k], all[(size_t)r * nv + 2 * k + 1]);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    struct opts o;
    int pr = parse(argc, argv, &o, rank);
    if (!pr && (size % o.tp || HID % o.tp)) {
        if (rank == 0)
            fprintf(stderr,
                    "cs_train2d: the world (%d) and %d hidden units must divide by --tp"
                    " %d\n",
                    size, HID, o.tp);
        pr = -1;
    }
    if (pr) {
        MPI_Finalize();
        return pr > 0 ? 0 : 2;
    }
    if (rank == o.slow_rank)
        slow = o.slow_factor;
    const int T = o.tp, F = HID / T, tpr = rank % T, dpr = rank / T;
    MPI_Comm tp, dp;
    MPI_Comm_split(MPI_COMM_WORLD, rank / T, rank, &tp);
    MPI_Comm_split(MPI_COMM_WORLD, rank % T, rank, &dp);

    /* Shards: W1[l] is F x D (this rank's hidden units), W2[l] is D x F (their columns). */
    const size_t per = 2 * (size_t)F * D, P = LAYERS * per;
    double *w = malloc(P * sizeof *w), *g = malloc(P * sizeof *g);
    double *h = malloc((size_t)(LAYERS + 1) * BATCH * D * sizeof *h);
    double *a = malloc((size_t)LAYERS * BATCH * F * sizeof *a);
    double *buf = malloc((size_t)BATCH * D * sizeof *buf), *dh = malloc(BATCH * D * sizeof *dh);
    double *x = malloc((size_t)BATCH * D * sizeof *x), *y = malloc(BATCH * sizeof *y);
    double *step_t = calloc((size_t)o.steps, sizeof *step_t);
    double *step_g = calloc((size_t)o.steps, sizeof *step_g);
    MPI_Request *req = malloc(LAYERS * sizeof *req);
    if (!w || !g || !h || !a || !buf || !dh || !x || !y || !step_t || !step_g || !req) {
        fprintf(stderr, "cs_train2d[rank %d]: out of memory\n", rank);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    init_model(w, x, y, F, tpr, dpr);

    double t_step = 0, g_step = 0, loss = 0;
    for (int step = 0; step < o.steps; step++) {
        if (step > 0) {
            step_t[step - 1] = now_s() - t_step;
            step_g[step - 1] = grad_s - g_step;
        }
        t_step = now_s();
        g_step = grad_s;
        if (o.marker)
            MPI_Pcontrol(1);
        memcpy(h, x, (size_t)BATCH * D * sizeof *h);
        /* Forward: each block's partial output is summed over the TP group. */
        for (int l = 0; l < LAYERS; l++) {
            double t0 = now_s();
            const double *W1 = w + l * per, *W2 = W1 + (size_t)F * D;
            const double *hl = h + (size_t)l * BATCH * D;
            double *al = a + (size_t)l * BATCH * F;
            for (int b = 0; b < BATCH; b++) {
                for (int i = 0; i < F; i++) {
                    double u = 0;
                    for (int j = 0; j < D; j++)
                        u += W1[i * D + j] * hl[b * D + j];
                    al[b * F + i] = tanh(u);
                }
                for (int j = 0; j < D; j++) {
                    double v = 0;
                    for (int i = 0; i < F; i++)
                        v += W2[i * D + j] * al[b * F + i];
                    buf[b * D + j] = v;
                }
            }
            phase_end(t0);
            allreduce_timed(buf, BATCH * D, tp, 0);
            for (int k = 0; k < BATCH * D; k++)
                h[(size_t)(l + 1) * BATCH * D + k] = hl[k] + buf[k];
        }
        loss = loss_grad(h + (size_t)LAYERS * BATCH * D, y, dh);
        /* Backward, last block first; the input gradient is summed over the TP group. */
        memset(g, 0, P * sizeof *g);
        for (int l = LAYERS - 1; l >= 0; l--) {
            double t0 = now_s();
            const double *W1 = w + l * per, *W2 = W1 + (size_t)F * D;
            double *G1 = g + l * per, *G2 = G1 + (size_t)F * D;
            const double *hl = h + (size_t)l * BATCH * D, *al = a + (size_t)l * BATCH * F;
            memset(buf, 0, (size_t)BATCH * D * sizeof *buf);
            for (int b = 0; b < BATCH; b++)
                for (int i = 0; i < F; i++) {
                    double da = 0;
                    for (int j = 0; j < D; j++) {
                        G2[i * D + j] += dh[b * D + j] * al[b * F + i];
                        da += W2[i * D + j] * dh[b * D + j];
                    }
                    double du = da * (1 - al[b * F + i] * al[b * F + i]);
                    for (int j = 0; j < D; j++) {
                        G1[i * D + j] += du * hl[b * D + j];
                        buf[b * D + j] += W1[i * D + j] * du;
                    }
                }
            phase_end(t0);
            allreduce_timed(buf, BATCH * D, tp, 0);
            for (int k = 0; k < BATCH * D; k++)
                dh[k] += buf[k];
            /* With --overlap, the block's bucket starts as soon as its gradients are done. */
            if (o.overlap) {
                double tg = now_s();
                MPI_Iallreduce(MPI_IN_PLACE, G1, (int)per, MPI_DOUBLE, MPI_SUM, dp, &req[l]);
                grad_s += now_s() - tg;
            }
        }
        /* Gradient averaging over the DP group. */
        if (o.overlap) {
            double tg = now_s();
            MPI_Waitall(LAYERS, req, MPI_STATUSES_IGNORE);
            grad_s += now_s() - tg;
        } else {
            for (int l = LAYERS - 1; l >= 0; l--)
                allreduce_timed(g + (size_t)l * per, (int)per, dp, 1);
        }
        double t0 = now_s();
        const double lr = 0.5 / (size / T);
        for (size_t i = 0; i < P; i++)
            w[i] -= lr * g[i];
        phase_end(t0);
        if (step % 5 == 0 || step == o.steps - 1) {
            double gl = 0;
            MPI_Allreduce(&loss, &gl, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
            if (rank == 0)
                printf("cs_train2d: step %d loss=%.6f\n", step, gl / size);
        }
    }
    step_t[o.steps - 1] = now_s() - t_step;
    step_g[o.steps - 1] = grad_s - g_step;

    /* Ground truth to rank 0: per step time and gradient-sync time. */
    int nv = 2 * o.steps;
    double *mine = malloc((size_t)nv * sizeof *mine);
    double *all = rank == 0 ? malloc((size_t)nv * size * sizeof *all) : NULL;
    if (!mine || (rank == 0 && !all))
        MPI_Abort(MPI_COMM_WORLD, 1);
    for (int k = 0; k < o.steps; k++) {
        mine[2 * k] = step_t[k];
        mine[2 * k + 1] = step_g[k];
    }
    MPI_Gather(mine, nv, MPI_DOUBLE, all, nv, MPI_DOUBLE, 0, MPI_COMM_WORLD);
    MPI_Comm_free(&tp);
    MPI_Comm_free(&dp);
    MPI_Finalize();
    if (rank == 0)
        print_report(all, nv, size, T, &o);
    free(all);
    free(mine);
    free(w);
    free(g);
    free(h);
    free(a);
    free(buf);
    free(dh);
    free(x);
    free(y);
    free(step_t);
    free(step_g);
    free(req);
    return 0;
}
