/* Rank identity of processes started without MPI (collector/core/ident.c): precedence,
 * malformed pairs skipped, local rank, and the run id all ranks of one job agree on. */
#include <stdlib.h>

#include "cs_test.h"
#include "front.h"

static const char *const vars[] = {"RANK",
                                   "WORLD_SIZE",
                                   "SLURM_PROCID",
                                   "SLURM_NTASKS",
                                   "OMPI_COMM_WORLD_RANK",
                                   "OMPI_COMM_WORLD_SIZE",
                                   "PMI_RANK",
                                   "PMI_SIZE",
                                   "LOCAL_RANK",
                                   "SLURM_LOCALID",
                                   "OMPI_COMM_WORLD_LOCAL_RANK",
                                   "MPI_LOCALRANKID",
                                   "PMI_LOCAL_RANK",
                                   "COMMSCOPE_RUN_ID",
                                   "TORCHELASTIC_RUN_ID",
                                   "SLURM_JOB_ID",
                                   "SLURM_STEP_ID",
                                   "MASTER_ADDR",
                                   "MASTER_PORT",
                                   "COMMSCOPE_DIR"};

static void clear(void)
{
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++)
        unsetenv(vars[i]);
}

int main(void)
{
    struct cs__ident id;
    clear();
    cs__ident_from_env(&id);
    CHECK_INT(id.rank, ==, 0);
    CHECK_INT(id.size, ==, 1);
    CHECK_INT(id.local_rank, ==, -1);
    CHECK_INT(id.source, ==, CS_RANKSRC_SINGLE);

    /* Every source alone. */
    setenv("PMI_RANK", "5", 1);
    setenv("PMI_SIZE", "8", 1);
    cs__ident_from_env(&id);
    CHECK_INT(id.rank, ==, 5);
    CHECK_INT(id.size, ==, 8);
    CHECK_INT(id.source, ==, CS_RANKSRC_PMI);
    setenv("OMPI_COMM_WORLD_RANK", "3", 1);
    setenv("OMPI_COMM_WORLD_SIZE", "6", 1);
    cs__ident_from_env(&id);
    CHECK_INT(id.rank, ==, 3);
    CHECK_INT(id.source, ==, CS_RANKSRC_OMPI);
    setenv("SLURM_PROCID", "2", 1);
    setenv("SLURM_NTASKS", "4", 1);
    cs__ident_from_env(&id);
    CHECK_INT(id.rank, ==, 2);
    CHECK_INT(id.size, ==, 4);
    CHECK_INT(id.source, ==, CS_RANKSRC_SLURM);
    /* torchrun under srun: RANK wins. */
    setenv("RANK", "9", 1);
    setenv("WORLD_SIZE", "16", 1);
    cs__ident_from_env(&id);
    CHECK_INT(id.rank, ==, 9);
    CHECK_INT(id.size, ==, 16);
    CHECK_INT(id.source, ==, CS_RANKSRC_TORCH);
    /* A malformed pair is skipped (with a warning) for the next one. */
    setenv("RANK", "16", 1);
    cs__ident_from_env(&id);
    CHECK_INT(id.source, ==, CS_RANKSRC_SLURM);
    setenv("RANK", "x", 1);
    cs__ident_from_env(&id);
    CHECK_INT(id.source, ==, CS_RANKSRC_SLURM);
    unsetenv("WORLD_SIZE");
    setenv("RANK", "1", 1);
    cs__ident_from_env(&id);
    CHECK_INT(id.source, ==, CS_RANKSRC_SLURM);

    /* Local rank: first valid of its list. */
    setenv("SLURM_LOCALID", "1", 1);
    setenv("PMI_LOCAL_RANK", "7", 1);
    cs__ident_from_env(&id);
    CHECK_INT(id.local_rank, ==, 1);
    setenv("LOCAL_RANK", "3", 1);
    cs__ident_from_env(&id);
    CHECK_INT(id.local_rank, ==, 3);

    /* Run id: explicit, else the same for the same job and different for another. */
    setenv("COMMSCOPE_RUN_ID", "abc123", 1);
    CHECK(cs__ident_run_id(4) == 0xabc123ull);
    unsetenv("COMMSCOPE_RUN_ID");
    setenv("MASTER_ADDR", "node1", 1);
    setenv("MASTER_PORT", "29500", 1);
    uint64_t a = cs__ident_run_id(4), b = cs__ident_run_id(4);
    CHECK(a == b && a != 0);
    CHECK(cs__ident_run_id(8) != a);
    setenv("MASTER_PORT", "29501", 1);
    CHECK(cs__ident_run_id(4) != a);
    clear();
    return cs_test_result();
}
