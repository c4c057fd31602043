#!/usr/bin/env python3
"""Achieved FLOP/s and MFU (commscope analyze --flops-per-step ...) on real PyTorch profiler
traces, against numbers computed here from the same files (json module, exact decimals).

Usage: test_flops.py SHARED_DATA; CS_BIN names the build's bin/ folder.  Traces from
SHARED_DATA/kineto (README.md there); exit 77 when they are absent.

DLRM, 8 ranks on V100-SXM2-32GB, one ProfilerStep each: the mean step time is the mean over
the ranks of the ProfilerStep's duration; achieved = F / step, per GPU = achieved / 8 (the world
size in distributedInfo), MFU = per GPU / 125 TFLOP/s (V100 SXM2's fp16 tensor peak, the default
on a GPU without bf16; the GPU named by deviceProperties for the device of the rank's kernels).
Also: F = 6 N T, tokens/s and samples/s, --peak-flops and --gpu overriding the table, the
table's rows by device name, a precision a GPU lacks (no MFU, a note), and usage errors.
"""
import glob
import json
import os
import subprocess
import sys
import tempfile
from decimal import Decimal

BIN = os.environ.get("CS_BIN", "")
failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what, file=sys.stderr)
    return cond


def near(a, b, what, rel=1e-8):
    """JSON numbers are %.9g: equal within the ninth digit."""
    return check(a is not None and abs(a - b) <= rel * abs(b), "%s: %r vs %r" % (what, a, b))


def analyze(args, tmp, name):
    js = os.path.join(tmp, name + ".json")
    ht = os.path.join(tmp, name + ".html")
    p = subprocess.run([os.path.join(BIN, "commscope"), "analyze", "--from", "kineto"] + args +
                       ["--json", js, "--html", ht], capture_output=True, text=True, timeout=300)
    if not check(p.returncode in (0, 1) and os.path.exists(js),
                 "%s: analyze %d %s" % (name, p.returncode, p.stderr[-500:])):
        return None, "", ""
    with open(js) as f, open(ht) as g:
        return json.load(f), p.stdout, g.read()


def independent(files):
    """(mean ProfilerStep duration in s over the ranks, world size, device names used)."""
    durs, world, names = [], set(), set()
    for path in files:
        with open(path) as f:
            doc = json.load(f, parse_float=Decimal)
        world.add(int(doc["distributedInfo"]["world_size"]))
        steps = [Decimal(e["dur"]) for e in doc["traceEvents"]
                 if e.get("ph") == "X" and str(e.get("name", "")).startswith("ProfilerStep#")]
        check(len(steps) == 1, "%s: one ProfilerStep (%d)" % (path, len(steps)))
        durs += steps
        devs = {}
        for e in doc["traceEvents"]:
            if e.get("cat") == "kernel" and e.get("ph") == "X":
                d = int(e["args"]["device"])
                devs[d] = devs.get(d, 0) + 1
        used = max(devs, key=devs.get)
        names |= {p["name"] for p in doc["deviceProperties"] if int(p["id"]) == used}
    check(len(world) == 1, "one world size: %s" % world)
    return float(sum(durs) / len(durs) / Decimal(10**6)), world.pop(), names


def usage(tmp, args, words):
    p = subprocess.run([os.path.join(BIN, "commscope"), "analyze", "--from", "kineto",
                        os.path.join(tmp, "none.json")] + args,
                       capture_output=True, text=True, timeout=60)
    check(p.returncode == 2 and all(w in p.stderr for w in words),
          "usage %s: exit %d, %r" % (args, p.returncode, p.stderr))


def main():
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    dlrm = sorted(glob.glob(os.path.join(sys.argv[1], "kineto", "dlrm_8ranks", "*.json")))
    hta = os.path.join(sys.argv[1], "kineto", "hta", "nccl_parser_config_nccl_data.json.gz")
    if len(dlrm) != 8 or not os.path.exists(hta):
        print("skipped: the shared Kineto traces are absent", file=sys.stderr)
        return 77
    step, world, names = independent(dlrm)
    check(world == 8 and names == {"Tesla V100-SXM2-32GB"}, "dlrm: %d %s" % (world, names))
    with tempfile.TemporaryDirectory() as tmp:
        F = 1.2e12
        rep, text, page = analyze([os.path.dirname(dlrm[0]), "--flops-per-step", "1.2T",
                                   "--samples-per-step", "2048"], tmp, "dlrm")
        if rep:
            fl = rep["flops"]
            near(fl["flops_per_step"], F, "flops_per_step")
            near(fl["step_s"], step, "step_s")
            check(fl["gpus"] == 8, "gpus %r" % fl["gpus"])
            near(fl["achieved_flops"], F / step, "achieved")
            near(fl["achieved_flops_per_gpu"], F / step / 8, "per GPU")
            check(fl["gpu"] == "Tesla V100-SXM2-32GB" and fl["gpu_entry"] == "V100 SXM2" and
                  fl["precision"] == "fp16", "gpu %r %r %r" % (fl["gpu"], fl["gpu_entry"],
                                                             fl["precision"]))
            near(fl["peak_flops_per_gpu"], 125e12, "peak")
            near(fl["mfu"], F / step / 8 / 125e12, "mfu")
            near(fl["samples_per_s"], 2048 / step, "samples/s")
            check(fl["tokens_per_s"] is None and fl["note"] is None, "tokens, note %r" % fl)
            check(all(r["gpu"] == "Tesla V100-SXM2-32GB" for r in rep["kineto"]["ranks"]),
                  "kineto ranks' gpu")
            mfu = "%.2f %%" % (100 * F / step / 8 / 125e12)
            check("@--- Model FLOPs" in text and "mfu " + mfu in text, "text: " + mfu)
            check('<section id="flops">' in page and mfu in page and
                  "table: V100 SXM2, fp16 tensor, dense" in page, "html: " + mfu)
        rep, text, _ = analyze([os.path.dirname(dlrm[0]), "-q"], tmp, "plain")
        check(rep is not None and "flops" not in rep and "Model FLOPs" not in text,
              "no section unless asked")
        # F = 6 N T; tokens/s; a precision V100 does not have
        rep, _, _ = analyze(dlrm + ["--params", "1.5M", "--tokens-per-step", "65536",
                                    "--precision", "tf32"], tmp, "tf32")
        if rep:
            fl = rep["flops"]
            near(fl["flops_per_step"], 6 * 1.5e6 * 65536, "6NT")
            check(fl["flops_from"] == "6 x params x tokens per step", "from %r" % fl["flops_from"])
            near(fl["tokens_per_s"], 65536 / step, "tokens/s")
            check(fl["mfu"] is None and fl["peak_flops_per_gpu"] is None and
                  "V100 SXM2 has no tf32 peak" in (fl["note"] or ""), "tf32: %r" % fl)
        # --peak-flops overrides the table; --gpu names another model
        rep, _, _ = analyze(dlrm + ["--flops-per-step", "1.2e12", "--peak-flops", "100T"], tmp,
                            "peak")
        if rep:
            near(rep["flops"]["mfu"], F / step / 8 / 1e14, "--peak-flops mfu")
            check(rep["flops"]["peak_from"] == "--peak-flops", "peak_from")
        models = {"V100 SXM2"}
        for model, prec, entry, peak in (("NVIDIA H100 80GB HBM3", None, "H100 SXM", 989.5e12),
                                         ("NVIDIA H100 PCIe", "tf32", "H100 PCIe", 378e12),
                                         ("NVIDIA H100 NVL", "fp32", "H100 NVL", 60e12),
                                         ("NVIDIA H200", "bf16", "H200 SXM", 989.5e12),
                                         ("NVIDIA H200 NVL", None, "H200 NVL", 835.5e12),
                                         ("NVIDIA B200", "fp16", "B200", 2250e12),
                                         ("NVIDIA A100-SXM4-80GB", "tf32", "A100", 156e12),
                                         ("Tesla V100-PCIE-16GB", "fp32", "V100 PCIe", 14e12),
                                         ("Tesla V100S-PCIE-32GB", None, "V100S PCIe", 130e12)):
            args = dlrm + ["--flops-per-step", "1.2T", "--gpu", model, "-q"]
            rep, _, _ = analyze(args + (["--precision", prec] if prec else []), tmp, "gpu")
            models.add(entry)
            if rep:
                fl = rep["flops"]
                check(fl["gpu"] == model and fl["gpu_entry"] == entry, "%s: %r" % (model, fl))
                near(fl["peak_flops_per_gpu"], peak, model + " peak")
                near(fl["mfu"], F / step / 8 / peak, model + " mfu")
        rep, _, _ = analyze(dlrm + ["--flops-per-step", "1T", "--gpu", "RTX 4090", "-q"], tmp,
                            "unknown")
        if rep:
            check(rep["flops"]["mfu"] is None and rep["flops"]["achieved_flops"] is not None and
                  "no row for 'RTX 4090'" in rep["flops"]["note"], "unknown gpu %r" % rep["flops"])
        # the A100 trace (A100-PG509-200): bf16 by default, its own step mean
        rep, _, _ = analyze([hta, "--flops-per-step", "100T", "-q"], tmp, "hta")
        if rep:
            fl = rep["flops"]
            models.add(fl["gpu_entry"])
            check(fl["gpu_entry"] == "A100" and fl["precision"] == "bf16" and fl["gpus"] == 2,
                  "hta %r" % fl)
            near(fl["mfu"], 1e14 / rep["steps"]["mean_s"] / 2 / 312e12, "hta mfu")
        usage(tmp, ["--params", "7B"], ["--params needs --tokens-per-step"])
        usage(tmp, ["--params", "7B", "--tokens-per-step", "1M", "--flops-per-step", "1P"],
              ["not both"])
        usage(tmp, ["--gpu", "H100"], ["need --flops-per-step"])
        usage(tmp, ["--flops-per-step", "7X"], ["'7X'", "positive number"])
        usage(tmp, ["--flops-per-step", "-1"], ["'-1'", "positive number"])
        usage(tmp, ["--flops-per-step", "1P", "--precision", "int8"], ["'int8'", "bf16"])
    if failures:
        print("%d failure(s)" % len(failures), file=sys.stderr)
        return 1
    print("flops: DLRM step %.6f s, MFU checked on %d rows of the peak table" % (step, len(models)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
