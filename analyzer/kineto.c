/* The Kineto importer: Kineto traces -> per-rank commscope traces -> the pipeline (kineto.h). */
#include "kineto.h"

#include <stdlib.h>

void cs__kineto_report_free(struct cs_report *rep)
{
    if (!rep->kineto)
        return;
    free(rep->kineto->ranks);
    free(rep->kineto->cand);
    free(rep->kineto);
    rep->kineto = NULL;
}
