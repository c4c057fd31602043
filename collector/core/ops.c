/* The op table, expanded from ops.def, and the byte-at-a-time reference CRC-32 (crc.c has the
 * fast one every reader and writer uses). */
#include <string.h>

#include "commscope/ops.h"

static const struct cs_op_info op_table[CS_OP_MAX] = {
#define CS_OP(e, id, nm, k, pat, bw) [e] = {.name = nm, .kind = k, .pattern = pat, .busbw = bw},
#include "commscope/ops.def"
#undef CS_OP
};

static const struct cs_op_info unknown_op = {.name = NULL};

const struct cs_op_info *cs_op_info(unsigned op)
{
    return op < CS_OP_MAX ? &op_table[op] : &unknown_op;
}

const char *cs_op_name(unsigned op)
{
    const char *n = cs_op_info(op)->name;
    return n ? n : "unknown";
}

enum cs_op cs_op_by_name(const char *name)
{
    for (unsigned i = 0; i < CS_OP_MAX; i++)
        if (op_table[i].name && strcmp(op_table[i].name, name) == 0)
            return (enum cs_op)i;
    return CS_OP_NONE;
}

double cs_op_busbw_factor(unsigned op, int n)
{
    if (n <= 0)
        return 0.0;
    switch (cs_op_info(op)->busbw) {
    case CS_BW_ONE:
        return 1.0;
    case CS_BW_ALLREDUCE:
        return 2.0 * (n - 1) / n;
    case CS_BW_NM1_N:
        return (double)(n - 1) / n;
    default:
        return 0.0;
    }
}

int cs_op_is_collective(unsigned op)
{
    enum cs_op_kind k = cs_op_info(op)->kind;
    return k == CS_KIND_COLL || k == CS_KIND_ICOLL;
}

int cs_op_is_nccl(unsigned op)
{
    enum cs_op_kind k = cs_op_info(op)->kind;
    return k == CS_KIND_NCOLL || k == CS_KIND_NP2P;
}

/* Table-driven CRC-32; the table is built at compile time would need a generator, so it is
 * computed on first use (idempotent, so a race only repeats the same stores). */
static uint32_t crc_table[256];
static int crc_ready;

uint32_t cs_crc32_simple(uint32_t crc, const void *buf, size_t len)
{
    if (!__atomic_load_n(&crc_ready, __ATOMIC_ACQUIRE)) {
        for (uint32_t i = 0; i < 256; i++) {
            uint32_t c = i;
            for (int k = 0; k < 8; k++)
                c = (c & 1) ? 0xedb88320u ^ (c >> 1) : c >> 1;
            crc_table[i] = c;
        }
        __atomic_store_n(&crc_ready, 1, __ATOMIC_RELEASE);
    }
    const unsigned char *p = buf;
    crc = ~crc;
    while (len--)
        crc = crc_table[(crc ^ *p++) & 0xff] ^ (crc >> 8);
    return ~crc;
}
