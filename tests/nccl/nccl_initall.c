/*
 * One process, several "devices": ncclCommInitAll on the CPU NCCL test double, one thread per
 * device (each drives its own member, as a program does without groups), all-reduces checked for
 * their results.  Prints "expect OP CALLS BYTES BYTES_RECV" over all devices and "member I RANK
 * SIZE DEVICE" as NCCL reports each communicator.
 *
 * Usage: cs_nccl_initall DIR NDEV ITERATIONS   (DIR, unused, as for the other NCCL test programs)
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include "../../collector/nccl/api.h"

#define CS_NCCL(fam, name, op, params, args) ncclResult_t nccl##name params;
#define CS_NCCL_Q(name, params, args) ncclResult_t nccl##name params;
#include "../../collector/nccl/calls.def"
#include "../../collector/nccl/queries.def"
#undef CS_NCCL
#undef CS_NCCL_Q

#define MAXDEV 16
#define COUNT 256

static ncclComm_t comms[MAXDEV];
static int ndev, iters, failed;

static void *drive(void *arg)
{
    int i = (int)(long)arg;
    static float buf[MAXDEV][2][COUNT];
    for (int it = 0; it < iters; it++) {
        for (int k = 0; k < COUNT; k++)
            buf[i][0][k] = (float)(i + 1);
        if (ncclAllReduce(buf[i][0], buf[i][1], COUNT, (ncclDataType_t)7, (ncclRedOp_t)0, comms[i],
                          NULL) != ncclSuccess ||
            buf[i][1][0] != (float)(ndev * (ndev + 1) / 2))
            __atomic_store_n(&failed, 1, __ATOMIC_RELAXED);
    }
    if (ncclCommDestroy(comms[i]) != ncclSuccess)
        __atomic_store_n(&failed, 1, __ATOMIC_RELAXED);
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc != 4 || (ndev = atoi(argv[2])) < 1 || ndev > MAXDEV || (iters = atoi(argv[3])) < 1)
        return fprintf(stderr, "usage: %s DIR NDEV ITERATIONS\n", argv[0]), 2;
    int devs[MAXDEV];
    for (int i = 0; i < ndev; i++)
        devs[i] = ndev - 1 - i; /* reversed, so a device differs from its comm rank */
    ncclResult_t rc = ncclCommInitAll(comms, ndev, devs);
    if (rc != ncclSuccess)
        return fprintf(stderr, "ncclCommInitAll returned %d\n", (int)rc), 2;
    for (int i = 0; i < ndev; i++) {
        int r = -1, n = -1, d = -1;
        ncclCommUserRank(comms[i], &r);
        ncclCommCount(comms[i], &n);
        ncclCommCuDevice(comms[i], &d);
        printf("member %d %d %d %d\n", i, r, n, d);
    }
    pthread_t t[MAXDEV];
    for (int i = 0; i < ndev; i++)
        if (pthread_create(&t[i], NULL, drive, (void *)(long)i) != 0)
            return fprintf(stderr, "pthread_create failed\n"), 2;
    for (int i = 0; i < ndev; i++)
        pthread_join(t[i], NULL);
    printf("expect ncclAllReduce %d %d %d\n", ndev * iters, ndev * iters * COUNT * 4,
           ndev * iters * COUNT * 4);
    if (failed)
        fprintf(stderr, "wrong all-reduce results\n");
    return failed;
}
