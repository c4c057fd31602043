/*
 * Test programs' rendezvous without MPI: rank 0 makes the NCCL unique id and publishes it as a
 * file in a directory every rank sees; the others wait for the file.  Exits(2) on failure.
 */
#ifndef COMMSCOPE_TEST_EXCHANGE_H
#define COMMSCOPE_TEST_EXCHANGE_H

#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

ncclResult_t ncclGetUniqueId(ncclUniqueId *uniqueId);

static void exchange_id(const char *dir, int rank, ncclUniqueId *id)
{
    char path[1024], tmp[1100];
    snprintf(path, sizeof path, "%s/uid", dir);
    if (rank == 0) {
        if (ncclGetUniqueId(id) != ncclSuccess) {
            fprintf(stderr, "ncclGetUniqueId failed\n");
            exit(2);
        }
        snprintf(tmp, sizeof tmp, "%s.tmp", path);
        FILE *f = fopen(tmp, "wb");
        if (!f || fwrite(id, sizeof *id, 1, f) != 1 || fclose(f) != 0 || rename(tmp, path)) {
            perror(path);
            exit(2);
        }
        return;
    }
    for (int tries = 0; tries < 20000; tries++) {
        FILE *f = fopen(path, "rb");
        if (f) {
            size_t n = fread(id, sizeof *id, 1, f);
            fclose(f);
            if (n == 1)
                return;
        }
        usleep(1000);
    }
    fprintf(stderr, "rank %d: no unique id in %s\n", rank, path);
    exit(2);
}

#endif
