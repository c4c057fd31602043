/* The what-if replay's small hash table (wtab.c; used by whatif.c). */
#ifndef COMMSCOPE_ANALYZER_WTAB_H
#define COMMSCOPE_ANALYZER_WTAB_H

#include <stddef.h>
#include <stdint.h>

/* A small open-addressing table (keys (k1, k2, k3) -> v) for what one window needs (its
 * instances, point-to-point channels and requests), emptied at once by a new stamp instead of
 * clearing the slots.  A deleted entry keeps its slot with live 0, so probes go on past it. */
struct wslot {
    uint64_t k1, k2, k3, v;
    uint32_t stamp, live;
    int32_t head, tail; /* P->chan_t: the channel's waiting items (P->nd), -1 none */
};
struct wtab {
    struct wslot *s;
    size_t cap, used; /* used: slots of the current stamp, deleted ones too */
    unsigned shift;   /* 64 - log2(cap) */
    uint32_t stamp;
    int kept; /* kept across windows (never cleared): deleted entries are purged */
};

/* An empty table of 64 slots (0, or -1 out of memory); a new window: every entry gone at once. */
int cs__wt_init(struct wtab *t);
void cs__wt_clear(struct wtab *t);
/* Makes room: twice the slots, or, in a table kept across windows with most of its slots
 * deleted entries, as many without them (a window's table is emptied at the window's end).  0, or
 * -1 out of memory. */
int cs__wt_grow(struct wtab *t);

/* The slot of key (k1, k2, k3): its entry (live or deleted), or the empty slot where it would go.
 * The key is mixed with shifts between the multiplications (as splitmix64's finaliser): a product
 * of sums alone, ((k1 C1 + k2) C2 + k3) C3, is k1 (C1 C2 C3) + ..., and C1 C2 C3 / 2^64 is within
 * 6e-6 of 4/7, so the requests (rank, id) of 1024 ranks fell into seven runs (52 probes a look-up).
 */
static inline struct wslot *wt_slot(const struct wtab *t, uint64_t k1, uint64_t k2, uint64_t k3)
{
    uint64_t h = k1 * 0x9e3779b97f4a7c15ull ^ k2;
    h = (h ^ h >> 31) * 0xbf58476d1ce4e5b9ull ^ k3;
    h = (h ^ h >> 29) * 0x94d049bb133111ebull; /* the top bits index: no final shift needed */
    for (size_t j = (size_t)(h >> t->shift);; j = (j + 1) & (t->cap - 1)) {
        struct wslot *s = &t->s[j];
        if (s->stamp != t->stamp || (s->k1 == k1 && s->k2 == k2 && s->k3 == k3))
            return s;
    }
}

/* The value of key (k1, k2, k3); a new entry (v 0, *fresh 1) when it is absent or deleted.
 * NULL out of memory. */
static inline struct wslot *wt_putslot(struct wtab *t, uint64_t k1, uint64_t k2, uint64_t k3,
                                       int *fresh)
{
    struct wslot *s = wt_slot(t, k1, k2, k3);
    if (s->stamp == t->stamp && s->live) {
        *fresh = 0;
        return s;
    }
    if (s->stamp != t->stamp) {
        if (2 * (t->used + 1) > t->cap) {
            if (cs__wt_grow(t))
                return NULL;
            s = wt_slot(t, k1, k2, k3);
        }
        t->used++;
    }
    *s = (struct wslot){k1, k2, k3, 0, t->stamp, 1, -1, -1};
    *fresh = 1;
    return s;
}

static inline uint64_t *wt_put(struct wtab *t, uint64_t k1, uint64_t k2, uint64_t k3, int *fresh)
{
    struct wslot *s = wt_putslot(t, k1, k2, k3, fresh);
    return s ? &s->v : NULL;
}

/* The live entry of key (k1, k2, k3), or NULL. */
static inline struct wslot *wt_get(const struct wtab *t, uint64_t k1, uint64_t k2, uint64_t k3)
{
    struct wslot *s = wt_slot(t, k1, k2, k3);
    return s->stamp == t->stamp && s->live ? s : NULL;
}

#endif
