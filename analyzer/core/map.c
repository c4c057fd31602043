/* A small open-addressing hash map from a pair of 64-bit keys to a 64-bit value. */
#include <stdlib.h>
#include <string.h>

#include "internal.h"

static int grow(struct cs__map *m)
{
    size_t cap = m->cap ? 2 * m->cap : 64;
    struct cs__map_slot *s = calloc(cap, sizeof *s);
    if (!s)
        return -1;
    for (size_t i = 0; i < m->cap; i++) {
        if (!m->slot[i].used)
            continue;
        size_t j = cs__map_hash(m->slot[i].a, m->slot[i].b) & (cap - 1);
        while (s[j].used)
            j = (j + 1) & (cap - 1);
        s[j] = m->slot[i];
    }
    free(m->slot);
    m->slot = s;
    m->cap = cap;
    return 0;
}

/* cs__map_put when the map may have to grow first. */
static __attribute__((noinline)) uint64_t *put_slow(struct cs__map *m, uint64_t a, uint64_t b,
                                                    int *fresh)
{
    /* One probe finds the key or the first free slot, where it goes unless the map must grow
     * (the slot a lookup followed by an insertion would pick). */
    size_t j = 0;
    if (m->cap) {
        size_t mask = m->cap - 1;
        for (j = cs__map_hash(a, b) & mask;; j = (j + 1) & mask) {
            struct cs__map_slot *s = &m->slot[j];
            if (!s->used)
                break;
            if (s->a == a && s->b == b) {
                if (fresh)
                    *fresh = 0;
                return &s->v;
            }
        }
    }
    /* Keep the load at most one half so probes stay short. */
    if (2 * (m->n + 1) > m->cap) {
        if (grow(m))
            return NULL;
        j = cs__map_hash(a, b) & (m->cap - 1);
        while (m->slot[j].used)
            j = (j + 1) & (m->cap - 1);
    }
    m->slot[j] = (struct cs__map_slot){.a = a, .b = b, .v = 0, .used = 1};
    m->n++;
    if (fresh)
        *fresh = 1;
    return &m->slot[j].v;
}

uint64_t *cs__map_put(struct cs__map *m, uint64_t a, uint64_t b, int *fresh)
{
    /* The usual case, an insertion that needs no growth (or a hit), in a function small enough
     * to need no saved registers; the same probe and the same slot as put_slow. */
    if (m->cap && 2 * (m->n + 1) <= m->cap) {
        size_t mask = m->cap - 1;
        for (size_t j = cs__map_hash(a, b) & mask;; j = (j + 1) & mask) {
            struct cs__map_slot *s = &m->slot[j];
            if (!s->used) {
                *s = (struct cs__map_slot){.a = a, .b = b, .v = 0, .used = 1};
                m->n++;
                if (fresh)
                    *fresh = 1;
                return &s->v;
            }
            if (s->a == a && s->b == b) {
                if (fresh)
                    *fresh = 0;
                return &s->v;
            }
        }
    }
    return put_slow(m, a, b, fresh);
}

void cs__map_del(struct cs__map *m, uint64_t a, uint64_t b)
{
    uint64_t *v = cs__map_get(m, a, b);
    if (v)
        cs__map_del_at(m, v);
}

void cs__map_del_at(struct cs__map *m, uint64_t *v)
{
    size_t i =
        (size_t)((struct cs__map_slot *)(void *)((char *)v - offsetof(struct cs__map_slot, v)) -
                 m->slot);
    size_t mask = m->cap - 1;
    m->slot[i].used = 0;
    m->n--;
    /* Backward-shift deletion: move later members of the probe run into the hole. */
    for (size_t j = (i + 1) & mask; m->slot[j].used; j = (j + 1) & mask) {
        size_t home = cs__map_hash(m->slot[j].a, m->slot[j].b) & mask;
        /* Entry j may move to i if i lies cyclically in [home, j). */
        if (((j - home) & mask) >= ((j - i) & mask)) {
            m->slot[i] = m->slot[j];
            m->slot[j].used = 0;
            i = j;
        }
    }
}

void cs__map_clear(struct cs__map *m)
{
    if (m->cap)
        memset(m->slot, 0, m->cap * sizeof *m->slot);
    m->n = 0;
}

void cs__map_free(struct cs__map *m)
{
    free(m->slot);
    m->slot = NULL;
    m->cap = m->n = 0;
}

/* Grow the array *p of elem-sized items to hold at least need of them (capacity doubled from
 * 16); 0, or -1 out of memory (the array is then unchanged). */
int cs__grow(void **p, size_t *cap, size_t need, size_t elem)
{
    if (need <= *cap)
        return 0;
    size_t c = *cap ? *cap : 16;
    while (c < need)
        c *= 2;
    void *q = realloc(*p, c * elem);
    if (!q)
        return -1;
    *p = q;
    *cap = c;
    return 0;
}

int cs__msg_vadd(char ***v, size_t *n, size_t *cap, const char *fmt, va_list ap)
{
    char buf[1024];
    vsnprintf(buf, sizeof buf, fmt, ap);
    char *s;
    if (cs__grow((void **)v, cap, *n + 1, sizeof **v) || !(s = strdup(buf)))
        return -1;
    (*v)[(*n)++] = s;
    return 0;
}

int cs__rtab_grow(struct cs__rtab *t, size_t esz)
{
    size_t ocap = t->cap, cap = ocap ? 2 * ocap : 64;
    unsigned char *old = t->slot, *s = calloc(cap, esz);
    if (!s)
        return -1;
    t->slot = s;
    t->cap = cap;
    t->shift = 64 - __builtin_ctzll(cap);
    for (size_t i = 0; i < ocap; i++) {
        const struct cs__rkey *k = (const void *)(old + i * esz);
        if (!k->rank1)
            continue;
        size_t j = cs__rtab_home(t, k->rank1 - 1, k->req);
        while (cs__rtab_at(t, esz, j)->rank1)
            j = (j + 1) & (cap - 1);
        memcpy(cs__rtab_at(t, esz, j), k, esz);
    }
    free(old);
    return 0;
}

void cs__rtab_free(struct cs__rtab *t)
{
    free(t->slot);
    *t = (struct cs__rtab){0};
}
