/* The what-if replay's small hash table (wtab.h). */
#include <stdlib.h>
#include <string.h>

#include "wtab.h"

int cs__wt_init(struct wtab *t)
{
    *t = (struct wtab){.cap = 64, .shift = 64 - 6, .stamp = 1};
    t->s = calloc(t->cap, sizeof *t->s);
    return t->s ? 0 : -1;
}

void cs__wt_clear(struct wtab *t)
{
    t->used = 0;
    if (++t->stamp == 0) {
        memset(t->s, 0, t->cap * sizeof *t->s);
        t->stamp = 1;
    }
}

int cs__wt_grow(struct wtab *t)
{
    size_t live = 0;
    for (size_t i = 0; t->kept && i < t->cap; i++)
        live += t->s[i].stamp == t->stamp && t->s[i].live;
    int same = t->kept && 4 * (live + 1) <= t->cap;
    struct wtab g = {.cap = same ? t->cap : t->cap * 2,
                     .shift = same ? t->shift : t->shift - 1,
                     .stamp = 1,
                     .kept = t->kept};
    g.s = calloc(g.cap, sizeof *g.s);
    if (!g.s)
        return -1;
    for (size_t i = 0; i < t->cap; i++) {
        const struct wslot *s = &t->s[i];
        if (s->stamp != t->stamp || !s->live)
            continue;
        struct wslot *d = wt_slot(&g, s->k1, s->k2, s->k3);
        *d = *s;
        d->stamp = 1;
        g.used++;
    }
    free(t->s);
    *t = g;
    return 0;
}
