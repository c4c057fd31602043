/*
 * Kernel and collective names of Kineto traces.  NCCL names its kernels
 *   ncclKernel_<Coll>_<ALGO>_<PROTO>_<Op>_<type>(...)       NCCL up to 2.18
 *   ncclDevKernel_<Coll>_<Op>_<type>_<ALGO>_<PROTO>(...)    NCCL 2.19 and later
 *   ncclDevKernel_SendRecv(...), ncclDevKernel_Generic(...), ncclKernel_SendRecv_RING_SIMPLE_...
 * so the collective is the word after the first '_' (Generic: unknown, see record_param_comms).
 */
#include <ctype.h>
#include <string.h>
#include <strings.h>

#include "kineto.h"

const char *const cs__kcoll_names[CS_KC_N] = {[CS_KC_ALLREDUCE] = "AllReduce",
                                              [CS_KC_ALLGATHER] = "AllGather",
                                              [CS_KC_REDUCESCATTER] = "ReduceScatter",
                                              [CS_KC_BROADCAST] = "Broadcast",
                                              [CS_KC_REDUCE] = "Reduce",
                                              [CS_KC_SENDRECV] = "SendRecv",
                                              [CS_KC_ALLTOALL] = "AllToAll",
                                              [CS_KC_SEND] = "Send",
                                              [CS_KC_RECV] = "Recv",
                                              [CS_KC_OTHER] = "Other"};

/* Word after the prefix, compared case-insensitively up to the next '_' or '('. */
static int word_is(const char *p, const char *w)
{
    size_t n = strlen(w);
    return strncasecmp(p, w, n) == 0 && (p[n] == '_' || p[n] == '(' || p[n] == '\0' || p[n] == '<');
}

int cs__kineto_nccl_class(const char *name)
{
    if (strncmp(name, "nccl", 4) != 0)
        return -1;
    const char *p = strchr(name, '_');
    if (!p)
        return CS_KC_OTHER;
    p++;
    static const struct {
        const char *w;
        int c;
    } words[] = {{"AllReduce", CS_KC_ALLREDUCE},
                 {"AllGather", CS_KC_ALLGATHER},
                 {"ReduceScatter", CS_KC_REDUCESCATTER},
                 {"Broadcast", CS_KC_BROADCAST},
                 {"Reduce", CS_KC_REDUCE},
                 {"SendRecv", CS_KC_SENDRECV},
                 {"AllToAll", CS_KC_ALLTOALL},
                 {"AlltoAll", CS_KC_ALLTOALL},
                 {"Send", CS_KC_SEND},
                 {"Recv", CS_KC_RECV}};
    for (size_t i = 0; i < sizeof words / sizeof words[0]; i++)
        if (word_is(p, words[i].w))
            return words[i].c;
    return CS_KC_OTHER;
}

/* Lower-case copy without '_' so "all_reduce", "AllReduce" and "allreduce" compare equal. */
static void squash(const char *s, char *out, size_t n)
{
    size_t k = 0;
    for (; *s && k + 1 < n; s++)
        if (*s != '_' && *s != '-' && *s != ' ')
            out[k++] = (char)tolower((unsigned char)*s);
    out[k] = '\0';
}

int cs__kineto_comm_candidate(const char *name)
{
    if (cs__kineto_nccl_class(name) >= 0)
        return 0;
    char s[512];
    squash(name, s, sizeof s);
    static const char *const pat[] = {
        "rccl",     "msccl",    "nvshmem",           "allreduce", "allgather", "reducescatter",
        "alltoall", "sendrecv", "crossdevicereduce", "customar",  "oneccl",    "gloo"};
    for (size_t i = 0; i < sizeof pat / sizeof pat[0]; i++)
        if (strstr(s, pat[i]))
            return 1;
    return 0;
}

int cs__kineto_coll_class(const char *coll)
{
    char s[64];
    squash(coll, s, sizeof s);
    /* torch names: allreduce, all_reduce, allreduce_coalesced, _allgather_base, all_gather,
     * allgather_into_tensor_coalesced, reduce_scatter(_tensor), _reduce_scatter_base, broadcast,
     * reduce, all_to_all, alltoall_base, send, recv, recvAnysource, gather, scatter, barrier. */
    static const struct {
        const char *w;
        int c;
    } m[] = {{"allreduce", CS_KC_ALLREDUCE},
             {"allgather", CS_KC_ALLGATHER},
             {"reducescatter", CS_KC_REDUCESCATTER},
             {"broadcast", CS_KC_BROADCAST},
             {"alltoall", CS_KC_ALLTOALL},
             {"reduce", CS_KC_REDUCE},
             {"send", CS_KC_SEND},
             {"recv", CS_KC_RECV}};
    for (size_t i = 0; i < sizeof m / sizeof m[0]; i++)
        if (strstr(s, m[i].w))
            return m[i].c;
    return s[0] ? CS_KC_OTHER : -1;
}

unsigned cs__kineto_gloo_op(const char *name)
{
    if (strncmp(name, "gloo:", 5) != 0)
        return 0;
    /* the name without '_', so that all_reduce and allreduce_coalesced read alike */
    char n[64];
    size_t k = 0;
    for (const char *p = name + 5; *p && k + 1 < sizeof n; p++)
        if (*p != '_')
            n[k++] = *p;
    n[k] = '\0';
    static const struct {
        const char *prefix;
        unsigned op;
    } map[] = {
        {"allreduce", CS_OP_GLOO_ALLREDUCE},
        {"broadcast", CS_OP_GLOO_BROADCAST},
        {"reducescatter", CS_OP_GLOO_REDUCE_SCATTER},
        {"reduce", CS_OP_GLOO_REDUCE},
        {"allgather", CS_OP_GLOO_ALLGATHER},
        {"alltoall", CS_OP_GLOO_ALLTOALL},
        {"barrier", CS_OP_GLOO_BARRIER},
        {"gather", CS_OP_GLOO_GATHER},
        {"scatter", CS_OP_GLOO_SCATTER},
    };
    for (size_t i = 0; i < sizeof map / sizeof map[0]; i++)
        if (!strncmp(n, map[i].prefix, strlen(map[i].prefix)))
            return map[i].op;
    return 0;
}
