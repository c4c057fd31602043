/*
 * Jobs that stop, for the hang diagnosis (test_hang.py).  Every rank first makes a few complete
 * collectives on MPI_COMM_WORLD and on a duplicate, then:
 *
 *   skip      rank 1 skips an MPI_Allreduce on the duplicate and waits in MPI_Barrier on world
 *   deadlock  ranks 0 and 1 each wait in MPI_Recv from the other; the rest in MPI_Barrier
 *   exit      rank 2 exits with status 3 without MPI_Finalize after 1 s; the rest wait for it in
 *             MPI_Allreduce
 *   sigkill   ranks 2 and 3 split off; rank 3 waits in MPI_Allreduce on their communicator and is
 *             killed (SIGKILL) while rank 2 computes; ranks 0 and 1 wait in MPI_Barrier on world
 *   mismatch  an MPI_Allreduce whose counts differ: 256 Ki doubles on rank 0, 512 Ki on the
 *             others
 *   nodestop  every rank on the host of the last rank stops making progress outside MPI (as on a
 *             node whose GPUs or file system hang); the others wait in MPI_Allreduce on world
 *             (test_cluster_hang.py, one job over hosts)
 *   freeze    rank 1 stops itself (SIGSTOP: every thread, the collector's too, as on a node that
 *             froze); the others wait in MPI_Allreduce on world
 *
 * Prints "hang: rank R ready" before stopping, so the test knows the setup ran.
 */
#include <mpi.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void *killer(void *arg)
{
    (void)arg;
    usleep(300000);
    kill(getpid(), SIGKILL);
    return NULL;
}

int main(int argc, char **argv)
{
    const char *what = argc > 1 ? argv[1] : "skip";
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Comm dup;
    MPI_Comm_dup(MPI_COMM_WORLD, &dup);
    double x = rank, y = 0;
    for (int i = 0; i < 3; i++) {
        MPI_Allreduce(&x, &y, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
        MPI_Allreduce(&x, &y, 1, MPI_DOUBLE, MPI_SUM, dup);
    }
    printf("hang: rank %d ready\n", rank);
    fflush(stdout);
    if (!strcmp(what, "skip")) {
        if (rank != 1)
            MPI_Allreduce(&x, &y, 1, MPI_DOUBLE, MPI_SUM, dup);
        MPI_Barrier(MPI_COMM_WORLD);
    } else if (!strcmp(what, "deadlock")) {
        if (rank < 2)
            MPI_Recv(&y, 1, MPI_DOUBLE, 1 - rank, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        MPI_Barrier(MPI_COMM_WORLD);
    } else if (!strcmp(what, "exit")) {
        if (rank == 2) {
            sleep(1);
            exit(3);
        }
        MPI_Allreduce(&x, &y, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    } else if (!strcmp(what, "sigkill")) {
        MPI_Comm pair;
        MPI_Comm_split(MPI_COMM_WORLD, rank >= 2, rank, &pair);
        if (rank == 3) {
            pthread_t t;
            pthread_create(&t, NULL, killer, NULL);
            MPI_Allreduce(&x, &y, 1, MPI_DOUBLE, MPI_SUM, pair);
        } else if (rank == 2) {
            sleep(30);
        } else {
            MPI_Barrier(MPI_COMM_WORLD);
        }
    } else if (!strcmp(what, "nodestop")) {
        char host[64] = "", *all = calloc((size_t)size, sizeof host);
        gethostname(host, sizeof host - 1);
        MPI_Allgather(host, sizeof host, MPI_CHAR, all, sizeof host, MPI_CHAR, MPI_COMM_WORLD);
        if (!strcmp(host, all + (size_t)(size - 1) * sizeof host))
            for (;;)
                pause();
        MPI_Allreduce(&x, &y, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
        free(all);
    } else if (!strcmp(what, "freeze")) {
        if (rank == 1)
            raise(SIGSTOP);
        MPI_Allreduce(&x, &y, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    } else if (!strcmp(what, "mismatch")) {
        int n = rank == 0 ? 1 << 18 : 1 << 19;
        /* Room for the larger count everywhere: the job hangs instead of writing past a buffer. */
        double *b = calloc(1 << 20, sizeof *b), *c = calloc(1 << 20, sizeof *c);
        MPI_Allreduce(b, c, n, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
        MPI_Barrier(MPI_COMM_WORLD);
        free(b);
        free(c);
    }
    MPI_Finalize();
    return 0;
}
