/*
 * NCCL point-to-point matched across ranks (nccl_p2p.c).
 *
 * NCCL pairs the k-th ncclSend from comm rank s to comm rank d on a communicator with the k-th
 * ncclRecv on d from s on that communicator, in issue order, whether the calls were grouped or
 * not.  The analyzer does the same: one channel per (communicator, sender, receiver), the k-th
 * send and the k-th receive form pair k.  Each side takes its times from the first GPU record of
 * the launch that holds it (its own launch, or its group's): arrival = kernel start, end = kernel
 * end.  A pair whose two sides are timed gives a wait: the side whose kernel started first waits
 * for the other (late sender: the receiver waits; late receiver: the sender waits).  Memory: the
 * pairs of a channel not yet complete (bounded by the skew between the two ranks).
 *
 * Definitions in docs/metrics.md ("NCCL point-to-point").
 */
#ifndef COMMSCOPE_ANALYZER_NCCL_P2P_H
#define COMMSCOPE_ANALYZER_NCCL_P2P_H

#include "internal.h"

/* One channel: sends of world rank `from` to world rank `to` on one communicator. */
struct cs_report_np2p_pair {
    char comm[40];
    int from, to;                 /* world ranks */
    uint64_t sends, recvs, bytes; /* calls issued by each side; bytes sent */
    uint64_t pairs, timed;        /* matched pairs; of them with both sides timed on the GPU */
    uint64_t late_sender, late_receiver;
    double late_sender_wait_s, late_receiver_wait_s;
    uint64_t mismatched_bytes; /* pairs whose two sides disagree on the byte count */
};

struct cs_report_np2p {
    struct cs_report_np2p_pair *pairs; /* by communicator label, sender, receiver */
    size_t npairs;
    uint64_t pairs_total, timed, unmatched_sends, unmatched_recvs, untimed, skipped;
    uint64_t late_sender, late_receiver;
    double late_sender_wait_s, late_receiver_wait_s;
};

/* Hooks: every ncclSend/ncclRecv call of the merged stream (analyze.c), and the first GPU
 * record of every NCCL launch (gpu.c). */
void cs__np2p_call(struct cs__run *run, int rank, const struct cs_event *ev);
void cs__np2p_gpu(struct cs__run *run, int rank, uint64_t launch, int64_t tb, int64_t te);
/* After the views were built: rep->np2p, NCCL sends added to the point-to-point matrix; frees the
 * run's state. */
void cs__np2p_report(struct cs__run *run, struct cs_report *rep);
void cs__np2p_free(struct cs__run *run);
void cs__np2p_report_free(struct cs_report *rep);
/* Renderers (key "nccl_p2p" continuing the top-level JSON object; a text section). */
void cs__np2p_json(const struct cs_report *rep, FILE *out);
void cs__np2p_text(const struct cs_report *rep, FILE *out);

/* For the GPU what-if (whatif_gpu.c): the channel of (comm, sender comm rank, receiver comm
 * rank) numbered from 1 in order of first use, kept in map m ((comm, s << 32 | d) -> id). */
uint64_t cs__np2p_chan_id(struct cs__map *m, uint64_t *next, uint64_t comm, uint32_t s, uint32_t d);

#endif
