/*
 * cs_train: a small but real data-parallel training job in C + MPI, the workload commscope is
 * demonstrated and tested on.
 *
 * Every rank holds the same multi-layer perceptron (input -> H -> H -> 1, tanh, logistic output)
 * and its own shard of a synthetic binary classification problem (a fixed linear teacher; inputs
 * drawn with a per-rank seed).  Each step runs a real forward and backward pass over the shard,
 * averages the gradients over all ranks with MPI_Allreduce in K buckets (fixed-size chunks of
 * the flat parameter vector, last layer first, as DDP does) and takes one SGD step.  With
 * --overlap each bucket's MPI_Iallreduce starts as soon as backward has produced it, and all are
 * waited with one MPI_Waitall before the update.
 *
 * The program measures itself, independently of commscope: every MPI call between MPI_Init and
 * MPI_Finalize is timed and counted here, and so is every step (from its start to the next step's
 * start; the last one to the end of the loop) and the time each step spent in gradient averaging
 * (its all-reduce calls and MPI_Waitall, the loss all-reduce included), so tests can hold
 * commscope's report against it.
 */
#include <math.h>
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define N_INPUT 64

/* The MPI operations this program calls between MPI_Init and MPI_Finalize, as commscope names them.
 */
enum { OP_ALLREDUCE, OP_IALLREDUCE, OP_WAITALL, OP_GATHER, OP_PCONTROL, N_OPS };
static const char *const op_names[N_OPS] = {
    [OP_ALLREDUCE] = "MPI_Allreduce", [OP_IALLREDUCE] = "MPI_Iallreduce",
    [OP_WAITALL] = "MPI_Waitall",     [OP_GATHER] = "MPI_Gather",
    [OP_PCONTROL] = "MPI_Pcontrol",
};

struct op_stat {
    uint64_t calls;
    uint64_t bytes; /* count x type size this rank contributed, summed over calls */
};

static struct op_stat stats[N_OPS];
static double mpi_s;  /* seconds spent inside this program's MPI calls */
static double grad_s; /* of that, in gradient averaging (every all-reduce and its Waitall) */

/* CLOCK_MONOTONIC and the process's CPU time (every thread), in ns. */
static long long clock_ns(clockid_t id)
{
    struct timespec ts;
    clock_gettime(id, &ts);
    return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/*
 * --nvtx: the phases of a step as NVTX ranges, named as Megatron-LM's timers are (which
 * commscope's step phases know).  Each push and pop is bracketed on CLOCK_MONOTONIC (a before the
 * push, b after it, c before the pop, d after it), printed per rank and step at exit.
 */
#ifdef CS_TRAIN_NVTX
#include <nvtx3/nvToolsExt.h>
#endif
enum { PH_FORWARD, PH_BACKWARD, PH_OPTIMIZER, PH_N };
static const char *const ph_names[PH_N] = {"forward-compute", "backward-compute", "optimizer"};
static long long (*ph_t)[PH_N][4]; /* [step][phase][a b c d] */
static int ph_on;

static void ph_push(int step, int ph)
{
    if (!ph_on)
        return;
    ph_t[step][ph][0] = clock_ns(CLOCK_MONOTONIC);
#ifdef CS_TRAIN_NVTX
    nvtxRangePushA(ph_names[ph]);
#endif
    ph_t[step][ph][1] = clock_ns(CLOCK_MONOTONIC);
}

static void ph_pop(int step, int ph)
{
    if (!ph_on)
        return;
    ph_t[step][ph][2] = clock_ns(CLOCK_MONOTONIC);
#ifdef CS_TRAIN_NVTX
    nvtxRangePop();
#endif
    ph_t[step][ph][3] = clock_ns(CLOCK_MONOTONIC);
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Time and count one MPI call.  MPI's default error handler aborts on failure. */
#define TIMED_MPI(op, nbytes, call)                                                                \
    do {                                                                                           \
        double t0_ = now_s();                                                                      \
        (void)(call);                                                                              \
        double dt_ = now_s() - t0_;                                                                \
        mpi_s += dt_;                                                                              \
        if ((op) == OP_ALLREDUCE || (op) == OP_IALLREDUCE || (op) == OP_WAITALL)                   \
            grad_s += dt_;                                                                         \
        stats[op].calls++;                                                                         \
        stats[op].bytes += (uint64_t)(nbytes);                                                     \
    } while (0)

struct opts {
    int steps, hidden, batch, buckets, overlap, slow_rank, steps_marker, print_every, nvtx;
    double slow_factor, lr;
};

static void usage(FILE *f)
{
    fprintf(
        f,
        "usage: cs_train [--steps N] [--overlap] [--slow-rank R --slow-factor F] [--hidden H]\n"
        "                [--batch B] [--buckets K] [--steps-marker] [--nvtx] [--lr X]\n"
        "  --steps N         training steps (default 20)\n"
        "  --overlap         start each bucket's MPI_Iallreduce during backward, MPI_Waitall\n"
        "                    before the update (default: MPI_Allreduce per bucket after backward)\n"
        "  --slow-rank R     rank R computes --slow-factor F times longer (default F 2)\n"
        "  --hidden H        width of both hidden layers (default 256)\n"
        "  --batch B         samples per rank per step (default 128)\n"
        "  --buckets K       gradient buckets (default 4)\n"
        "  --steps-marker    MPI_Pcontrol(1) at the start of every step\n"
        "  --nvtx            NVTX ranges forward-compute, backward-compute (with the gradient\n"
        "                    all-reduces) and optimizer in every step (builds with NVTX only)\n"
        "  --lr X            learning rate (default 0.5)\n");
}

/* Returns 0, 1 after --help, or -1 after a message (printed by rank 0 only). */
static int parse(int argc, char **argv, struct opts *o, int rank)
{
    *o = (struct opts){.steps = 20,
                       .hidden = 256,
                       .batch = 128,
                       .buckets = 4,
                       .slow_rank = -1,
                       .slow_factor = 2.0,
                       .lr = 0.5,
                       .print_every = 5};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        char *end = NULL;
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            if (rank == 0)
                usage(stdout);
            return 1;
        } else if (strcmp(a, "--overlap") == 0) {
            o->overlap = 1;
            continue;
        } else if (strcmp(a, "--steps-marker") == 0) {
            o->steps_marker = 1;
            continue;
        } else if (strcmp(a, "--nvtx") == 0) {
#ifndef CS_TRAIN_NVTX
            if (rank == 0)
                fprintf(stderr, "cs_train: --nvtx: built without the NVTX header (nvtx3)\n");
            return -1;
#endif
            o->nvtx = 1;
            continue;
        }
        int is_int = strcmp(a, "--steps") == 0 || strcmp(a, "--hidden") == 0 ||
                     strcmp(a, "--batch") == 0 || strcmp(a, "--buckets") == 0 ||
                     strcmp(a, "--slow-rank") == 0;
        int is_dbl = strcmp(a, "--slow-factor") == 0 || strcmp(a, "--lr") == 0;
        if (!is_int && !is_dbl) {
            if (rank == 0)
                fprintf(stderr, "cs_train: unknown option '%s'; see cs_train --help\n", a);
            return -1;
        }
        if (!v) {
            if (rank == 0)
                fprintf(stderr, "cs_train: option '%s' needs a value\n", a);
            return -1;
        }
        i++;
        if (is_int) {
            long x = strtol(v, &end, 10);
            int lo = strcmp(a, "--slow-rank") == 0 ? 0 : 1;
            if (*v == '\0' || *end != '\0' || x < lo || x > 1000000) {
                if (rank == 0)
                    fprintf(stderr, "cs_train: %s wants an integer in [%d, 1000000], not '%s'\n", a,
                            lo, v);
                return -1;
            }
            if (strcmp(a, "--steps") == 0)
                o->steps = (int)x;
            else if (strcmp(a, "--hidden") == 0)
                o->hidden = (int)x;
            else if (strcmp(a, "--batch") == 0)
                o->batch = (int)x;
            else if (strcmp(a, "--buckets") == 0)
                o->buckets = (int)x;
            else
                o->slow_rank = (int)x;
        } else {
            double x = strtod(v, &end);
            if (*v == '\0' || *end != '\0' || !(x > 0) || x > 1e6) {
                if (rank == 0)
                    fprintf(stderr, "cs_train: %s wants a positive number, not '%s'\n", a, v);
                return -1;
            }
            if (strcmp(a, "--lr") == 0)
                o->lr = x;
            else
                o->slow_factor = x;
        }
    }
    if (o->slow_factor < 1.0) {
        if (rank == 0)
            fprintf(stderr, "cs_train: --slow-factor must be at least 1\n");
        return -1;
    }
    return 0;
}

/* splitmix64: a small, well-mixed generator so every run sees the same data. */
static uint64_t rng_next(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static double rng_uniform(uint64_t *s)
{
    return (double)(rng_next(s) >> 11) * (1.0 / 9007199254740992.0);
}

static double rng_normal(uint64_t *s)
{
    double u1 = rng_uniform(s), u2 = rng_uniform(s);
    if (u1 < 1e-300)
        u1 = 1e-300;
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

/* Layer l maps in[l] inputs to out[l] outputs; its W (out x in) then b (out) sit at off[l]. */
#define N_LAYERS 3
struct model {
    int in[N_LAYERS], out[N_LAYERS];
    size_t off[N_LAYERS + 1]; /* off[N_LAYERS] = number of parameters */
    double *w;                /* parameters */
    double *g;                /* gradients, same layout */
};

/*
 * Slowing one rank down: after each compute phase the slow rank keeps the CPU busy for
 * (F-1) times that phase's own duration, so it arrives late at every collective in proportion.
 */
static double slow_factor = 1.0;
static volatile double spin_sink;

static void phase_end(double t0)
{
    if (slow_factor <= 1.0)
        return;
    double until = t0 + slow_factor * (now_s() - t0);
    double x = 1.0;
    while (now_s() < until)
        for (int i = 0; i < 1000; i++)
            x = x * 1.0000001 + 1e-9;
    spin_sink = x;
}

struct bucket {
    size_t lo, n; /* parameter range [lo, lo + n) */
    int started;
};

/* Start every bucket whose parameters backward has finished (all indices >= ready_from). */
static void start_ready_buckets(struct bucket *bk, int nb, size_t ready_from, double *g,
                                MPI_Request *req)
{
    for (int k = 0; k < nb; k++) {
        if (bk[k].started || bk[k].lo < ready_from)
            continue;
        TIMED_MPI(OP_IALLREDUCE, bk[k].n * sizeof(double),
                  MPI_Iallreduce(MPI_IN_PLACE, g + bk[k].lo, (int)bk[k].n, MPI_DOUBLE, MPI_SUM,
                                 MPI_COMM_WORLD, &req[k]));
        bk[k].started = 1;
    }
}

/* The measurements each rank sends rank 0: wall, MPI and compute time, per op (calls, bytes),
 * then per step (time, time in gradient averaging). */
enum { V_WALL, V_MPI, V_COMPUTE, V_OPS, V_STEPS = V_OPS + 2 * N_OPS };

/* The model's weights and this rank's data. */
static void init_model(struct model *mm, double *x, double *y, int B, int rank)
{
    /* Same initial weights on every rank (seed 7), as data parallelism requires. */
    uint64_t seed = 7;
    for (int l = 0; l < N_LAYERS; l++) {
        double lim = sqrt(6.0 / (mm->in[l] + mm->out[l]));
        size_t nw = (size_t)mm->out[l] * (size_t)mm->in[l];
        for (size_t i = 0; i < nw; i++)
            mm->w[mm->off[l] + i] = lim * (2.0 * rng_uniform(&seed) - 1.0);
        memset(mm->w + mm->off[l] + nw, 0, (size_t)mm->out[l] * sizeof(double));
    }
    /* The data: a fixed linear teacher (seed 42) labels Gaussian inputs drawn per rank. */
    double teacher[N_INPUT];
    uint64_t tseed = 42;
    for (int i = 0; i < N_INPUT; i++)
        teacher[i] = rng_normal(&tseed);
    uint64_t dseed = 1000 + (uint64_t)rank;
    for (int b = 0; b < B; b++) {
        double s = 0;
        for (int i = 0; i < N_INPUT; i++) {
            x[b * N_INPUT + i] = rng_normal(&dseed);
            s += teacher[i] * x[b * N_INPUT + i];
        }
        y[b] = s > 0 ? 1.0 : 0.0;
    }
}

/* Buckets are equal chunks of the flat parameter vector, numbered from its end: the output
 * layer's gradients come first out of backward, so bucket 0 is ready first. */
static void split_buckets(struct bucket *bk, int K, size_t P)
{
    size_t chunk = (P + (size_t)K - 1) / (size_t)K;
    for (int k = 0; k < K; k++) {
        size_t hi = P - (size_t)k * chunk;
        bk[k].lo = hi > chunk ? hi - chunk : 0;
        bk[k].n = hi - bk[k].lo;
    }
}

/* Rank 0's report of every rank's measurements (all: nv values per rank). */
static void print_report(const double *all, int nv, int size, const struct opts *o, int K, size_t P,
                         double final_loss)
{
    printf("cs_train: ranks=%d steps=%d overlap=%d buckets=%d params=%zu\n", size, o->steps,
           o->overlap, K, P);
    for (int op = 0; op < N_OPS; op++) {
        uint64_t calls = 0, bytes = 0;
        for (int r = 0; r < size; r++) {
            calls += (uint64_t)all[(size_t)r * nv + V_OPS + 2 * op];
            bytes += (uint64_t)all[(size_t)r * nv + V_OPS + 2 * op + 1];
        }
        /* MPI_Pcontrol is a marker, not communication: commscope records it as a step
         * boundary, not among its per-op totals, so it gets its own line. */
        if (calls && op == OP_PCONTROL)
            printf("cs_train: marker %s calls=%llu\n", op_names[op], (unsigned long long)calls);
        else if (calls)
            printf("cs_train: op %s calls=%llu bytes=%llu\n", op_names[op],
                   (unsigned long long)calls, (unsigned long long)bytes);
    }
    double sum = 0, max = 0;
    for (int r = 0; r < size; r++) {
        const double *v = all + (size_t)r * nv;
        printf("cs_train: rank %d wall_s=%.6f mpi_s=%.6f compute_s=%.6f\n", r, v[V_WALL], v[V_MPI],
               v[V_COMPUTE]);
        sum += v[V_COMPUTE];
        if (v[V_COMPUTE] > max)
            max = v[V_COMPUTE];
    }
    printf("cs_train: load_balance=%.4f\n", max > 0 ? sum / size / max : 1.0);
    for (int r = 0; r < size; r++)
        for (int s = 0; s < o->steps; s++)
            printf("cs_train: rank %d step %d time_s=%.9f grad_sync_s=%.9f\n", r, s,
                   all[(size_t)r * nv + V_STEPS + 2 * s],
                   all[(size_t)r * nv + V_STEPS + 2 * s + 1]);
    /* After the steps: each rank's steps span (CLOCK_MONOTONIC and CPU time at both ends), then
     * with --nvtx its phase brackets; printed here, by rank 0, so that no rank's line is cut by
     * another's in the launcher's output. */
    for (int r = 0; r < size; r++) {
        const double *v = all + (size_t)r * nv + V_STEPS + 2 * o->steps;
        printf("cs_train: rank %d steps_span t0_ns=%.0f t1_ns=%.0f cpu0_ns=%.0f cpu1_ns=%.0f\n", r,
               v[0], v[1], v[2], v[3]);
        for (int s = 0; o->nvtx && s < o->steps; s++)
            for (int q = 0; q < PH_N; q++) {
                const double *b = v + 4 + (size_t)(s * PH_N + q) * 4;
                printf("cs_train: rank %d phase %s step %d a=%.0f b=%.0f c=%.0f d=%.0f\n", r,
                       ph_names[q], s, b[0], b[1], b[2], b[3]);
            }
    }
    printf("cs_train: final_loss=%.6f\n", final_loss);
}

/* The forward pass over the batch: the activations a1, a2, the outputs p and the output error d3;
 * returns the summed loss. */
static double forward(const struct model *m, const double *x, const double *y, double *a1,
                      double *a2, double *p, double *d3, int B)
{
    const int H = m->out[0];
    const double *W0 = m->w + m->off[0], *b0 = W0 + (size_t)H * N_INPUT;
    const double *W1 = m->w + m->off[1], *b1 = W1 + (size_t)H * H;
    const double *W2 = m->w + m->off[2], *b2 = W2 + H;
    double loss = 0;
    for (int b = 0; b < B; b++) {
        const double *xb = x + (size_t)b * N_INPUT;
        double *h1 = a1 + (size_t)b * H, *h2 = a2 + (size_t)b * H;
        for (int j = 0; j < H; j++) {
            const double *wr = W0 + (size_t)j * N_INPUT;
            double s = b0[j];
            for (int i = 0; i < N_INPUT; i++)
                s += wr[i] * xb[i];
            h1[j] = tanh(s);
        }
        for (int j = 0; j < H; j++) {
            const double *wr = W1 + (size_t)j * H;
            double s = b1[j];
            for (int i = 0; i < H; i++)
                s += wr[i] * h1[i];
            h2[j] = tanh(s);
        }
        double z = b2[0];
        for (int i = 0; i < H; i++)
            z += W2[i] * h2[i];
        p[b] = 1.0 / (1.0 + exp(-z));
        /* Binary cross-entropy from the logit, stable for large |z|. */
        loss += (z > 0 ? z : 0) - z * y[b] + log1p(exp(-fabs(z)));
        d3[b] = (p[b] - y[b]) / B;
    }
    return loss;
}

/* The input layer's gradients from its error d1. */
static void grad_input(struct model *m, const double *x, const double *d1, int B)
{
    const int H = m->out[0];
    double *gW0 = m->g + m->off[0], *gb0 = gW0 + (size_t)H * N_INPUT;
    for (int b = 0; b < B; b++) {
        const double *xb = x + (size_t)b * N_INPUT, *e1 = d1 + (size_t)b * H;
        for (int j = 0; j < H; j++) {
            double *gr = gW0 + (size_t)j * N_INPUT;
            for (int i = 0; i < N_INPUT; i++)
                gr[i] += e1[j] * xb[i];
            gb0[j] += e1[j];
        }
    }
}

/* Gradient averaging: the buckets not yet started, then the wait for all (--overlap); or one
 * blocking all-reduce per bucket. */
static void average_gradients(struct bucket *bk, int K, double *g, MPI_Request *req, int overlap)
{
    if (overlap) {
        start_ready_buckets(bk, K, 0, g, req);
        TIMED_MPI(OP_WAITALL, 0, MPI_Waitall(K, req, MPI_STATUSES_IGNORE));
    } else {
        for (int k = 0; k < K; k++)
            TIMED_MPI(OP_ALLREDUCE, bk[k].n * sizeof(double),
                      MPI_Allreduce(MPI_IN_PLACE, g + bk[k].lo, (int)bk[k].n, MPI_DOUBLE, MPI_SUM,
                                    MPI_COMM_WORLD));
    }
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    /* The wall clock starts here; MPI_Comm_rank/size above are local queries (not traced). */
    double t_start = now_s();

    struct opts o;
    int pr = parse(argc, argv, &o, rank);
    if (pr != 0) {
        MPI_Finalize();
        return pr > 0 ? 0 : 2;
    }
    if (o.slow_rank >= size) {
        if (rank == 0)
            fprintf(stderr, "cs_train: --slow-rank %d, but there are only %d ranks\n", o.slow_rank,
                    size);
        MPI_Finalize();
        return 2;
    }
    if (rank == o.slow_rank)
        slow_factor = o.slow_factor;

    const int H = o.hidden, B = o.batch;
    struct model m = {.in = {N_INPUT, H, H}, .out = {H, H, 1}};
    m.off[0] = 0;
    for (int l = 0; l < N_LAYERS; l++)
        m.off[l + 1] = m.off[l] + (size_t)m.out[l] * (size_t)m.in[l] + (size_t)m.out[l];
    const size_t P = m.off[N_LAYERS];
    if ((size_t)o.buckets > P)
        o.buckets = (int)P;
    const int K = o.buckets;

    m.w = malloc(P * sizeof(double));
    m.g = malloc(P * sizeof(double));
    double *x = malloc((size_t)B * N_INPUT * sizeof(double));
    double *y = malloc((size_t)B * sizeof(double));
    double *a1 = malloc((size_t)B * H * sizeof(double)),
           *a2 = malloc((size_t)B * H * sizeof(double));
    double *d1 = malloc((size_t)B * H * sizeof(double)),
           *d2 = malloc((size_t)B * H * sizeof(double));
    double *p = malloc((size_t)B * sizeof(double)), *d3 = malloc((size_t)B * sizeof(double));
    struct bucket *bk = calloc((size_t)K, sizeof(*bk));
    MPI_Request *req = malloc((size_t)K * sizeof(*req));
    if (!m.w || !m.g || !x || !y || !a1 || !a2 || !d1 || !d2 || !p || !d3 || !bk || !req) {
        fprintf(stderr, "cs_train[rank %d]: out of memory\n", rank);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }

    init_model(&m, x, y, B, rank);

    split_buckets(bk, K, P);

    /* Per step: its duration and its time in gradient averaging. */
    double *step_t = calloc((size_t)o.steps, sizeof(double));
    double *step_g = calloc((size_t)o.steps, sizeof(double));
    if (!step_t || !step_g) {
        fprintf(stderr, "cs_train[rank %d]: out of memory\n", rank);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    double final_loss = 0, t_step = 0, g_step = 0;
    /* The steps' span on CLOCK_MONOTONIC and the process's CPU time at both ends, printed by every
     * rank at exit: what a resource sampler must find between its samples around them. */
    if (o.nvtx) {
        ph_t = calloc((size_t)o.steps, sizeof *ph_t);
        if (!ph_t) {
            fprintf(stderr, "cs_train[rank %d]: out of memory\n", rank);
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
        ph_on = 1;
    }
    long long span_t0 = clock_ns(CLOCK_MONOTONIC), span_c0 = clock_ns(CLOCK_PROCESS_CPUTIME_ID);
    for (int step = 0; step < o.steps; step++) {
        if (step > 0) {
            step_t[step - 1] = now_s() - t_step;
            step_g[step - 1] = grad_s - g_step;
        }
        t_step = now_s();
        g_step = grad_s;
        if (o.steps_marker)
            TIMED_MPI(OP_PCONTROL, 0, MPI_Pcontrol(1));
        for (int k = 0; k < K; k++)
            bk[k].started = 0;

        /* Forward. */
        ph_push(step, PH_FORWARD);
        double t0 = now_s();
        const double *W1 = m.w + m.off[1], *W2 = m.w + m.off[2];
        double loss = forward(&m, x, y, a1, a2, p, d3, B);
        phase_end(t0);
        ph_pop(step, PH_FORWARD);
        ph_push(step, PH_BACKWARD);

        /* Backward, output layer first; with --overlap each ready bucket starts at once. */
        memset(m.g, 0, P * sizeof(double));
        t0 = now_s();
        double *gW2 = m.g + m.off[2], *gb2 = gW2 + H;
        for (int b = 0; b < B; b++) {
            const double *h2 = a2 + (size_t)b * H;
            double *e2 = d2 + (size_t)b * H;
            for (int i = 0; i < H; i++) {
                gW2[i] += d3[b] * h2[i];
                e2[i] = d3[b] * W2[i] * (1.0 - h2[i] * h2[i]);
            }
            gb2[0] += d3[b];
        }
        phase_end(t0);
        if (o.overlap)
            start_ready_buckets(bk, K, m.off[2], m.g, req);

        t0 = now_s();
        double *gW1 = m.g + m.off[1], *gb1 = gW1 + (size_t)H * H;
        memset(d1, 0, (size_t)B * H * sizeof(double));
        for (int b = 0; b < B; b++) {
            const double *h1 = a1 + (size_t)b * H, *e2 = d2 + (size_t)b * H;
            double *e1 = d1 + (size_t)b * H;
            for (int j = 0; j < H; j++) {
                double dj = e2[j];
                double *gr = gW1 + (size_t)j * H;
                const double *wr = W1 + (size_t)j * H;
                for (int i = 0; i < H; i++) {
                    gr[i] += dj * h1[i];
                    e1[i] += dj * wr[i];
                }
                gb1[j] += dj;
            }
            for (int i = 0; i < H; i++)
                e1[i] *= 1.0 - h1[i] * h1[i];
        }
        phase_end(t0);
        if (o.overlap)
            start_ready_buckets(bk, K, m.off[1], m.g, req);

        t0 = now_s();
        grad_input(&m, x, d1, B);
        phase_end(t0);

        average_gradients(bk, K, m.g, req, o.overlap);
        ph_pop(step, PH_BACKWARD);

        /* SGD with the mean gradient over all ranks. */
        ph_push(step, PH_OPTIMIZER);
        t0 = now_s();
        const double scale = o.lr / size;
        for (size_t i = 0; i < P; i++)
            m.w[i] -= scale * m.g[i];
        phase_end(t0);
        ph_pop(step, PH_OPTIMIZER);

        if (step % o.print_every == 0 || step == o.steps - 1) {
            double gl = 0;
            TIMED_MPI(OP_ALLREDUCE, sizeof(double),
                      MPI_Allreduce(&loss, &gl, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD));
            gl /= (double)B * size;
            final_loss = gl;
            if (rank == 0)
                printf("cs_train: step %d loss=%.6f\n", step, gl);
        }
    }

    /*
     * Report: rank 0 gathers every rank's measurements.  The gather is counted before it is made
     * so the counts are exact; its duration cannot travel in the data it carries, so wall_s and
     * mpi_s end where it begins (compute_s is unaffected: the gather is not compute).
     */
    step_t[o.steps - 1] = now_s() - t_step;
    step_g[o.steps - 1] = grad_s - g_step;
    long long span_c1 = clock_ns(CLOCK_PROCESS_CPUTIME_ID), span_t1 = clock_ns(CLOCK_MONOTONIC);
    /* (ns on CLOCK_MONOTONIC and of CPU time travel exactly as doubles: below 2^53) */
    const int nv = V_STEPS + 2 * o.steps + 4 + (o.nvtx ? 4 * PH_N * o.steps : 0);
    double *mine = malloc((size_t)nv * sizeof(double));
    double *all = rank == 0 ? malloc((size_t)nv * (size_t)size * sizeof(double)) : NULL;
    if (!mine || (rank == 0 && !all)) {
        fprintf(stderr, "cs_train: out of memory\n");
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    stats[OP_GATHER].calls++;
    stats[OP_GATHER].bytes += (uint64_t)nv * sizeof(double);
    double wall = now_s() - t_start;
    mine[V_WALL] = wall;
    mine[V_MPI] = mpi_s;
    mine[V_COMPUTE] = wall - mpi_s;
    for (int op = 0; op < N_OPS; op++) {
        mine[V_OPS + 2 * op] = (double)stats[op].calls;
        mine[V_OPS + 2 * op + 1] = (double)stats[op].bytes;
    }
    for (int s = 0; s < o.steps; s++) {
        mine[V_STEPS + 2 * s] = step_t[s];
        mine[V_STEPS + 2 * s + 1] = step_g[s];
    }
    double *span = mine + V_STEPS + 2 * o.steps;
    span[0] = (double)span_t0;
    span[1] = (double)span_t1;
    span[2] = (double)span_c0;
    span[3] = (double)span_c1;
    for (int s = 0; ph_on && s < o.steps; s++)
        for (int q = 0; q < PH_N; q++)
            for (int k = 0; k < 4; k++)
                span[4 + (s * PH_N + q) * 4 + k] = (double)ph_t[s][q][k];
    MPI_Gather(mine, nv, MPI_DOUBLE, all, nv, MPI_DOUBLE, 0, MPI_COMM_WORLD);
    MPI_Finalize();

    /* Printed after MPI_Finalize so printing is outside the traced window. */
    if (rank == 0)
        print_report(all, nv, size, &o, K, P, final_loss);
    free(ph_t);
    free(all);
    free(mine);
    free(step_t);
    free(step_g);
    free(m.w);
    free(m.g);
    free(x);
    free(y);
    free(a1);
    free(a2);
    free(d1);
    free(d2);
    free(p);
    free(d3);
    free(bk);
    free(req);
    return 0;
}
