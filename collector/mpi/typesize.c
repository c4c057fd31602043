/*
 * Datatype sizes for the byte counts of events.  Every wrapper multiplies a count by its
 * datatype's size; asking MPI (PMPI_Type_size) costs a call into libmpi per event.  The sizes of
 * the predefined datatypes never change and their handles stay valid for the whole run, so they
 * are asked once, at MPI_Init, into a small open-addressing table that is read-only afterwards
 * (filled before tracing is switched on, so readers need no synchronisation).  Any other datatype
 * (derived ones can be freed and their handles reused) is asked from MPI every time, as before.
 */
#include "internal.h"

struct cs__tsize_entry cs__tsize_table[CS__TSIZE_SLOTS];

static void put(MPI_Datatype t)
{
    int s = 0;
    if (t == MPI_DATATYPE_NULL || PMPI_Type_size(t, &s) != MPI_SUCCESS || s < 0)
        return;
    for (uint32_t i = cs__tsize_hash(t), n = 0; n < CS__TSIZE_SLOTS;
         i = (i + 1) % CS__TSIZE_SLOTS, n++) {
        struct cs__tsize_entry *e = &cs__tsize_table[i];
        if (e->used && e->type == t)
            return; /* two names for one handle (e.g. MPI_LONG_LONG_INT) */
        if (!e->used) {
            e->type = t;
            e->size = (uint64_t)s;
            e->used = 1;
            return;
        }
    }
}

void cs__tsize_init(void)
{
    static int done;
    if (done)
        return;
    done = 1;
    const MPI_Datatype types[] = {
        MPI_CHAR,
        MPI_SIGNED_CHAR,
        MPI_UNSIGNED_CHAR,
        MPI_BYTE,
        MPI_SHORT,
        MPI_UNSIGNED_SHORT,
        MPI_INT,
        MPI_UNSIGNED,
        MPI_LONG,
        MPI_UNSIGNED_LONG,
        MPI_LONG_LONG,
        MPI_UNSIGNED_LONG_LONG,
        MPI_FLOAT,
        MPI_DOUBLE,
        MPI_LONG_DOUBLE,
        MPI_WCHAR,
        MPI_INT8_T,
        MPI_INT16_T,
        MPI_INT32_T,
        MPI_INT64_T,
        MPI_UINT8_T,
        MPI_UINT16_T,
        MPI_UINT32_T,
        MPI_UINT64_T,
        MPI_C_BOOL,
        MPI_C_FLOAT_COMPLEX,
        MPI_C_DOUBLE_COMPLEX,
        MPI_AINT,
        MPI_OFFSET,
        MPI_COUNT,
        MPI_PACKED,
        MPI_FLOAT_INT,
        MPI_DOUBLE_INT,
        MPI_LONG_INT,
        MPI_2INT,
        MPI_SHORT_INT,
    };
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++)
        put(types[i]);
}

uint64_t cs__tsize_ask(MPI_Datatype t)
{
    int s = 0;
    if (t == MPI_DATATYPE_NULL || PMPI_Type_size(t, &s) != MPI_SUCCESS || s < 0)
        return 0;
    return (uint64_t)s;
}
