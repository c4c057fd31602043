/*
 * Shared by the MPI test programs that build parallelism groups: print one communicator as
 * "PREFIX: group ROLE ranks=W0,W1,..." (members as world ranks, up to 64), the ground truth the
 * tests compare with commscope's inferred groups.
 */
#ifndef CS_TEST_PRINT_GROUP_H
#define CS_TEST_PRINT_GROUP_H

#include <mpi.h>
#include <stdio.h>

static void print_group(const char *prefix, const char *role, MPI_Comm c)
{
    int n;
    MPI_Comm_size(c, &n);
    MPI_Group g, wg;
    MPI_Comm_group(c, &g);
    MPI_Comm_group(MPI_COMM_WORLD, &wg);
    int in[64], out[64];
    for (int i = 0; i < n && i < 64; i++)
        in[i] = i;
    MPI_Group_translate_ranks(g, n < 64 ? n : 64, in, wg, out);
    /* One write per line: MPICH's launcher forwards the ranks' output in pieces, and lines
     * written in several calls would interleave with the other ranks' lines. */
    char line[1024];
    int k = snprintf(line, sizeof line, "%s: group %s ranks=", prefix, role);
    for (int i = 0; i < n && i < 64 && k > 0 && (size_t)k < sizeof line; i++)
        k += snprintf(line + k, sizeof line - (size_t)k, "%s%d", i ? "," : "", out[i]);
    printf("%s\n", line);
    fflush(stdout);
    MPI_Group_free(&g);
    MPI_Group_free(&wg);
}

#endif
