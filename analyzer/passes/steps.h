/*
 * Training-step analysis (steps.c, groups.c, report_steps.c): what the analyzer's step files share.
 *
 *   groups.c   communicator classes (communicators made by the same call on every rank) and the
 *              parallelism role of each class (dp, tp, pp, ep, other) from membership and traffic
 *   steps.c    a pre-pass over one rank finds the step boundaries (markers, else the period of the
 *              collective pattern) and each class's traffic; the main pass then cuts every rank's
 *              stream into steps and accumulates the per-step time budget, gradient sync and
 *              overlap; instances add their waits as they complete
 *   report_steps.c   the JSON and text sections for them (formatting only)
 *
 * Memory: per rank a few step accumulators, one entry per step for the whole run (sums over
 * ranks), one per communicator and class, and one per request in flight.  Nothing grows with the
 * number of events.
 *
 * The accounting works on intervals of MPI and NCCL calls on the host; a rank with a GPU timeline
 * adds its device intervals (steps_gpu.c): a kernel is one more interval in flight (begin, end,
 * class) whose exposed part is what the host spent blocked in the calls that waited for it.
 */
#ifndef COMMSCOPE_ANALYZER_STEPS_H
#define COMMSCOPE_ANALYZER_STEPS_H

#include "internal.h"

/* Parallelism dimensions (enum cs__dim, commscope/report.h): their names. */
extern const char *const cs__dim_names[CS_DIM_N];

/* One rank's step, or a sum of them (nanoseconds, as doubles: sums over many ranks). */
struct cs__budget {
    double n;                 /* rank-steps summed */
    double dur;               /* step time */
    double mpi;               /* time inside MPI calls */
    double blocked[CS_DIM_N]; /* time blocked in communication calls, by dimension */
    double wait[CS_DIM_N];    /* of that, waiting for later members of blocking collectives and
                               * for point-to-point partners */
    double p2p_wait;          /* of the waiting, for point-to-point partners */
    double grad_blocked;      /* blocked in gradient-synchronisation calls (included above) */
    double grad_wait;         /* of that, waiting */
    double grad_ovl;          /* gradient-sync requests in flight while the rank computed */
    double ovl, span;         /* all communication: overlapped time, time in flight */
    double other_mpi;         /* MPI calls that are not communication (markers, comm creation) */
    /* Ranks with a GPU timeline (steps_gpu.c): their rank-steps and step time, and the time the
     * GPUs computed or ran nothing; blocked/wait/ovl/span then hold GPU times, mpi 0. */
    double gn, gdur, gcompute, gidle;
};

/* A class of communicators: the ones one MPI_Comm_split (dup, create) call made on all ranks. */
struct cs__cclass {
    uint64_t parent;
    uint32_t ctr; /* how many-th derived communicator of its lowest member */
    uint16_t op;  /* creating op, 0 world/self/unknown */
    int32_t size; /* members of each communicator (the first seen) */
    int ncomms;
    int stride;   /* 1 contiguous ranks, k > 1 rank i + k*j, 0 other */
    int one_host; /* every communicator's members on one host */
    int world;    /* the communicator of all ranks */
    /* traffic seen in the pre-pass on one member (per step: divided by its step count) */
    int observed;
    double steps; /* steps on the observed member (0: none detected) */
    uint64_t calls, red, a2a, p2p, coll;
    int32_t peer[2]; /* the first distinct point-to-point peers (world ranks) of that member */
    int npeers;      /* how many distinct peers it had, counted up to 3 */
    int red_locked;  /* one of its reductions repeats with the chosen step pattern (same size,
                        same count in every step) */
    /* the inference */
    enum cs__dim role;
    double confidence;
    char why[160];
    const char *label; /* the words reports use: "data parallel", "neighbour exchange", ... */
};

/* One communicator as the step analysis knows it. */
struct cs__scomm {
    uint64_t id;
    int cls;
    enum cs__dim dim; /* its class's role (CS_DIM_OTHER before the inference) */
    int32_t size;
    const int32_t *members;
    double blocked, ovl, span, bytes;
};

struct cs__steps;

/* groups.c: the class table from the communicator records (after cs__comms_build). */
int cs__groups_build(struct cs__run *run, struct cs__steps *S);
/* The step-analysis index of communicator id (added when first seen); -1 none. */
int cs__groups_comm(struct cs__run *run, struct cs__steps *S, uint64_t id);
/* Roles from the classes' membership and traffic (after the pre-pass). */
void cs__groups_infer(struct cs__run *run, struct cs__steps *S);
/* Accessors for steps.c. */
struct cs__scomm *cs__groups_scomm(struct cs__steps *S, int i);
void cs__groups_free(struct cs__steps *S);

/* steps.c hooks into the pipeline (analyze.c, metrics.c). */
int cs__steps_begin(struct cs__run *run);
void cs__steps_event(struct cs__run *run, int rank, const struct cs_event *ev, enum cs_op_kind k,
                     int64_t tb, int64_t te);
/* A complete instance, its members' waits in in->wait (the steps row's instance hook). */
void cs__steps_instance(struct cs__run *run, const struct cs__inst *in);
/* A matched NCCL point-to-point pair in which world rank `rank` arrived first on its GPU: it
 * waited [b, e) on communicator comm (nccl_p2p.c's CS__FACT_GPU_WAIT, through the driver). */
void cs__steps_p2p_wait(struct cs__run *run, int rank, uint64_t comm, int64_t b, int64_t e);
void cs__steps_finish(struct cs__run *run);
/* Whether ev starts (1) or ends (-1) a step of its rank, 0 neither, exactly as the main pass
 * decides; *occ counts the rank's anchor occurrences (start at 0 for a rank's first event). */
int cs__steps_boundary(struct cs__run *run, const struct cs_event *ev, enum cs_op_kind k,
                       uint64_t *occ);
/* Fill rep->steps (owned by rep) from the run; the run's step state stays (cs__steps_free). */
void cs__steps_report(struct cs__run *run, struct cs_report *rep);
void cs__steps_free(struct cs__run *run);
void cs__steps_report_free(struct cs_report *rep);

/* report_steps.c */
void cs__report_steps_text(const struct cs_report *rep, FILE *out);
/* Continues the top-level JSON object of cs__report_json (its keys so far are written). */
void cs__report_steps_json(const struct cs_report *rep, FILE *out);

#endif
