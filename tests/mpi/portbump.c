/*
 * cs_test_portbump: stands in for a job's network traffic on a saved sysfs tree.  Between
 * MPI_Init and MPI_Finalize rank 0 adds known amounts to the counters of
 * $COMMSCOPE_SYSFS_ROOT/class/infiniband/mlx5_0/ports/1/counters (port_xmit_data +1000 words,
 * port_rcv_data +2500 words, symbol_error +3, link_downed +1), as a real port's counters would
 * move during a run; the test then expects exactly these differences in the report.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

static int bump(const char *root, const char *name, unsigned long long by)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/class/infiniband/mlx5_0/ports/1/counters/%s", root, name);
    FILE *f = fopen(path, "r");
    unsigned long long v = 0;
    if (!f || fscanf(f, "%llu", &v) != 1) {
        fprintf(stderr, "cs_test_portbump: cannot read %s\n", path);
        if (f)
            fclose(f);
        return 1;
    }
    fclose(f);
    f = fopen(path, "w");
    if (!f || fprintf(f, "%llu\n", v + by) < 0 || fclose(f) != 0) {
        fprintf(stderr, "cs_test_portbump: cannot write %s\n", path);
        return 1;
    }
    return 0;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, bad = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    const char *root = getenv("COMMSCOPE_SYSFS_ROOT");
    if (rank == 0) {
        if (!root)
            bad = 1;
        else
            bad = bump(root, "port_xmit_data", 1000) | bump(root, "port_rcv_data", 2500) |
                  bump(root, "symbol_error", 3) | bump(root, "link_downed", 1);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Finalize();
    return bad;
}
