#!/usr/bin/env python3
"""Tests of the `commscope` command line that need no MPI: dispatch, usage errors, the run
directory, LD_PRELOAD/COMMSCOPE_* set-up, `mpirun -x` insertion (checked with a stand-in `mpirun`
that prints its arguments), exit status propagation and signal forwarding.

Usage: test_launcher_cli.py COMMSCOPE_EXE.  Exit 0 pass, 1 fail.
"""
import os
import signal
import stat
import subprocess
import sys
import tempfile

EXE = os.path.abspath(sys.argv[1])
failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what, file=sys.stderr)
    return cond


def run(args, env=None, cwd=None):
    e = dict(os.environ)
    e.pop("LD_PRELOAD", None)
    for k in list(e):
        if k.startswith("COMMSCOPE_"):
            del e[k]
    e.update(env or {})
    return subprocess.run([EXE] + args, env=e, cwd=cwd, capture_output=True, text=True, timeout=60)


def read_kv(path):
    """commscope-run.txt as a list of (key, value)."""
    out = []
    with open(path) as f:
        for line in f:
            if line.startswith("#"):
                continue
            k, _, v = line.rstrip("\n").partition(": ")
            out.append((k, v))
    return out


def main():
    tmp = tempfile.mkdtemp(prefix="cs-cli-")
    # Stand-in collector libraries: `commscope run` only checks that they exist and preloads
    # them; empty shared objects keep these tests independent of the collector.
    libdir = os.path.join(tmp, "lib")
    os.mkdir(libdir)
    src = os.path.join(tmp, "empty.c")
    with open(src, "w") as f:
        f.write("int cs_cli_test_stand_in;\n")
    for name in ("libcommscope.so", "libcommscope_mpi.so"):
        subprocess.run(["cc", "-shared", "-fPIC", "-o", os.path.join(libdir, name), src],
                       check=True)
    env = {"COMMSCOPE_LIBDIR": libdir}

    # Dispatch and usage errors.
    p = run([])
    check(p.returncode == 2 and "usage: commscope" in p.stderr, "no command: %r" % (p,))
    p = run(["--help"])
    check(p.returncode == 0 and "run" in p.stdout and "analyze" in p.stdout
          and "version" in p.stdout, "--help lists the commands: %r" % p.stdout)
    p = run(["frobnicate"])
    check(p.returncode == 2 and "unknown command 'frobnicate'" in p.stderr, "unknown command %r" % (p,))
    p = run(["--frobnicate"])
    check(p.returncode == 2 and "--frobnicate" in p.stderr, "unknown top option %r" % (p,))
    for cmd in ("run", "analyze", "version", "topo", "fabric", "compare", "node-snapshot"):
        for opt in ("--help", "-h"):
            p = run([cmd, opt])
            check(p.returncode == 0 and "usage: commscope " + cmd in p.stdout,
                  "%s %s: %r" % (cmd, opt, p))
            check("\n  commscope " + cmd in p.stdout.split("example", 1)[-1]
                  and "exit status" in p.stdout,
                  "%s %s has examples and exit statuses: %r" % (cmd, opt, p.stdout))
    p = run(["topo", "-q"])
    check(p.returncode in (0, 1) and p.stdout == "", "topo -q prints no summary: %r" % (p,))
    p = run(["help", "run"])
    check(p.returncode == 0 and "usage: commscope run" in p.stdout, "help run %r" % (p,))
    p = run(["version"])
    check(p.returncode == 0 and p.stdout.startswith("commscope ") and "trace format 1" in p.stdout,
          "version %r" % p.stdout)
    p = run(["version", "extra"])
    check(p.returncode == 2, "version with an argument: %d" % p.returncode)
    p = run(["run", "--bogus"], env=env)
    check(p.returncode == 2 and "unknown option '--bogus'" in p.stderr, "run --bogus %r" % (p,))
    p = run(["run", "-o"], env=env)
    check(p.returncode == 2, "run -o without a directory: %d" % p.returncode)
    p = run(["run", "--quiet"], env=env)
    check(p.returncode == 2 and "no PROGRAM" in p.stderr, "run without a program %r" % (p,))

    # Libraries missing: a clear message, exit 1, nothing run.
    p = run(["run", "-o", os.path.join(tmp, "nolib"), "--", "true"],
            env={"COMMSCOPE_LIBDIR": os.path.join(tmp, "nowhere")})
    check(p.returncode == 1 and "COMMSCOPE_LIBDIR" in p.stderr, "missing libraries %r" % (p,))

    # A plain program: environment, run file, exit status.
    rd = os.path.join(tmp, "a", "b", "run1")
    script = 'echo "PRE=$LD_PRELOAD"; echo "DIR=$COMMSCOPE_DIR"; echo "X=$COMMSCOPE_X"; exit 3'
    # --mpi: a shell is no MPI program, so only the option makes it preload both libraries.
    p = run(["run", "-o", rd, "--no-analyze", "--mpi", "--", "sh", "-c", script],
            env=dict(env, COMMSCOPE_X="y z", LD_PRELOAD="/old/lib.so"))
    check(p.returncode == 3, "exit status 3 propagated: %d %r" % (p.returncode, p.stderr))
    want_pre = "%s/libcommscope_mpi.so:%s/libcommscope.so:/old/lib.so" % (libdir, libdir)
    check("PRE=" + want_pre + "\n" in p.stdout, "LD_PRELOAD prepended: %r" % p.stdout)
    check("DIR=" + os.path.realpath(rd) + "\n" in p.stdout, "COMMSCOPE_DIR absolute: %r" % p.stdout)
    check("X=y z\n" in p.stdout, "COMMSCOPE_X inherited: %r" % p.stdout)
    kv = read_kv(os.path.join(rd, "commscope-run.txt"))
    keys = [k for k, _ in kv]
    d = dict(kv)
    for k in ("version", "start", "host", "cwd", "run_dir", "libdir", "command", "exec", "end",
              "exit_status"):
        check(k in d, "run file has %s: %r" % (k, keys))
    check(d.get("exit_status") == "3", "run file exit_status %r" % d.get("exit_status"))
    check(keys[-1] == "exit_status", "exit status last (no analysis): %r" % keys[-3:])
    envs = [v for k, v in kv if k == "env"]
    check("LD_PRELOAD=" + want_pre in envs, "run file LD_PRELOAD: %r" % envs)
    check("COMMSCOPE_X=y z" in envs and "COMMSCOPE_DIR=" + os.path.realpath(rd) in envs,
          "run file COMMSCOPE_*: %r" % envs)
    check(d.get("exec", "").startswith("sh -c '"), "exec quoted: %r" % d.get("exec"))

    # The run directory is refused once it has content; an empty one is accepted.
    p = run(["run", "-o", rd, "--", "true"], env=env)
    check(p.returncode == 2 and rd in p.stderr and "not empty" in p.stderr, "refused %r" % (p,))
    empty = os.path.join(tmp, "empty")
    os.mkdir(empty)
    p = run(["run", "-o", empty, "--no-analyze", "true"], env=env)
    check(p.returncode == 0, "empty run directory accepted: %r" % (p,))
    afile = os.path.join(tmp, "afile")
    open(afile, "w").close()
    p = run(["run", "-o", afile, "--", "true"], env=env)
    check(p.returncode == 2 and "not a directory" in p.stderr, "file as run dir %r" % (p,))

    # Default run directory name, in the working directory.
    cwd = os.path.join(tmp, "cwd")
    os.mkdir(cwd)
    p = run(["run", "--no-analyze", "--quiet", "true"], env=env, cwd=cwd)
    made = os.listdir(cwd)
    check(p.returncode == 0 and len(made) == 1 and made[0].startswith("commscope-")
          and len(made[0]) == len("commscope-YYYYmmdd-HHMMSS"), "default dir %r %r" % (made, p))
    check(p.stderr == "", "--quiet is quiet: %r" % p.stderr)

    # Program not found / not executable.
    p = run(["run", "-o", os.path.join(tmp, "r127"), "--", "no-such-program-xyz"], env=env)
    check(p.returncode == 127 and "no-such-program-xyz" in p.stderr, "not found %r" % (p,))
    noexec = os.path.join(tmp, "noexec")
    with open(noexec, "w") as f:
        f.write("#!/bin/sh\n")
    p = run(["run", "-o", os.path.join(tmp, "r126"), "--", noexec], env=env)
    check(p.returncode == 126, "not executable: %r" % (p,))

    # Killed by a signal: 128 + N.
    p = run(["run", "-o", os.path.join(tmp, "rsig"), "--no-analyze", "--", "sh", "-c",
             "kill -KILL $$"], env=env)
    check(p.returncode == 128 + 9, "SIGKILL -> 137: %d" % p.returncode)
    kv = dict(read_kv(os.path.join(tmp, "rsig", "commscope-run.txt")))
    check(kv.get("exit_status") == "137" and kv.get("exit_signal", "").startswith("9"),
          "run file records the signal: %r" % kv)

    # Open MPI launchers get -x for LD_PRELOAD, COMMSCOPE_DIR and every other COMMSCOPE_*,
    # right after the launcher name.  A stand-in mpirun prints its arguments.
    bindir = os.path.join(tmp, "bin")
    os.mkdir(bindir)
    for name in ("mpirun", "srun"):
        path = os.path.join(bindir, name)
        with open(path, "w") as f:
            f.write('#!/bin/sh\nfor a in "$@"; do echo "ARG $a"; done\n')
        os.chmod(path, os.stat(path).st_mode | stat.S_IEXEC)
    p = run(["run", "-o", os.path.join(tmp, "rmpi"), "--no-analyze", "--",
             os.path.join(bindir, "mpirun"), "-np", "2", "prog", "-x"],
            env=dict(env, COMMSCOPE_MAX_MB="5", COMMSCOPE_B="1"))
    args = [l[4:] for l in p.stdout.splitlines() if l.startswith("ARG ")]
    want = ["-x", "LD_PRELOAD", "-x", "COMMSCOPE_DIR", "-x", "COMMSCOPE_B", "-x",
            "COMMSCOPE_LIBDIR", "-x", "COMMSCOPE_MAX_MB", "-x", "NVTX_INJECTION64_PATH", "-np",
            "2", "prog", "-x"]
    check(args == want, "mpirun arguments %r" % args)
    # NVTX: commscope run makes libcommscope.so the injection library, unless one was set.
    kv = dict(read_kv(os.path.join(tmp, "rmpi", "commscope-run.txt")))
    check(kv.get("nvtx", "").startswith("NVTX_INJECTION64_PATH=") and
          kv.get("nvtx", "").split("=", 1)[1].split(" ")[0].endswith("/libcommscope.so"),
          "run file: nvtx injection %r" % kv.get("nvtx"))
    run(["run", "-o", os.path.join(tmp, "rnsys"), "--no-analyze", "--",
         os.path.join(bindir, "srun"), "-n", "2", "prog"],
        env=dict(env, NVTX_INJECTION64_PATH="/opt/nsight/libToolsInjection64.so"))
    kv = dict(read_kv(os.path.join(tmp, "rnsys", "commscope-run.txt")))
    check("already set (/opt/nsight/libToolsInjection64.so)" in kv.get("nvtx", ""),
          "run file: a user's NVTX injection is kept and said: %r" % kv.get("nvtx"))
    p = run(["run", "-o", os.path.join(tmp, "rsrun"), "--no-analyze", "--",
             os.path.join(bindir, "srun"), "-n", "2", "prog"], env=env)
    args = [l[4:] for l in p.stdout.splitlines() if l.startswith("ARG ")]
    check(args == ["-n", "2", "prog"], "srun arguments untouched %r" % args)

    # SIGTERM to commscope reaches the program, whose status comes back.
    e = dict(os.environ, **env)
    e.pop("LD_PRELOAD", None)
    proc = subprocess.Popen([EXE, "run", "-o", os.path.join(tmp, "rterm"), "--no-analyze", "--",
                             "sh", "-c", 'trap "exit 42" TERM; echo ready; while :; do sleep 0.05; done'],
                            env=e, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    line = proc.stdout.readline()
    check(line.strip() == "ready", "program started: %r" % line)
    proc.send_signal(signal.SIGTERM)
    try:
        rc = proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        proc.kill()
        rc = None
    check(rc == 42, "SIGTERM forwarded, program's status 42 returned: %r" % rc)

    print("%d failures" % len(failures))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
