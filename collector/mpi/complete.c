/*
 * Completion calls (Wait*, Test*), hand-written: each has its own way of saying which requests
 * it completed.  Every call records one event for itself (aux = number of requests passed) and
 * one CS_OP_COMPLETE record per tracked request it completed.  A Test* call that completed no
 * request is not recorded; it is counted with cs_trace_count_test().
 *
 * A completed request's handle becomes MPI_REQUEST_NULL (and may be handed out again at once,
 * to another thread), so the map entries are read before the PMPI call.  When the caller ignores
 * statuses we pass our own, because a receive's completion record needs its source and size;
 * what the caller sees is unchanged.
 */
#include <stdlib.h>

#include "internal.h"

/* Small calls use the stack; larger ones a per-thread buffer that only grows. */
#define STACK_N 16

struct snap {
    uint32_t slot; /* from cs__req_get; 0 = not tracked */
    struct cs__req r;
};

static __thread struct snap *tl_snap;
static __thread size_t tl_snap_cap;
static __thread MPI_Status *tl_st;
static __thread size_t tl_st_cap;

/* Room for n snapshots: stack when it fits, else the thread's buffer, else NULL. */
static struct snap *snap_room(int n, struct snap *stack)
{
    if (n <= STACK_N)
        return stack;
    if ((size_t)n > tl_snap_cap) {
        struct snap *p = realloc(tl_snap, (size_t)n * sizeof(*p));
        if (!p)
            return NULL;
        tl_snap = p;
        tl_snap_cap = (size_t)n;
    }
    return tl_snap;
}

static MPI_Status *status_room(int n, MPI_Status *stack)
{
    if (n <= STACK_N)
        return stack;
    if ((size_t)n > tl_st_cap) {
        MPI_Status *p = realloc(tl_st, (size_t)n * sizeof(*p));
        if (!p)
            return NULL;
        tl_st = p;
        tl_st_cap = (size_t)n;
    }
    return tl_st;
}

/* Read the entries of reqs[0..n) before the call; returns how many are tracked. */
static int snap_take(int n, const MPI_Request *reqs, struct snap *s)
{
    int tracked = 0;
    for (int i = 0; i < n; i++) {
        s[i].slot = reqs[i] == MPI_REQUEST_NULL ? 0 : cs__req_get(reqs[i], &s[i].r);
        tracked += s[i].slot != 0;
    }
    return tracked;
}

/* One CS_OP_COMPLETE record for snapshot s, finished with status st (may be NULL). */
static void complete_one(const struct snap *s, const MPI_Status *st, int err_in_status, uint64_t t)
{
    if (!s->slot)
        return;
    cs__req_done(s->slot, s->r.id);
    struct cs_event *ev = cs_hot_begin();
    if (!ev)
        return;
    ev->t_begin = t;
    ev->t_end = t;
    ev->op = CS_OP_COMPLETE;
    ev->comm = s->r.comm;
    ev->request = s->r.id;
    ev->seq = s->r.seq;
    ev->peer = s->r.peer;
    ev->aux = s->r.tag;
    if (st) {
        int cancelled = 0;
        if (PMPI_Test_cancelled(st, &cancelled) == MPI_SUCCESS && cancelled)
            ev->flags |= CS_EV_CANCELLED;
        if (err_in_status && st->MPI_ERROR != MPI_SUCCESS) {
            ev->flags |= CS_EV_ERROR;
            ev->aux = st->MPI_ERROR;
        } else if (s->r.recv && !cancelled) {
            int n = 0;
            if (PMPI_Get_count(st, MPI_BYTE, &n) == MPI_SUCCESS && n != MPI_UNDEFINED && n > 0)
                ev->bytes_recv = (uint64_t)n;
            ev->aux = st->MPI_TAG;
            ev->peer = -1;
            const struct cs__comm *ci = cs__comm_get(s->r.handle);
            if (st->MPI_SOURCE == MPI_PROC_NULL)
                ev->flags |= CS_EV_PROC_NULL;
            else if (ci && ci->id == s->r.comm)
                ev->peer = cs__to_world(ci, st->MPI_SOURCE, &ev->flags);
        }
    }
    cs_hot_commit(ev);
}

/*
 * The in-flight record of a wait (hot.h): the op and the number of requests; a wait on one
 * tracked request also names it (request id, communicator, sequence number, peer), so a rank
 * stuck in it shows what it waits for.  Tests do not block and are not begun early.
 */
static struct cs_event *enter_wait(int test, uint16_t op, int count, const struct snap *one)
{
    if (test)
        return NULL;
    struct cs_event *ev = one && one->slot
                              ? cs_hot_enter(op, one->r.comm, one->r.seq, one->r.peer, count, 0, 0)
                              : cs_hot_enter(op, 0, 0, -1, count, 0, 0);
    if (ev && one && one->slot)
        ev->request = one->r.id;
    return ev;
}

/* The event of the completion call itself: a test's slot is begun now, a wait's is its in-flight
 * record (ev, from enter_wait). */
static void call_event(int test, struct cs_event *ev, uint16_t op, uint64_t t0, uint64_t t1, int rc,
                       int count, uint64_t req)
{
    ev = test ? cs_hot_begin() : cs_hot_resume(ev);
    if (!ev)
        return;
    ev->t_begin = t0;
    ev->t_end = t1;
    ev->comm = 0;
    ev->bytes = 0;
    ev->bytes_recv = 0;
    ev->seq = 0;
    ev->flags = 0;
    ev->op = op;
    ev->peer = -1;
    ev->aux = count;
    ev->request = req;
    if (rc != MPI_SUCCESS) {
        ev->flags |= CS_EV_ERROR;
        ev->aux = rc;
    }
    cs_hot_commit(ev);
}

/* Wait and Test: one request. */
static int one(int test, MPI_Request *request, int *flag, MPI_Status *status)
{
    struct snap s = {0};
    MPI_Request h = *request;
    if (h != MPI_REQUEST_NULL)
        s.slot = cs__req_get(h, &s.r);
    MPI_Status own;
    MPI_Status *st = (status == MPI_STATUS_IGNORE && s.slot) ? &own : status;
    struct cs_event *ev = enter_wait(test, CS_OP_WAIT, 1, &s);
    uint64_t t0 = cs_hot_now();
    cs_hot_entered(ev, t0);
    int rc = test ? PMPI_Test(request, flag, st) : PMPI_Wait(request, st);
    uint64_t t1 = cs_hot_now();
    int done = h != MPI_REQUEST_NULL && (test ? *flag : 1);
    if (test && !done && rc == MPI_SUCCESS) {
        cs_trace_count_test(t1 - t0);
        return rc;
    }
    call_event(test, ev, test ? CS_OP_TEST : CS_OP_WAIT, t0, t1, rc, 1, s.slot ? s.r.id : 0);
    if (done && (rc == MPI_SUCCESS || *request == MPI_REQUEST_NULL))
        complete_one(&s, st, 0, t1);
    return rc;
}

CS_EXPORT int MPI_Wait(MPI_Request *request, MPI_Status *status)
{
    if (CS_UNLIKELY(!cs_active) || !request)
        return PMPI_Wait(request, status);
    return one(0, request, NULL, status);
}

CS_EXPORT int MPI_Test(MPI_Request *request, int *flag, MPI_Status *status)
{
    if (CS_UNLIKELY(!cs_active) || !request || !flag)
        return PMPI_Test(request, flag, status);
    return one(1, request, flag, status);
}

/*
 * Waitall and Testall.  All requests complete together (Testall: only when *flag).  With
 * MPI_ERR_IN_STATUS, the ones whose status says MPI_ERR_PENDING did not complete.
 */
static int all(int test, int count, MPI_Request reqs[], int *flag, MPI_Status statuses[])
{
    struct snap sstack[STACK_N];
    MPI_Status ststack[STACK_N];
    struct snap *s = snap_room(count, sstack);
    int tracked = s ? snap_take(count, reqs, s) : 0;
    int live = 0;
    for (int i = 0; i < count; i++)
        live += reqs[i] != MPI_REQUEST_NULL;
    MPI_Status *st = statuses;
    if (statuses == MPI_STATUSES_IGNORE && tracked)
        st = status_room(count, ststack);
    struct cs_event *ev = enter_wait(test, CS_OP_WAITALL, count, NULL);
    uint64_t t0 = cs_hot_now();
    cs_hot_entered(ev, t0);
    int rc = test ? PMPI_Testall(count, reqs, flag, st) : PMPI_Waitall(count, reqs, st);
    uint64_t t1 = cs_hot_now();
    int done = test ? *flag : 1;
    if (test && (!done || live == 0) && rc == MPI_SUCCESS) {
        cs_trace_count_test(t1 - t0);
        return rc;
    }
    call_event(test, ev, test ? CS_OP_TESTALL : CS_OP_WAITALL, t0, t1, rc, count, 0);
    if (!tracked || !done)
        return rc;
    for (int i = 0; i < count; i++) {
        if (!s[i].slot)
            continue;
        if (rc == MPI_SUCCESS)
            complete_one(&s[i], st ? &st[i] : NULL, 0, t1);
        else if (rc == MPI_ERR_IN_STATUS && st && st[i].MPI_ERROR != MPI_ERR_PENDING)
            complete_one(&s[i], &st[i], 1, t1);
        else if (rc != MPI_ERR_IN_STATUS && reqs[i] == MPI_REQUEST_NULL)
            complete_one(&s[i], NULL, 0, t1);
    }
    return rc;
}

CS_EXPORT int MPI_Waitall(int count, MPI_Request array_of_requests[],
                          MPI_Status array_of_statuses[])
{
    if (CS_UNLIKELY(!cs_active) || count < 0 || (count > 0 && !array_of_requests))
        return PMPI_Waitall(count, array_of_requests, array_of_statuses);
    return all(0, count, array_of_requests, NULL, array_of_statuses);
}

CS_EXPORT int MPI_Testall(int count, MPI_Request array_of_requests[], int *flag,
                          MPI_Status array_of_statuses[])
{
    if (CS_UNLIKELY(!cs_active) || count < 0 || (count > 0 && !array_of_requests) || !flag)
        return PMPI_Testall(count, array_of_requests, flag, array_of_statuses);
    return all(1, count, array_of_requests, flag, array_of_statuses);
}

/* Waitany and Testany: at most one request completes, the one at *index. */
static int any(int test, int count, MPI_Request reqs[], int *index, int *flag, MPI_Status *status)
{
    struct snap sstack[STACK_N];
    struct snap *s = snap_room(count, sstack);
    int tracked = s ? snap_take(count, reqs, s) : 0;
    MPI_Status own;
    MPI_Status *st = (status == MPI_STATUS_IGNORE && tracked) ? &own : status;
    struct cs_event *ev = enter_wait(test, CS_OP_WAITANY, count, NULL);
    uint64_t t0 = cs_hot_now();
    cs_hot_entered(ev, t0);
    int rc =
        test ? PMPI_Testany(count, reqs, index, flag, st) : PMPI_Waitany(count, reqs, index, st);
    uint64_t t1 = cs_hot_now();
    int i = *index;
    int done = (test ? *flag : 1) && i != MPI_UNDEFINED && i >= 0 && i < count;
    if (test && !done && rc == MPI_SUCCESS) {
        cs_trace_count_test(t1 - t0);
        return rc;
    }
    call_event(test, ev, test ? CS_OP_TESTANY : CS_OP_WAITANY, t0, t1, rc, count, 0);
    if (done && tracked && (rc == MPI_SUCCESS || reqs[i] == MPI_REQUEST_NULL))
        complete_one(&s[i], st, 0, t1);
    return rc;
}

CS_EXPORT int MPI_Waitany(int count, MPI_Request array_of_requests[], int *index,
                          MPI_Status *status)
{
    if (CS_UNLIKELY(!cs_active) || count < 0 || (count > 0 && !array_of_requests) || !index)
        return PMPI_Waitany(count, array_of_requests, index, status);
    return any(0, count, array_of_requests, index, NULL, status);
}

CS_EXPORT int MPI_Testany(int count, MPI_Request array_of_requests[], int *index, int *flag,
                          MPI_Status *status)
{
    if (CS_UNLIKELY(!cs_active) || count < 0 || (count > 0 && !array_of_requests) || !index ||
        !flag)
        return PMPI_Testany(count, array_of_requests, index, flag, status);
    return any(1, count, array_of_requests, index, flag, status);
}

/* Waitsome and Testsome: the requests at indices[0..*outcount) completed. */
static int some(int test, int incount, MPI_Request reqs[], int *outcount, int indices[],
                MPI_Status statuses[])
{
    struct snap sstack[STACK_N];
    MPI_Status ststack[STACK_N];
    struct snap *s = snap_room(incount, sstack);
    int tracked = s ? snap_take(incount, reqs, s) : 0;
    MPI_Status *st = statuses;
    if (statuses == MPI_STATUSES_IGNORE && tracked)
        st = status_room(incount, ststack);
    struct cs_event *ev = enter_wait(test, CS_OP_WAITSOME, incount, NULL);
    uint64_t t0 = cs_hot_now();
    cs_hot_entered(ev, t0);
    int rc = test ? PMPI_Testsome(incount, reqs, outcount, indices, st)
                  : PMPI_Waitsome(incount, reqs, outcount, indices, st);
    uint64_t t1 = cs_hot_now();
    int n = *outcount;
    if (n == MPI_UNDEFINED || n < 0)
        n = 0;
    if (test && n == 0 && rc == MPI_SUCCESS) {
        cs_trace_count_test(t1 - t0);
        return rc;
    }
    call_event(test, ev, test ? CS_OP_TESTSOME : CS_OP_WAITSOME, t0, t1, rc, incount, 0);
    if (!tracked || (rc != MPI_SUCCESS && rc != MPI_ERR_IN_STATUS))
        return rc;
    for (int j = 0; j < n && j < incount; j++) {
        int i = indices[j];
        if (i >= 0 && i < incount)
            complete_one(&s[i], st ? &st[j] : NULL, rc == MPI_ERR_IN_STATUS, t1);
    }
    return rc;
}

CS_EXPORT int MPI_Waitsome(int incount, MPI_Request array_of_requests[], int *outcount,
                           int array_of_indices[], MPI_Status array_of_statuses[])
{
    if (CS_UNLIKELY(!cs_active) || incount < 0 || (incount > 0 && !array_of_requests) ||
        !outcount || !array_of_indices)
        return PMPI_Waitsome(incount, array_of_requests, outcount, array_of_indices,
                             array_of_statuses);
    return some(0, incount, array_of_requests, outcount, array_of_indices, array_of_statuses);
}

CS_EXPORT int MPI_Testsome(int incount, MPI_Request array_of_requests[], int *outcount,
                           int array_of_indices[], MPI_Status array_of_statuses[])
{
    if (CS_UNLIKELY(!cs_active) || incount < 0 || (incount > 0 && !array_of_requests) ||
        !outcount || !array_of_indices)
        return PMPI_Testsome(incount, array_of_requests, outcount, array_of_indices,
                             array_of_statuses);
    return some(1, incount, array_of_requests, outcount, array_of_indices, array_of_statuses);
}
