/* The test-only trace writer (see tw.h). */
#include "tw.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commscope/ops.h"
#include "internal.h"

struct tblock {
    unsigned char *data; /* span * CS_BLOCK_SIZE bytes */
    uint32_t span;
};

struct tw {
    struct cs_file_header h;
    struct tblock *b;
    size_t nb, capb;
    long cur[64];     /* current event block of each thread, -1 none */
    uint64_t seq[64]; /* next block seq of each thread */
    long comm_cur;    /* current comm block, -1 none */
    uint64_t events;
};

struct tw *tw_new(int rank, int world, uint64_t run_id, uint64_t nonce)
{
    struct tw *w = calloc(1, sizeof *w);
    memcpy(w->h.magic, CS_TRACE_MAGIC, 8);
    w->h.version = CS_TRACE_VERSION;
    w->h.header_size = CS_HEADER_SIZE;
    w->h.block_size = CS_BLOCK_SIZE;
    w->h.event_size = CS_EVENT_SIZE;
    w->h.rank = rank;
    w->h.world_size = world;
    w->h.pid = 1000 + rank;
    w->h.run_id = run_id;
    w->h.nonce = nonce;
    snprintf(w->h.host, sizeof w->h.host, "node%d", rank / 2);
    snprintf(w->h.program, sizeof w->h.program, "/bin/test-program");
    for (int i = 0; i < 64; i++)
        w->cur[i] = -1;
    w->comm_cur = -1;
    return w;
}

struct cs_file_header *tw_header(struct tw *w)
{
    return &w->h;
}

static struct cs_block_header *bh(struct tw *w, long i)
{
    return (struct cs_block_header *)w->b[i].data;
}

static long claim(struct tw *w, uint16_t kind, unsigned thread, uint32_t span)
{
    if (w->nb == w->capb) {
        w->capb = w->capb ? 2 * w->capb : 16;
        w->b = realloc(w->b, w->capb * sizeof *w->b);
    }
    struct tblock *t = &w->b[w->nb];
    t->span = span;
    t->data = calloc(span, CS_BLOCK_SIZE);
    struct cs_block_header *h = (void *)t->data;
    h->magic = CS_BLOCK_MAGIC;
    h->kind = kind;
    h->thread = (uint16_t)thread;
    h->span = span;
    h->ostid = 4242 + thread;
    h->seq = kind == CS_BLOCK_EVENTS ? w->seq[thread]++ : 0;
    return (long)w->nb++;
}

void tw_event(struct tw *w, unsigned thread, const struct cs_event *ev)
{
    long c = w->cur[thread];
    if (c < 0 || bh(w, c)->used == CS_EVENTS_PER_BLOCK)
        c = w->cur[thread] = claim(w, CS_BLOCK_EVENTS, thread, 1);
    struct cs_block_header *h = bh(w, c);
    memcpy(w->b[c].data + sizeof *h + (size_t)h->used * CS_EVENT_SIZE, ev, sizeof *ev);
    h->used++;
    w->events++;
}

/* A communicator record of `kind`, with `trailer` (tlen bytes) after the members when given. */
static void comm_record(struct tw *w, uint64_t id, uint16_t op, uint16_t kind, int size,
                        int my_rank, const int32_t *members, const void *trailer, size_t tlen)
{
    uint32_t mlen = (uint32_t)(sizeof(struct cs_comm_record) + 4 * (size_t)size);
    mlen = (mlen + 7) & ~7u;
    uint32_t len = mlen + (uint32_t)tlen;
    size_t room = CS_BLOCK_SIZE - sizeof(struct cs_block_header);
    long c = w->comm_cur;
    if (c < 0 ||
        (size_t)w->b[c].span * CS_BLOCK_SIZE - sizeof(struct cs_block_header) - bh(w, c)->used <
            len) {
        uint32_t span = 1;
        if (len > room)
            span = (uint32_t)((len + sizeof(struct cs_block_header) + CS_BLOCK_SIZE - 1) /
                              CS_BLOCK_SIZE);
        c = w->comm_cur = claim(w, CS_BLOCK_COMMS, 0, span);
    }
    struct cs_block_header *h = bh(w, c);
    struct cs_comm_record *r = (void *)(w->b[c].data + sizeof *h + h->used);
    r->record_bytes = len;
    r->kind = kind;
    r->op = op;
    r->id = id;
    r->parent = id == CS_COMM_WORLD_ID || kind == CS_COMM_NCCL ? 0 : CS_COMM_WORLD_ID;
    r->t_created = 1;
    r->size = size;
    r->my_rank = my_rank;
    memcpy(r->members, members, 4 * (size_t)size);
    if (tlen)
        memcpy((char *)r + mlen, trailer, tlen);
    h->used += len;
}

void tw_comm(struct tw *w, uint64_t id, uint16_t op, int size, int my_rank, const int32_t *members)
{
    comm_record(w, id, op, CS_COMM_MPI, size, my_rank, members, NULL, 0);
}

void tw_comm_nccl(struct tw *w, uint64_t id, int size, int my_rank, int rank, int cuda_dev,
                  const char *bus_id)
{
    int32_t *m = malloc(4 * (size_t)size);
    if (!m)
        return;
    for (int i = 0; i < size; i++)
        m[i] = i == my_rank ? rank : -1;
    struct cs_comm_gpu g = {cuda_dev, 0, ""};
    snprintf(g.bus_id, sizeof g.bus_id, "%s", bus_id);
    comm_record(w, id, CS_OP_NCCL_COMM_INIT_RANK, CS_COMM_NCCL, size, my_rank, m, &g, sizeof g);
    free(m);
}

long tw_write(struct tw *w, const char *path, const struct tw_opts *o)
{
    struct tw_opts none = {0};
    if (!o)
        o = &none;
    unsigned char *hdr = calloc(1, CS_HEADER_SIZE);
    struct cs_file_header h = w->h;
    uint64_t blocks = 0;
    for (size_t i = 0; i < w->nb; i++)
        blocks += w->b[i].span;
    for (size_t i = 0; i < w->nb; i++) {
        struct cs_block_header *b = bh(w, (long)i);
        b->crc = 0;
        if (o->partial && (long)i >= (long)w->nb - o->unsealed) {
            if (o->garbage && b->kind == CS_BLOCK_EVENTS)
                for (size_t k = sizeof *b + (size_t)b->used * CS_EVENT_SIZE; k < CS_BLOCK_SIZE; k++)
                    w->b[i].data[k] = (unsigned char)(0xa5 ^ k);
            continue;
        }
        b->crc = cs_crc32(0, w->b[i].data, (size_t)w->b[i].span * CS_BLOCK_SIZE);
    }
    if (o->partial) {
        h.flags |= CS_FLAG_PARTIAL;
        h.blocks = 0;
        h.events = 0;
        h.header_crc = 0;
        memcpy(hdr, &h, sizeof h);
    } else {
        h.flags &= ~(uint32_t)CS_FLAG_PARTIAL;
        h.blocks = blocks;
        h.events = w->events;
        h.header_crc = 0;
        memcpy(hdr, &h, sizeof h);
        uint32_t crc = cs_crc32(0, hdr, CS_HEADER_SIZE);
        memcpy(hdr + offsetof(struct cs_file_header, header_crc), &crc, 4);
    }
    FILE *f = fopen(path, "wb");
    if (!f) {
        free(hdr);
        return -1;
    }
    long size = CS_HEADER_SIZE;
    fwrite(hdr, 1, CS_HEADER_SIZE, f);
    for (size_t i = 0; i < w->nb; i++) {
        fwrite(w->b[i].data, 1, (size_t)w->b[i].span * CS_BLOCK_SIZE, f);
        size += (long)w->b[i].span * CS_BLOCK_SIZE;
    }
    if (o->partial) {
        unsigned char *z = calloc(1, CS_BLOCK_SIZE);
        for (int i = 0; i < o->zero_blocks; i++) {
            fwrite(z, 1, CS_BLOCK_SIZE, f);
            size += CS_BLOCK_SIZE;
        }
        free(z);
    }
    free(hdr);
    return fclose(f) == 0 ? size : -1;
}

void tw_free(struct tw *w)
{
    if (!w)
        return;
    for (size_t i = 0; i < w->nb; i++)
        free(w->b[i].data);
    free(w->b);
    free(w);
}

struct tw *tw_new_gpu_rank(int rank, int world, uint64_t run_id, uint64_t nonce, uint64_t t_init,
                           uint64_t t_finalize)
{
    struct tw *w = tw_new(rank, world, run_id, nonce);
    struct cs_file_header *h = tw_header(w);
    h->t_init = t_init;
    h->t_finalize = t_finalize;
    h->gpu_timing = CS_GPU_CUPTI;
    h->rank_source = CS_RANKSRC_TORCH;
    h->flags = CS_FLAG_NO_MPI;
    return w;
}

void tw_comm_nccl_multi(struct tw *w, uint64_t id, int size, int my_rank, int rank, int cuda_dev)
{
    int32_t *m = malloc(4 * (size_t)size);
    if (!m)
        return;
    for (int i = 0; i < size; i++)
        m[i] = i == my_rank ? rank : -1;
    struct cs_comm_gpu g = {cuda_dev, CS_COMM_GPU_MULTI, ""};
    comm_record(w, id, CS_OP_NCCL_COMM_INIT_ALL, CS_COMM_NCCL, size, my_rank, m, &g, sizeof g);
    free(m);
}

long tw_write_rank(struct tw *w, const char *dir, int rank)
{
    char p[600];
    snprintf(p, sizeof p, "%s/rank-%05d.cst", dir, rank);
    long n = tw_write(w, p, NULL);
    tw_free(w);
    return n;
}

int tw_tmpdir(char *tmpl)
{
    if (mkdtemp(tmpl))
        return 0;
    perror("mkdtemp");
    return -1;
}

void tw_rmtree(const char *dir)
{
    char cmd[700];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", dir);
}

char *tw_report_json(const struct cs_report *rep)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (!f)
        return NULL;
    int rc = cs__report_json(rep, f);
    if (fclose(f) != 0 || rc != 0) {
        free(buf);
        return NULL;
    }
    return buf;
}

void tw_mpi_event(struct tw *w, uint64_t t0, uint16_t op, uint64_t b, uint64_t e, int32_t peer,
                  uint64_t req, int32_t aux)
{
    struct cs_event ev = {.t_begin = t0 + b * 1000,
                          .t_end = t0 + e * 1000,
                          .comm = CS_COMM_WORLD_ID,
                          .peer = peer,
                          .request = req,
                          .op = op,
                          .aux = aux};
    if (op == CS_OP_ISEND || op == CS_OP_IRECV) {
        ev.flags = CS_EV_NONBLOCKING;
        ev.bytes = op == CS_OP_ISEND ? 64 : 0;
        ev.bytes_recv = op == CS_OP_IRECV ? 64 : 0;
    }
    if (op == CS_OP_PCONTROL || op == CS_OP_WAIT)
        ev.comm = 0;
    tw_event(w, 0, &ev);
}

struct cs_event tw_host_allreduce(struct tw *w, unsigned thread, uint64_t comm, uint64_t t_begin,
                                  uint64_t t_end, uint32_t seq, uint64_t launch)
{
    struct cs_event e = {.t_begin = t_begin,
                         .t_end = t_end,
                         .comm = comm,
                         .bytes = 1000,
                         .bytes_recv = 1000,
                         .request = launch,
                         .seq = seq,
                         .peer = -1,
                         .op = CS_OP_NCCL_ALLREDUCE,
                         .aux = 7 /* ncclFloat32 */};
    tw_event(w, thread, &e);
    return e;
}
