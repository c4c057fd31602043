/*
 * Resource samples decoded (samples.h).
 */
#include "samples.h"

#include <string.h>

#include "commscope/ops.h"

static void decode(struct cs__run *run, int r, const struct cs_event *ev, struct cs__sample *s)
{
    memset(s, 0, sizeof *s);
    s->t = cs__clock_map(&run->ranks[r].clk, ev->t_begin);
    s->op = ev->op;
    s->util = UINT32_MAX;
    s->index = -1;
    s->pci = -1;
    switch (ev->op) {
    case CS_OP_SAMPLE_PROC:
        s->a = ev->bytes_recv;
        s->b = ev->request;
        break;
    case CS_OP_SAMPLE_NIC:
        memcpy(s->name, (const char *)ev + 16, sizeof s->name);
        s->name[sizeof s->name - 1] = '\0';
        s->a = ev->bytes_recv;
        s->b = ev->request;
        s->index = ev->aux;
        break;
    case CS_OP_SAMPLE_GPU:
        s->a = ev->comm;
        s->b = ev->bytes;
        s->c = ev->bytes_recv;
        s->d = (uint32_t)ev->request == UINT32_MAX ? UINT64_MAX : (uint32_t)ev->request;
        s->util = ev->seq;
        s->index = ev->aux;
        s->pci = (int32_t)(ev->request >> 32) - 1;
        break;
    }
}

size_t cs__samples_each(struct cs__run *run, int r,
                        int (*fn)(void *arg, int r, const struct cs__sample *s), void *arg)
{
    const struct cs__rank *rk = &run->ranks[r];
    size_t seen = 0;
    if (!rk->present || !rk->rd)
        return 0;
    size_t nb = cs_reader_sample_blocks(rk->rd);
    for (size_t b = 0; b < nb; b++) {
        const struct cs_event *ev;
        size_t n = cs_reader_sample_block(rk->rd, b, &ev);
        for (size_t i = 0; i < n; i++) {
            struct cs__sample s;
            decode(run, r, &ev[i], &s);
            seen++;
            if (fn(arg, r, &s))
                return seen;
        }
    }
    return seen;
}
