/*
 * A minimal streaming JSON writer shared by the JSON renderers (report_json.c, report_steps.c):
 * commas and indentation from a stack of "first" flags, one key per line, two-space indent.
 * Strings are written as ASCII JSON (control bytes and bytes >= 0x80 escaped); numbers that are
 * not finite are written as null.  Errors show in ferror(f).
 */
#ifndef COMMSCOPE_ANALYZER_JSON_H
#define COMMSCOPE_ANALYZER_JSON_H

#include <stdint.h>
#include <stdio.h>

struct cs__jw {
    FILE *f;
    int depth;     /* 0 before the top-level value; a renderer continuing an object sets it */
    int first[16]; /* first[d]: nothing written yet at depth d */
};

/* The separator, newline and indent before a value, then "key": unless key is NULL. */
void cs__jw_key(struct cs__jw *w, const char *key);
/* s as a quoted JSON string on f (the one escaper of the analyzer's JSON outputs). */
void cs__json_str(FILE *f, const char *s);
/* A quoted, escaped string without key handling. */
void cs__jw_str_raw(struct cs__jw *w, const char *s);
/* Open an object (c '{') or array (c '['); cs__jw_close writes the matching c. */
void cs__jw_open(struct cs__jw *w, const char *key, char c);
void cs__jw_close(struct cs__jw *w, char c);
void cs__jw_str(struct cs__jw *w, const char *key, const char *s);
/* A string, or null when s is empty. */
void cs__jw_str_or_null(struct cs__jw *w, const char *key, const char *s);
void cs__jw_num(struct cs__jw *w, const char *key, double v);
void cs__jw_u64(struct cs__jw *w, const char *key, uint64_t v);
void cs__jw_int(struct cs__jw *w, const char *key, long long v);
void cs__jw_bool(struct cs__jw *w, const char *key, int v);

/* CSV fields (the --ranks-csv and --steps-csv files): text, quoted when it holds a comma, a quote
 * or a line break; a number preceded by its comma, 9 significant digits, empty for none. */
void cs__csv_str(FILE *out, const char *s);
void cs__csv_num(FILE *out, double v);

#endif
