/* cs_topo_load: pick the loader by source (live, hwloc XML, NCCL XML), then derive the rest. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "commscope/input.h"

#include "internal.h"

static struct cs_topo *new_topo(const char *file)
{
    struct cs_topo *t = calloc(1, sizeof(*t));
    if (t && file)
        CS__COPY(t->file, file);
    return t;
}

/* A name for a host the file does not name: the file's base name without its extension. */
static void host_from_file(struct cs_topo *t)
{
    if (t->host[0])
        return;
    const char *b = strrchr(t->file, '/');
    CS__COPY(t->host, b ? b + 1 : t->file);
    char *dot = strrchr(t->host, '.');
    if (dot && dot != t->host)
        *dot = 0;
}

int cs_topo_load_buffer(const char *buf, size_t len, const char *name, struct cs_topo **out,
                        char *err, size_t errlen)
{
    *out = NULL;
    struct cs_topo *t = new_topo(name);
    if (!t) {
        snprintf(err, errlen, "out of memory reading %s", name);
        return -ENOMEM;
    }
    struct cs__xml *root = NULL;
    int r = cs__xml_parse(&root, buf, len, name, err, errlen);
    if (r < 0) {
        cs_topo_free(t);
        return -EINVAL;
    }
    if (!strcmp(root->name, "topology"))
        r = cs__load_hwloc_xml(t, root, err, errlen);
    else if (!strcmp(root->name, "system"))
        r = cs__load_nccl_xml(t, root, err, errlen);
    else {
        snprintf(err, errlen,
                 "%s:%d: root element <%s> is neither hwloc's <topology> nor NCCL's <system>", name,
                 root->line, root->name);
        r = -EINVAL;
    }
    cs__xml_free(root);
    if (r < 0) {
        cs_topo_free(t);
        return r;
    }
    host_from_file(t);
    cs_topo_finish(t);
    *out = t;
    return 0;
}

int cs_topo_load(const char *path, struct cs_topo **out, char *err, size_t errlen)
{
    *out = NULL;
    if (path) {
        FILE *f = cs_input_fopen(path);
        if (!f) {
            int e = errno;
            snprintf(err, errlen, "cannot open topology file %s: %s", path, cs_input_strerror(e));
            return -e;
        }
        char *buf = NULL;
        size_t len = 0, cap = 0;
        for (;;) {
            if (len + 65536 > cap) {
                cap = cap ? 2 * cap : 262144;
                char *nb = realloc(buf, cap);
                if (!nb) {
                    free(buf);
                    fclose(f);
                    snprintf(err, errlen, "out of memory reading %s", path);
                    return -ENOMEM;
                }
                buf = nb;
            }
            size_t k = fread(buf + len, 1, cap - len, f);
            len += k;
            if (k == 0)
                break;
        }
        int rerr = ferror(f);
        fclose(f);
        if (rerr) {
            free(buf);
            snprintf(err, errlen, "error reading topology file %s", path);
            return -EIO;
        }
        int r = cs_topo_load_buffer(buf, len, path, out, err, errlen);
        free(buf);
        return r;
    }
    struct cs_topo *t = new_topo(NULL);
    if (!t) {
        snprintf(err, errlen, "out of memory");
        return -ENOMEM;
    }
    /* The UTS namespace's name, which is what MPI reports for this node. */
    gethostname(t->host, sizeof(t->host) - 1);
    int r = cs__load_hwloc_live(t, err, errlen);
    if (r < 0) {
        cs_topo_free(t);
        return r;
    }
    char e2[256] = "";
    int have = 0;
    if (cs_topo_apply_verbs(t, &have, e2, sizeof(e2)) < 0)
        cs__topo_warn(t, "%s", e2);
    const char *root = getenv("COMMSCOPE_SYSFS_ROOT");
    if (cs_topo_apply_sysfs(t, root ? root : "/sys", e2, sizeof(e2)) < 0)
        cs__topo_warn(t, "%s", e2);
    cs_topo_finish(t);
    *out = t;
    return 0;
}
