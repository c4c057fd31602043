"""What the GPU check scripts (check.py, check_steps.py, check_torch.py) share: PASS/FAIL lines,
the summary and exit status, and the sum of a per-step budget's parts."""
import sys

results = []


def verdict(ok, what):
    results.append(bool(ok))
    print("%s: %s" % ("PASS" if ok else "FAIL", what))


def num(v):
    return v if isinstance(v, (int, float)) else 0.0


def budget_parts(b):
    """Compute, gradient sync, waiting, other MPI, idle and communication by dimension: what a
    step's budget (report `budget.total`) divides the step into."""
    return (num(b.get("compute_s")) + num(b.get("gradient_sync_s")) + num(b.get("wait_s")) +
            num(b.get("other_mpi_s")) + num(b.get("idle_s")) +
            sum(num(v) for v in (b.get("comm_s") or {}).values()))


def finish():
    print("SUMMARY: %d PASS, %d FAIL" % (sum(results), len(results) - sum(results)))
    sys.exit(0 if results and all(results) else 1)
