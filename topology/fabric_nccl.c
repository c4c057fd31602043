/*
 * cs_fabric's NCCL sweep: all-reduce, all-gather, reduce-scatter, all-to-all (grouped send/recv
 * to every rank, as nccl-tests does) and a send/recv ring, on one GPU per rank (local rank modulo
 * the node's device count), with the same sizes, iterations and busbw factors as the MPI sweep.
 *
 * libcudart and libnccl are loaded with dlopen, so neither building nor running cs_fabric needs
 * them; the communicator is bootstrapped over MPI (ncclGetUniqueId on rank 0, MPI_Bcast).  When
 * a rank cannot take part, rank 0 says why once ("nccl available=0 reason=...") and the sweep is
 * skipped on every rank; the MPI results are unaffected.
 */
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../collector/nccl/api.h"
#include "commscope/ops.h"
#include "fabric_bench.h"

typedef int cuda_rc; /* cudaError_t: an int-sized enum, 0 success */

struct api {
    void *rt, *nccl;
    cuda_rc (*get_device_count)(int *);
    cuda_rc (*set_device)(int);
    cuda_rc (*get_device)(int *);
    cuda_rc (*malloc_)(void **, size_t);
    cuda_rc (*free_)(void *);
    cuda_rc (*memset_)(void *, int, size_t); /* optional */
    cuda_rc (*stream_create)(cudaStream_t *);
    cuda_rc (*stream_sync)(cudaStream_t);
    cuda_rc (*stream_destroy)(cudaStream_t);
    const char *(*cuda_error)(cuda_rc); /* optional */
    ncclResult_t (*version)(int *);
    ncclResult_t (*unique_id)(ncclUniqueId *);
    ncclResult_t (*init_rank)(ncclComm_t *, int, ncclUniqueId, int);
    ncclResult_t (*destroy)(ncclComm_t);
    ncclResult_t (*abort_)(ncclComm_t);
    ncclResult_t (*all_reduce)(const void *, void *, size_t, ncclDataType_t, ncclRedOp_t,
                               ncclComm_t, cudaStream_t);
    ncclResult_t (*all_gather)(const void *, void *, size_t, ncclDataType_t, ncclComm_t,
                               cudaStream_t);
    ncclResult_t (*reduce_scatter)(const void *, void *, size_t, ncclDataType_t, ncclRedOp_t,
                                   ncclComm_t, cudaStream_t);
    ncclResult_t (*send)(const void *, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t);
    ncclResult_t (*recv)(void *, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t);
    ncclResult_t (*group_start)(void);
    ncclResult_t (*group_end)(void);
    const char *(*nccl_error)(ncclResult_t); /* optional */
};

/* Open the first of a list of library names (or $var), with the reason when none opens. */
static void *open_lib(const char *var, const char *const *names, char *why, size_t len)
{
    const char *env = getenv(var);
    const char *one[2] = {env, NULL};
    const char *const *list = env && *env ? one : names;
    char last[300] = "";
    for (size_t i = 0; list[i]; i++) {
        void *h = dlopen(list[i], RTLD_NOW | RTLD_LOCAL);
        if (h)
            return h;
        const char *e = dlerror();
        snprintf(last, sizeof(last), "%s", e ? e : list[i]);
    }
    snprintf(why, len, "cannot load %s%s: %s", list[0], list[1] ? " (or another version)" : "",
             last);
    return NULL;
}

/* Resolve name into *slot; a missing required symbol is the reason the sweep is skipped. */
static int sym(void *h, const char *lib, const char *name, void *slot, int required, char *why,
               size_t len)
{
    void *p = dlsym(h, name);
    memcpy(slot, &p, sizeof(p));
    if (!p && required) {
        snprintf(why, len, "%s has no %s", lib, name);
        return -1;
    }
    return 0;
}

static const char *cuda_msg(const struct api *a, cuda_rc rc)
{
    const char *s = a->cuda_error ? a->cuda_error(rc) : NULL;
    return s ? s : "no description";
}

static const char *nccl_msg(const struct api *a, ncclResult_t rc)
{
    const char *s = a->nccl_error ? a->nccl_error(rc) : NULL;
    return s ? s : "no description";
}

/*
 * Load both libraries and check for a GPU.  Returns 0 with the device count, or -1 with why.
 */
static int load(struct api *a, int *ndev, char *why, size_t len)
{
    static const char *const rt_names[] = {"libcudart.so.13", "libcudart.so.12", "libcudart.so",
                                           NULL};
    static const char *const nccl_names[] = {"libnccl.so.2", "libnccl.so", NULL};
    memset(a, 0, sizeof(*a));
    if (!(a->rt = open_lib("COMMSCOPE_CUDART_LIB", rt_names, why, len)))
        return -1;
    const char *rt = "libcudart";
    if (sym(a->rt, rt, "cudaGetDeviceCount", &a->get_device_count, 1, why, len) ||
        sym(a->rt, rt, "cudaSetDevice", &a->set_device, 1, why, len) ||
        sym(a->rt, rt, "cudaGetDevice", &a->get_device, 1, why, len) ||
        sym(a->rt, rt, "cudaMalloc", &a->malloc_, 1, why, len) ||
        sym(a->rt, rt, "cudaFree", &a->free_, 1, why, len) ||
        sym(a->rt, rt, "cudaMemset", &a->memset_, 0, why, len) ||
        sym(a->rt, rt, "cudaStreamCreate", &a->stream_create, 1, why, len) ||
        sym(a->rt, rt, "cudaStreamSynchronize", &a->stream_sync, 1, why, len) ||
        sym(a->rt, rt, "cudaStreamDestroy", &a->stream_destroy, 1, why, len) ||
        sym(a->rt, rt, "cudaGetErrorString", &a->cuda_error, 0, why, len))
        return -1;
    int n = 0;
    cuda_rc rc = a->get_device_count(&n);
    if (rc != 0) {
        snprintf(why, len, "no GPU: cudaGetDeviceCount failed with CUDA error %d (%s)", rc,
                 cuda_msg(a, rc));
        return -1;
    }
    if (n < 1) {
        snprintf(why, len, "no GPU: cudaGetDeviceCount found 0 devices");
        return -1;
    }
    *ndev = n;
    if (!(a->nccl = open_lib("COMMSCOPE_NCCL_LIB", nccl_names, why, len)))
        return -1;
    const char *nl = "libnccl";
    if (sym(a->nccl, nl, "ncclGetVersion", &a->version, 1, why, len) ||
        sym(a->nccl, nl, "ncclGetUniqueId", &a->unique_id, 1, why, len) ||
        sym(a->nccl, nl, "ncclCommInitRank", &a->init_rank, 1, why, len) ||
        sym(a->nccl, nl, "ncclCommDestroy", &a->destroy, 1, why, len) ||
        sym(a->nccl, nl, "ncclCommAbort", &a->abort_, 1, why, len) ||
        sym(a->nccl, nl, "ncclAllReduce", &a->all_reduce, 1, why, len) ||
        sym(a->nccl, nl, "ncclAllGather", &a->all_gather, 1, why, len) ||
        sym(a->nccl, nl, "ncclReduceScatter", &a->reduce_scatter, 1, why, len) ||
        sym(a->nccl, nl, "ncclSend", &a->send, 1, why, len) ||
        sym(a->nccl, nl, "ncclRecv", &a->recv, 1, why, len) ||
        sym(a->nccl, nl, "ncclGroupStart", &a->group_start, 1, why, len) ||
        sym(a->nccl, nl, "ncclGroupEnd", &a->group_end, 1, why, len) ||
        sym(a->nccl, nl, "ncclGetErrorString", &a->nccl_error, 0, why, len))
        return -1;
    return 0;
}

static void unload(struct api *a)
{
    /* The libraries stay loaded: NCCL and the CUDA runtime keep threads and atexit handlers
     * that must not outlive their code. */
    memset(a, 0, sizeof(*a));
}

/* What one rank reports to rank 0 before the sweep. */
struct rank_state {
    int ok, dev, version;
    char host[64];
    char why[300];
};

enum { OP_ALLREDUCE, OP_ALLGATHER, OP_REDUCESCATTER, OP_ALLTOALL, OP_SENDRECV, NOPS };
static const struct {
    const char *name;
    enum cs_op op;
} ops[NOPS] = {
    [OP_ALLREDUCE] = {"allreduce", CS_OP_ALLREDUCE},
    [OP_ALLGATHER] = {"allgather", CS_OP_ALLGATHER},
    [OP_REDUCESCATTER] = {"reducescatter", CS_OP_REDUCE_SCATTER_BLOCK},
    [OP_ALLTOALL] = {"alltoall", CS_OP_ALLTOALL},
    [OP_SENDRECV] = {"sendrecv", CS_OP_SENDRECV},
};

#define NCCL_FLOAT ((ncclDataType_t)cs__nccl_const_ncclFloat32)
#define NCCL_SUM ((ncclRedOp_t)cs__nccl_const_ncclSum)

/* One call of op k on size bytes (the nccl-tests convention; whole floats per rank). */
static ncclResult_t nccl_once(const struct api *a, int k, char *s, char *r, size_t size, int n,
                              int me, ncclComm_t c, cudaStream_t st)
{
    size_t per = size / (size_t)n; /* bytes per rank for the split ops */
    ncclResult_t rc = ncclSuccess;
    switch (k) {
    case OP_ALLREDUCE:
        return a->all_reduce(s, r, size / 4, NCCL_FLOAT, NCCL_SUM, c, st);
    case OP_ALLGATHER:
        return a->all_gather(s, r, per / 4, NCCL_FLOAT, c, st);
    case OP_REDUCESCATTER:
        return a->reduce_scatter(s, r, per / 4, NCCL_FLOAT, NCCL_SUM, c, st);
    case OP_ALLTOALL:
        if ((rc = a->group_start()) != ncclSuccess)
            return rc;
        for (int p = 0; p < n && rc == ncclSuccess; p++) {
            rc = a->send(s + (size_t)p * per, per / 4, NCCL_FLOAT, p, c, st);
            if (rc == ncclSuccess)
                rc = a->recv(r + (size_t)p * per, per / 4, NCCL_FLOAT, p, c, st);
        }
        {
            ncclResult_t e = a->group_end();
            return rc != ncclSuccess ? rc : e;
        }
    default:
        if ((rc = a->group_start()) != ncclSuccess)
            return rc;
        rc = a->send(s, size / 4, NCCL_FLOAT, (me + 1) % n, c, st);
        if (rc == ncclSuccess)
            rc = a->recv(r, size / 4, NCCL_FLOAT, (me + n - 1) % n, c, st);
        {
            ncclResult_t e = a->group_end();
            return rc != ncclSuccess ? rc : e;
        }
    }
}

/* The size op k really moves for a requested size: whole floats (per rank for split ops). */
static size_t moved(int k, size_t bytes, int n)
{
    if (k == OP_ALLGATHER || k == OP_REDUCESCATTER || k == OP_ALLTOALL)
        return bytes / (size_t)n / 4 * 4 * (size_t)n;
    return bytes / 4 * 4;
}

/*
 * The sweep on an initialised communicator.  Returns 0, or -1 after an NCCL or CUDA error on
 * any rank (why filled on rank 0 with the first one, as every rank checks after each size).
 */
static int sweep(const struct api *a, MPI_Comm world, ncclComm_t c, cudaStream_t st, char *s,
                 char *r, const struct cs__fabric_sweep *sw, char *why, size_t len)
{
    int me, n;
    MPI_Comm_rank(world, &me);
    MPI_Comm_size(world, &n);
    for (int k = 0; k < NOPS; k++) {
        for (size_t bytes = sw->min_bytes; bytes <= sw->max_bytes; bytes *= (size_t)sw->factor) {
            size_t size = moved(k, bytes, n);
            if (!size)
                continue;
            int iters = cs__fabric_iters(size);
            char err[200] = "";
            ncclResult_t rc = nccl_once(a, k, s, r, size, n, me, c, st); /* warm-up */
            cuda_rc crc = rc == ncclSuccess ? a->stream_sync(st) : 0;
            MPI_Barrier(world);
            double t0 = MPI_Wtime();
            for (int i = 0; i < iters && rc == ncclSuccess && crc == 0; i++)
                rc = nccl_once(a, k, s, r, size, n, me, c, st);
            if (rc == ncclSuccess && crc == 0)
                crc = a->stream_sync(st);
            double dt = (MPI_Wtime() - t0) / iters, worst = 0;
            if (rc != ncclSuccess)
                snprintf(err, sizeof(err),
                         "rank %d: %s of %zu bytes failed with NCCL error %d (%s)", me, ops[k].name,
                         size, (int)rc, nccl_msg(a, rc));
            else if (crc != 0)
                snprintf(err, sizeof(err),
                         "rank %d: cudaStreamSynchronize after %s of %zu bytes failed with CUDA "
                         "error %d (%s)",
                         me, ops[k].name, size, crc, cuda_msg(a, crc));
            /* Every rank learns whether any failed, so all leave the sweep together. */
            int bad = err[0] != 0, anybad = 0;
            MPI_Allreduce(&bad, &anybad, 1, MPI_INT, MPI_MAX, world);
            if (anybad) {
                struct {
                    int bad, rank;
                } in = {bad ? 0 : 1, me}, out;
                MPI_Allreduce(&in, &out, 1, MPI_2INT, MPI_MINLOC, world);
                if (out.rank == me && me != 0)
                    MPI_Send(err, (int)sizeof(err), MPI_CHAR, 0, 77, world);
                if (me == 0 && out.rank != 0)
                    MPI_Recv(err, (int)sizeof(err), MPI_CHAR, out.rank, 77, world,
                             MPI_STATUS_IGNORE);
                snprintf(why, len, "%s", err);
                return -1;
            }
            MPI_Reduce(&dt, &worst, 1, MPI_DOUBLE, MPI_MAX, 0, world);
            if (me == 0)
                cs__fabric_emit_coll("nccl", ops[k].name, ops[k].op, size, n, worst);
        }
    }
    return 0;
}

void cs__fabric_nccl(MPI_Comm world, int local_rank, const struct cs__fabric_sweep *sw,
                     const char *mode)
{
    int me, n;
    MPI_Comm_rank(world, &me);
    MPI_Comm_size(world, &n);
    if (mode && !strcmp(mode, "off")) {
        cs__fabric_emit("nccl available=0 reason=not tried (--nccl off)");
        return;
    }
    struct api a;
    struct rank_state st;
    memset(&st, 0, sizeof(st));
    gethostname(st.host, sizeof(st.host) - 1);
    int ndev = 0;
    char *sbuf = NULL, *rbuf = NULL;
    cudaStream_t stream = NULL;
    st.ok = load(&a, &ndev, st.why, sizeof(st.why)) == 0;
    size_t cap = sw->max_bytes + 64;
    if (st.ok) {
        st.dev = local_rank % ndev;
        cuda_rc rc = a.set_device(st.dev);
        if (rc == 0)
            rc = a.get_device(&st.dev);
        if (rc == 0)
            rc = a.malloc_((void **)&sbuf, cap);
        if (rc == 0)
            rc = a.malloc_((void **)&rbuf, cap);
        if (rc == 0 && a.memset_)
            rc = a.memset_(sbuf, 0, cap);
        if (rc == 0)
            rc = a.stream_create(&stream);
        if (rc != 0) {
            snprintf(st.why, sizeof(st.why),
                     "GPU %d: setting it up (device, 2 x %zu bytes, a stream) failed with CUDA "
                     "error %d (%s)",
                     st.dev, cap, rc, cuda_msg(&a, rc));
            st.ok = 0;
        }
        if (st.ok && a.version(&st.version) != ncclSuccess)
            st.version = 0;
    }
    /* Rank 0 learns every rank's state: all take part, or none does. */
    struct rank_state *all = me == 0 ? calloc((size_t)n, sizeof(*all)) : NULL;
    MPI_Gather(&st, (int)sizeof(st), MPI_BYTE, all, (int)sizeof(st), MPI_BYTE, 0, world);
    int ok_all = 0;
    MPI_Allreduce(&st.ok, &ok_all, 1, MPI_INT, MPI_MIN, world);
    if (me == 0 && all) {
        int without = 0, first = -1;
        for (int i = 0; i < n; i++)
            if (!all[i].ok) {
                without++;
                if (first < 0)
                    first = i;
            }
        if (first >= 0)
            cs__fabric_emit("nccl available=0 ranks_without=%d reason=rank %d (%s): %s; %d of %d "
                            "rank(s) could not take part",
                            without, first, all[first].host, all[first].why, without, n);
    }
    if (ok_all) {
        ncclUniqueId id;
        memset(&id, 0, sizeof(id));
        ncclResult_t rc = me == 0 ? a.unique_id(&id) : ncclSuccess;
        int rc0 = (int)rc;
        MPI_Bcast(&rc0, 1, MPI_INT, 0, world);
        ncclComm_t comm = NULL;
        char why[300] = "";
        if (rc0 != ncclSuccess) {
            snprintf(why, sizeof(why), "rank 0: ncclGetUniqueId failed with NCCL error %d (%s)",
                     rc0, nccl_msg(&a, (ncclResult_t)rc0));
        } else {
            MPI_Bcast(&id, (int)sizeof(id), MPI_BYTE, 0, world);
            rc = a.init_rank(&comm, n, id, me);
            int bad = rc != ncclSuccess, anybad = 0;
            MPI_Allreduce(&bad, &anybad, 1, MPI_INT, MPI_MAX, world);
            if (anybad) {
                snprintf(why, sizeof(why),
                         "ncclCommInitRank failed on at least one rank (rank %d: NCCL error %d, "
                         "%s)",
                         me, (int)rc, nccl_msg(&a, rc));
                if (comm)
                    a.abort_(comm);
                comm = NULL;
            }
        }
        if (me == 0 && why[0])
            cs__fabric_emit("nccl available=0 ranks_without=%d reason=%s", n, why);
        if (comm) {
            if (me == 0 && all) {
                /* The devices, one per rank, so a reader can check the mapping. */
                size_t dlen = (size_t)n * 12 + 8, o = 0;
                char *devs = malloc(dlen);
                for (int i = 0; devs && i < n; i++)
                    o += (size_t)snprintf(devs + o, dlen - o, "%s%d", i ? "," : "", all[i].dev);
                cs__fabric_emit("nccl available=1 version=%d ranks=%d devices=%s", all[0].version,
                                n, devs ? devs : "-");
                free(devs);
            }
            if (sweep(&a, world, comm, stream, sbuf, rbuf, sw, why, sizeof(why)) < 0) {
                if (me == 0)
                    cs__fabric_emit("nccl error reason=%s; the NCCL sweep stopped there", why);
                a.abort_(comm);
            } else {
                a.destroy(comm);
            }
        }
    }
    free(all);
    if (stream && a.stream_destroy)
        a.stream_destroy(stream);
    if (a.free_) {
        if (sbuf)
            a.free_(sbuf);
        if (rbuf)
            a.free_(rbuf);
    }
    unload(&a);
}
