/* The streaming JSON writer (json.h). */
#include <inttypes.h>
#include <math.h>
#include <string.h>

#include "json.h"
#include "topology.h"

void cs__json_str(FILE *f, const char *s)
{
    cs_topo_json_string(f, s);
}

void cs__jw_str_raw(struct cs__jw *w, const char *s)
{
    cs__json_str(w->f, s);
}

void cs__jw_key(struct cs__jw *w, const char *key)
{
    if (w->depth > 0) {
        if (!w->first[w->depth])
            fputc(',', w->f);
        w->first[w->depth] = 0;
        fputc('\n', w->f);
        for (int i = 0; i < w->depth; i++)
            fputs("  ", w->f);
    }
    if (key) {
        cs__jw_str_raw(w, key);
        fputs(": ", w->f);
    }
}

void cs__jw_open(struct cs__jw *w, const char *key, char c)
{
    cs__jw_key(w, key);
    fputc(c, w->f);
    w->depth++;
    w->first[w->depth] = 1;
}

void cs__jw_close(struct cs__jw *w, char c)
{
    int empty = w->first[w->depth];
    w->depth--;
    if (!empty) {
        fputc('\n', w->f);
        for (int i = 0; i < w->depth; i++)
            fputs("  ", w->f);
    }
    fputc(c, w->f);
}

void cs__jw_str(struct cs__jw *w, const char *key, const char *s)
{
    cs__jw_key(w, key);
    cs__jw_str_raw(w, s);
}

void cs__jw_num(struct cs__jw *w, const char *key, double v)
{
    cs__jw_key(w, key);
    if (isfinite(v))
        fprintf(w->f, "%.9g", v);
    else
        fputs("null", w->f);
}

void cs__jw_u64(struct cs__jw *w, const char *key, uint64_t v)
{
    cs__jw_key(w, key);
    fprintf(w->f, "%" PRIu64, v);
}

void cs__jw_int(struct cs__jw *w, const char *key, long long v)
{
    cs__jw_key(w, key);
    fprintf(w->f, "%lld", v);
}

void cs__jw_str_or_null(struct cs__jw *w, const char *key, const char *s)
{
    if (s[0]) {
        cs__jw_str(w, key, s);
    } else {
        cs__jw_key(w, key);
        fputs("null", w->f);
    }
}

void cs__jw_bool(struct cs__jw *w, const char *key, int v)
{
    cs__jw_key(w, key);
    fputs(v ? "true" : "false", w->f);
}

void cs__csv_str(FILE *out, const char *s)
{
    if (!strpbrk(s, ",\"\r\n")) {
        fputs(s, out);
        return;
    }
    fputc('"', out);
    for (; *s; s++) {
        if (*s == '"')
            fputc('"', out);
        fputc(*s, out);
    }
    fputc('"', out);
}

void cs__csv_num(FILE *out, double v)
{
    if (isfinite(v))
        fprintf(out, ",%.9g", v);
    else
        fputc(',', out);
}
