/*
 * A small XML reader for the two topology formats commscope reads: hwloc's XML export (versions
 * 2 and 3) and NCCL's topology files (NCCL_TOPO_FILE).  Both use elements and attributes only, so
 * this  builds a tree of elements with their attributes and skips comments, processing
 * instructions and the DOCTYPE, and keeps element text (hwloc writes distance matrices as text). It
 * is not a general XML parser: no namespaces, no CDATA sections, only the five predefined entities
 * and numeric character references.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

struct parser {
    const char *s, *end, *name; /* input and a name for messages */
    int line;
    char *err;
    size_t errlen;
    struct cs__xml *root; /* the first element */
};

static int fail(struct parser *p, const char *fmt, ...)
{
    if (p->err && p->errlen) {
        int n = snprintf(p->err, p->errlen, "%s:%d: ", p->name, p->line);
        if (n >= 0 && (size_t)n < p->errlen) {
            va_list ap;
            va_start(ap, fmt);
            vsnprintf(p->err + n, p->errlen - (size_t)n, fmt, ap);
            va_end(ap);
        }
    }
    return -1;
}

static void advance(struct parser *p, size_t n)
{
    for (size_t i = 0; i < n && p->s < p->end; i++, p->s++)
        if (*p->s == '\n')
            p->line++;
}

static void skip_space(struct parser *p)
{
    while (p->s < p->end && (*p->s == ' ' || *p->s == '\t' || *p->s == '\r' || *p->s == '\n'))
        advance(p, 1);
}

static int starts(const struct parser *p, const char *lit)
{
    size_t n = strlen(lit);
    return (size_t)(p->end - p->s) >= n && memcmp(p->s, lit, n) == 0;
}

/* Skip up to and including the terminator; -1 if the input ends first. */
static int skip_past(struct parser *p, const char *term)
{
    while (p->s < p->end) {
        if (starts(p, term)) {
            advance(p, strlen(term));
            return 0;
        }
        advance(p, 1);
    }
    return -1;
}

static int is_name_char(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
           c == '-' || c == '.' || c == ':';
}

static char *read_name(struct parser *p)
{
    const char *b = p->s;
    while (p->s < p->end && is_name_char(*p->s))
        p->s++;
    if (p->s == b)
        return NULL;
    return strndup(b, (size_t)(p->s - b));
}

/* Decode entities of a quoted attribute value [b, e) into a new string. */
static char *decode(struct parser *p, const char *b, const char *e)
{
    char *out = malloc((size_t)(e - b) + 1), *o = out;
    if (!out)
        return NULL;
    while (b < e) {
        if (*b != '&') {
            *o++ = *b++;
            continue;
        }
        const char *semi = memchr(b, ';', (size_t)(e - b));
        if (!semi) {
            free(out);
            fail(p, "'&' without ';' in an attribute value");
            return NULL;
        }
        size_t n = (size_t)(semi - b - 1);
        const char *ent = b + 1;
        if (n == 2 && !memcmp(ent, "lt", 2))
            *o++ = '<';
        else if (n == 2 && !memcmp(ent, "gt", 2))
            *o++ = '>';
        else if (n == 3 && !memcmp(ent, "amp", 3))
            *o++ = '&';
        else if (n == 4 && !memcmp(ent, "quot", 4))
            *o++ = '"';
        else if (n == 4 && !memcmp(ent, "apos", 4))
            *o++ = '\'';
        else if (n >= 2 && ent[0] == '#') {
            char num[16];
            if (n >= sizeof(num)) {
                free(out);
                fail(p, "character reference too long in an attribute value");
                return NULL;
            }
            memcpy(num, ent + 1, n - 1);
            num[n - 1] = 0;
            char *endp;
            long v = num[0] == 'x' ? strtol(num + 1, &endp, 16) : strtol(num, &endp, 10);
            if (*endp || v <= 0 || v > 127) {
                free(out);
                fail(p, "unsupported character reference '&%.*s;'", (int)n, ent);
                return NULL;
            }
            *o++ = (char)v;
        } else {
            free(out);
            fail(p, "unknown entity '&%.*s;' in an attribute value", (int)n, ent);
            return NULL;
        }
        b = semi + 1;
    }
    *o = 0;
    return out;
}

static int append_text(struct cs__xml *e, const char *b, const char *end)
{
    const char *q = b;
    while (q < end && (*q == ' ' || *q == '\t' || *q == '\r' || *q == '\n'))
        q++;
    if (q == end)
        return 0;
    size_t old = e->text ? strlen(e->text) : 0, n = (size_t)(end - b);
    char *t = realloc(e->text, old + n + 2);
    if (!t)
        return -1;
    if (old)
        t[old++] = ' ';
    memcpy(t + old, b, n);
    t[old + n] = 0;
    e->text = t;
    return 0;
}

static struct cs__xml *new_elem(struct cs__xml *parent, char *name, int line)
{
    struct cs__xml *e = calloc(1, sizeof(*e));
    if (!e)
        return NULL;
    e->name = name;
    e->line = line;
    e->parent = parent;
    if (parent) {
        if (parent->last)
            parent->last->next = e;
        else
            parent->child = e;
        parent->last = e;
    }
    return e;
}

static int add_attr(struct cs__xml *e, char *name, char *value)
{
    if (e->n_attr % 8 == 0) {
        char **a = realloc(e->attr, (e->n_attr + 8) * 2 * sizeof(char *));
        if (!a)
            return -1;
        e->attr = a;
    }
    e->attr[2 * e->n_attr] = name;
    e->attr[2 * e->n_attr + 1] = value;
    e->n_attr++;
    return 0;
}

/* Parse one start tag after '<'; *open is set when the element has content to follow. */
static struct cs__xml *start_tag(struct parser *p, struct cs__xml *parent, int *open)
{
    int line = p->line;
    char *name = read_name(p);
    if (!name) {
        fail(p, "expected an element name after '<'");
        return NULL;
    }
    struct cs__xml *e = new_elem(parent, name, line);
    if (!e) {
        free(name);
        fail(p, "out of memory");
        return NULL;
    }
    if (!p->root)
        p->root = e;
    for (;;) {
        skip_space(p);
        if (p->s >= p->end) {
            fail(p, "input ends inside the start tag of <%s>", name);
            return NULL;
        }
        if (*p->s == '>') {
            advance(p, 1);
            *open = 1;
            return e;
        }
        if (starts(p, "/>")) {
            advance(p, 2);
            *open = 0;
            return e;
        }
        char *an = read_name(p);
        if (!an) {
            fail(p, "unexpected '%c' in the start tag of <%s>", *p->s, name);
            return NULL;
        }
        skip_space(p);
        if (p->s >= p->end || *p->s != '=') {
            fail(p, "attribute '%s' of <%s> has no '=value'", an, name);
            free(an);
            return NULL;
        }
        advance(p, 1);
        skip_space(p);
        if (p->s >= p->end || (*p->s != '"' && *p->s != '\'')) {
            fail(p, "value of attribute '%s' of <%s> is not quoted", an, name);
            free(an);
            return NULL;
        }
        char q = *p->s;
        advance(p, 1);
        const char *vb = p->s;
        while (p->s < p->end && *p->s != q)
            advance(p, 1);
        if (p->s >= p->end) {
            fail(p, "unterminated value of attribute '%s' of <%s>", an, name);
            free(an);
            return NULL;
        }
        char *v = decode(p, vb, p->s);
        advance(p, 1);
        if (!v || add_attr(e, an, v) < 0) {
            free(an);
            free(v);
            if (v)
                fail(p, "out of memory");
            return NULL;
        }
    }
}

int cs__xml_parse(struct cs__xml **out, const char *buf, size_t len, const char *name, char *err,
                  size_t errlen)
{
    struct parser p = {buf, buf + len, name ? name : "(buffer)", 1, err, errlen, NULL};
    *out = NULL;
    struct cs__xml *cur = NULL;
    int depth = 0;
    while (p.s < p.end) {
        if (*p.s != '<') {
            /* Text: kept (hwloc's distance matrices are element text), whitespace-only runs not. */
            const char *b = p.s;
            while (p.s < p.end && *p.s != '<')
                advance(&p, 1);
            if (cur && append_text(cur, b, p.s) < 0) {
                cs__xml_free(p.root);
                return fail(&p, "out of memory");
            }
            continue;
        }
        if (starts(&p, "<!--")) {
            if (skip_past(&p, "-->") < 0)
                return cs__xml_free(p.root), fail(&p, "unterminated comment");
            continue;
        }
        if (starts(&p, "<?")) {
            if (skip_past(&p, "?>") < 0)
                return cs__xml_free(p.root), fail(&p, "unterminated processing instruction");
            continue;
        }
        if (starts(&p, "<!")) {
            if (skip_past(&p, ">") < 0)
                return cs__xml_free(p.root), fail(&p, "unterminated declaration");
            continue;
        }
        if (starts(&p, "</")) {
            advance(&p, 2);
            char *n = read_name(&p);
            skip_space(&p);
            if (!n || p.s >= p.end || *p.s != '>') {
                free(n);
                cs__xml_free(p.root);
                return fail(&p, "malformed end tag");
            }
            advance(&p, 1);
            if (!cur || strcmp(n, cur->name) != 0) {
                fail(&p, "end tag </%s> does not match <%s> opened at line %d", n,
                     cur ? cur->name : "(none)", cur ? cur->line : 0);
                free(n);
                cs__xml_free(p.root);
                return -1;
            }
            free(n);
            cur = cur->parent;
            depth--;
            continue;
        }
        advance(&p, 1);
        if (p.root && !cur) {
            fail(&p, "a second top-level element after </%s>", p.root->name);
            cs__xml_free(p.root); /* after the message, which names it */
            return -1;
        }
        if (depth >= 256) {
            cs__xml_free(p.root);
            return fail(&p, "elements nested deeper than 256 levels");
        }
        int open = 0;
        struct cs__xml *e = start_tag(&p, cur, &open);
        if (!e) {
            cs__xml_free(p.root);
            return -1;
        }
        if (open) {
            cur = e;
            depth++;
        }
    }
    if (cur) {
        fail(&p, "input ends before </%s> (element opened at line %d)", cur->name, cur->line);
        cs__xml_free(p.root);
        return -1;
    }
    if (!p.root)
        return fail(&p, "no XML element found");
    *out = p.root;
    return 0;
}

void cs__xml_free(struct cs__xml *e)
{
    while (e) {
        struct cs__xml *next = e->next;
        cs__xml_free(e->child);
        for (size_t i = 0; i < 2 * e->n_attr; i++)
            free(e->attr[i]);
        free(e->attr);
        free(e->text);
        free(e->name);
        free(e);
        e = next;
    }
}

const char *cs__xml_attr(const struct cs__xml *e, const char *name)
{
    for (size_t i = 0; i < e->n_attr; i++)
        if (strcmp(e->attr[2 * i], name) == 0)
            return e->attr[2 * i + 1];
    return NULL;
}
