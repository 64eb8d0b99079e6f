#!/usr/bin/env python3
"""compile_time.py — where a cold `precc build` spends its time (issue 28 §6):
for every recipe (or --recipes) x one model (default the 70B plan) x the
targets (default sm_90a,sm_89), one cold build (--no-cache, --time) under
/usr/bin/time, and from its `time:` lines and its PTX:

  table 1, per recipe: kernels per target, LLVM runs, ptxas runs, CPU s of
  each phase (recipe + model + plan, lower + passes, LLVM, ptxas,
  manifest + C), precc + ptxas CPU (user + sys), wall, the load average;
  the kernels phase's schedule on --jobs workers: its CPU / workers (the
  bound), a list schedule of the measured jobs in the build's own order
  (rank, job_cost's estimate) and in the order of the measured costs (LPT),
  the phase's wall; and the idle projection: CPU / workers + the serial
  phases' CPU.
  table 2, per recipe and kernel family (the codegen shape): jobs, LLVM and
  ptxas CPU s, the largest job, job_cost's estimate against the measure.
  table 3, duplicates per recipe: jobs that took another target's PTX (LLVM
  once), the PTX of a kernel at other columns (codegen's has_cols: one PTX
  for every K), or another job's cubin (ptxas once), and the kernels whose IR
  (--emit=ir) differs from another's of the same target only in its
  shapes (K, N: the dims fixed at build time) with the CPU they cost: what
  shape-generic kernels (K and N as runtime arguments) would save.

CPU seconds are the figure to compare on a shared machine; the wall there
says more about the other processes. Not a test: nothing is asserted.

  python3 bench/compile_time.py [--precc build/precc] [--model M]
      [--targets sm_90a,sm_89] [--recipes 'nvfp4 rowwise'] [--jobs N]
      [--keep DIR] [--from DIR]
"""
import argparse
import collections
import glob
import os
import re
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

JOB = re.compile(r"^time: (k_[0-9a-f]+) (\S+)\s+(\S+)\s+LLVM\s+([\d.]+) ms(?:\s+ptxas\s+([\d.]+) ms)?"
                 r"\s+(\S+)\s+cpu: LLVM ([\d.]+) ptxas ([\d.]+)(.*)$")


def parse(log):
    jobs, phases, kernels = [], {}, {}
    for line in log.splitlines():
        m = JOB.match(line)
        if m:
            rest = m.group(9)
            po = re.search(r"\(the PTX of (k_\w+) for", rest)
            co = re.search(r"\(the PTX of (k_\w+): its cubin\)", rest)
            sc = re.search(r"\[#(\d+) est (\d+) ms, worker (\d+), ([\d.]+)-([\d.]+) ms\]", rest)
            jobs.append(dict(name=m.group(1), sm=m.group(2), shape=m.group(3), func=m.group(6),
                             llvm=float(m.group(7)), ptxas=float(m.group(8)),
                             ptx_of=po.group(1) if po else None, cubin_of=co.group(1) if co else None,
                             cols=", its columns at run time)" in rest,
                             rank=int(sc.group(1)) if sc else None, est=int(sc.group(2)) if sc else 0,
                             worker=int(sc.group(3)) if sc else 0,
                             t0=float(sc.group(4)) if sc else 0, t1=float(sc.group(5)) if sc else 0))
            continue
        m = re.match(r"^time: cpu: recipe\+model\+plan ([\d.]+) ms, lower\+passes ([\d.]+) ms, LLVM ([\d.]+)"
                     r" ms, ptxas ([\d.]+) ms, manifest\+C ([\d.]+) ms", line)
        if m:
            phases = dict(zip(("front", "passes", "llvm", "ptxas", "write"), map(float, m.groups())))
        m = re.match(r"^time: kernels phase: ([\d.]+) ms of LLVM \+ ptxas CPU in ([\d.]+) ms of wall on (\d+)", line)
        if m:
            phases["kwall"] = float(m.group(2))
            phases["nth"] = int(m.group(3))
        m = re.match(r"^time: (sm_\w+): (\d+) kernels", line)
        if m:
            kernels[m.group(1)] = int(m.group(2))
    return jobs, phases, kernels


def schedule(jobs, order, nw):
    """Makespan (ms) of jobs taken in `order` by nw workers, each job LLVM
    then ptxas on its worker; the first job of a group (same kernel for
    several targets; the same PTX of a target) runs the shared step, the
    others wait for it, as driver/build.c's llvm_share and ptxas_share do."""
    by = {j["name"]: i for i, j in enumerate(jobs)}
    lg = [by.get(j["ptx_of"], i) for i, j in enumerate(jobs)]
    cg = [by.get(j["cubin_of"], i) for i, j in enumerate(jobs)]
    ldone, pdone, free = {}, {}, [0.0] * nw
    for k in order:
        w = min(range(nw), key=lambda i: free[i])
        t = free[w]
        g = lg[k]
        if g in ldone:
            s = max(t, ldone[g])
        else:
            s = ldone[g] = t + jobs[g]["llvm"]
        c = cg[k]
        if c in pdone:
            e = max(s, pdone[c])
        else:
            e = pdone[c] = s + jobs[c]["ptxas"]
        free[w] = e
    return max(free) if free else 0.0


def own_cpu(j):
    return (j["llvm"] if not j["ptx_of"] else 0) + (j["ptxas"] if not j["cubin_of"] else 0)


def ir_texts(precc, recipe, model, targets):
    """{(target, job name): the kernel's IR (--emit=ir) with its shapes
    masked: the integers of its types' dims and of the header's hash,
    calls, grid, smem and m_align, its name's hash, its comments}."""
    out = {}
    for sm in targets.split(","):
        p = subprocess.run([precc, "build", recipe, "--model", model, "--emit=ir", "--target", sm],
                           capture_output=True, text=True)
        for block in re.split(r"^(?=# k_[0-9a-f]{16}:)", p.stdout, flags=re.M):
            m = re.match(r"# (k_[0-9a-f]{16}):", block)
            if not m:
                continue
            body = [l for l in block.splitlines() if not l.lstrip().startswith("#")]
            text = "\n".join(body)
            text = re.sub(r"\b(hash|calls|grid|smem|m_align)=\S+", r"\1=#", text)
            text = re.sub(r"\.[0-9a-f]{8}\b", ".#", text)
            text = re.sub(r"\[[^\]]*\]", lambda t: re.sub(r"\d+", "#", t.group(0)), text)
            out[(sm, m.group(1))] = text
    return out


def shape_dups(irs, jobs):
    """Kernels of a target whose IR equals another's but for shapes (the
    dims K and N, fixed at build time; M is the run's already):
    [(sm, shape, members, CPU ms of all but the largest)]."""
    groups = collections.defaultdict(list)
    for j in jobs:
        text = irs.get((j["sm"], j["name"]))
        if text is not None:
            groups[(j["sm"], text)].append(j)
    rows = []
    for (sm, _), g in groups.items():
        if len(g) > 1:
            g = sorted(g, key=own_cpu, reverse=True)
            rows.append((sm, g[0]["shape"], len(g), sum(own_cpu(x) for x in g[1:])))
    return rows


def reread(precc, recipe, model, targets, logdir):
    """A build kept by --keep DIR, its table rows again (--from DIR)."""
    log = open(os.path.join(logdir, os.path.basename(recipe)[:-4] + ".log")).read()
    m = re.search(r"^TIME ([\d.]+) ([\d.]+) ([\d.]+)$", log, re.M)
    lm = re.search(r"^LOAD (.*)$", log, re.M)
    jobs, phases, kernels = parse(log)
    return dict(rc=0, log=log, wall=float(m.group(1)), cpu=float(m.group(2)) + float(m.group(3)),
                load=lm.group(1).split() if lm else ["?"], jobs=jobs, phases=phases, kernels=kernels,
                dups=shape_dups(ir_texts(precc, recipe, model, targets), jobs))


def run(precc, recipe, model, targets, jobs_n, keep):
    tmp = tempfile.mkdtemp(prefix="precc-ct-")
    out = os.path.join(keep or tmp, os.path.basename(recipe)[:-4])
    shutil.rmtree(out, ignore_errors=True)
    load = open("/proc/loadavg").read().split()[:3]
    cmd = ["/usr/bin/time", "-f", "TIME %e %U %S", precc, "build", recipe, "--model", model,
           "--target", targets, "--no-cache", "--time", "-o", out]
    if jobs_n:
        cmd += ["--jobs", str(jobs_n)]
    env = dict(os.environ, PRECC_CACHE_DIR=os.path.join(tmp, "cache"))
    p = subprocess.run(cmd, capture_output=True, text=True, env=env)
    log = p.stdout + p.stderr
    m = re.search(r"^TIME ([\d.]+) ([\d.]+) ([\d.]+)$", log, re.M)
    wall, cpu = (float(m.group(1)), float(m.group(2)) + float(m.group(3))) if m else (0.0, 0.0)
    jobs, phases, kernels = parse(log)
    if keep:
        open(out + ".log", "w").write(log + "LOAD %s\n" % " ".join(load))
    dups = shape_dups(ir_texts(precc, recipe, model, targets), jobs)
    if not keep:
        shutil.rmtree(tmp, ignore_errors=True)
    return dict(rc=p.returncode, log=log, wall=wall, cpu=cpu, load=load, jobs=jobs, phases=phases,
                kernels=kernels, dups=dups)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--precc", default=os.path.join(ROOT, "build/precc"))
    ap.add_argument("--model", default=os.path.join(ROOT, "tests/lit/Inputs/model_llama3_70b.json"))
    ap.add_argument("--targets", default="sm_90a,sm_89")
    ap.add_argument("--recipes", default="")
    ap.add_argument("--jobs", type=int, default=0)
    ap.add_argument("--keep", default="", help="leave the builds and their logs under this directory")
    ap.add_argument("--from", dest="logs", default="",
                    help="no builds: the tables of the logs --keep left in this directory")
    a = ap.parse_args()
    if not os.access("/usr/bin/time", os.X_OK):
        sys.exit("compile_time.py: needs /usr/bin/time")
    recipes = ([os.path.join(ROOT, "recipes", r + ".lua") for r in a.recipes.split()] if a.recipes
               else sorted(glob.glob(os.path.join(ROOT, "recipes/*.lua"))))
    nw = a.jobs or len(os.sched_getaffinity(0))
    res = {}
    for r in recipes:
        res[os.path.basename(r)[:-4]] = x = (reread(a.precc, r, a.model, a.targets, a.logs) if a.logs
                                             else run(a.precc, r, a.model, a.targets, a.jobs, a.keep))
        if x["rc"]:
            print("%s: precc build failed:\n%s" % (r, x["log"][-2000:]), file=sys.stderr)
    print("model %s, targets %s, %d workers, cold (--no-cache)\n"
          % (os.path.basename(a.model), a.targets, nw))
    print("| recipe | kernels | LLVM runs | ptxas runs | front + passes + write CPU s | LLVM CPU s "
          "| ptxas CPU s | CPU s (user + sys) | kernels CPU / %d | schedule, build's order | schedule, LPT "
          "| kernels wall | wall | load | idle projection |" % nw)
    print("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- | ---: |")
    for name, x in res.items():
        js, ph = x["jobs"], x["phases"]
        if not js or not ph:
            print("| %s | failed | | | | | | | | | | | | | |" % name)
            continue
        ser = (ph["front"] + ph["passes"] + ph["write"]) / 1e3
        kcpu = sum(own_cpu(j) for j in js) / 1e3
        own = sorted(range(len(js)), key=lambda k: js[k]["rank"] if js[k]["rank"] is not None else k)
        lpt = sorted(range(len(js)), key=lambda k: (-own_cpu(js[k]), k))
        print("| %s | %s | %d | %d | %.2f | %.2f | %.2f | %.2f | %.2f | %.2f | %.2f | %.2f | %.2f | %s | **%.2f** |" % (
            name, " + ".join("%d" % v for v in x["kernels"].values()),
            sum(1 for j in js if not j["ptx_of"]), sum(1 for j in js if j["ptxas"] > 0),
            ser, ph["llvm"] / 1e3, ph["ptxas"] / 1e3, x["cpu"], kcpu / nw,
            schedule(js, own, nw) / 1e3, schedule(js, lpt, nw) / 1e3, ph.get("kwall", 0) / 1e3,
            x["wall"], " / ".join(x["load"]), x["cpu"] / nw + ser))
    print("\n| recipe | family | jobs | LLVM CPU s | ptxas CPU s | largest job s | estimate s (job_cost) |")
    print("| --- | --- | ---: | ---: | ---: | ---: | ---: |")
    for name, x in res.items():
        fam = collections.OrderedDict()
        for j in sorted(x["jobs"], key=lambda j: -own_cpu(j)):
            f = fam.setdefault(j["shape"], [0, 0.0, 0.0, 0.0, 0])
            f[0] += 1
            f[1] += j["llvm"] if not j["ptx_of"] else 0
            f[2] += j["ptxas"] if not j["cubin_of"] else 0
            f[3] = max(f[3], own_cpu(j))
            f[4] += j["est"]
        for s, f in fam.items():
            print("| %s | %s | %d | %.2f | %.2f | %.2f | %.2f |" % (name, s, f[0], f[1] / 1e3, f[2] / 1e3,
                                                                   f[3] / 1e3, f[4] / 1e3))
    print("\n| recipe | LLVM once for 2 targets | LLVM once for other columns | ptxas once (same PTX) "
          "| the same IR but for shapes (K, N): groups, kernels, CPU s of all but the largest |")
    print("| --- | ---: | ---: | ---: | --- |")
    for name, x in res.items():
        js = x["jobs"]
        d = x["dups"]
        fams = collections.Counter()
        for sm, s, n, c in d:
            fams[(sm, s)] += n
        print("| %s | %d | %d | %d | %d groups, %d kernels, %.2f s (%s) |" % (
            name, sum(1 for j in js if j["ptx_of"] and not j["cols"]), sum(1 for j in js if j["cols"]),
            sum(1 for j in js if j["cubin_of"]), len(d),
            sum(n for _, _, n, _ in d), sum(c for *_, c in d) / 1e3,
            ", ".join("%s %s %d" % (sm, s, n) for (sm, s), n in sorted(fams.items())) or "none"))


if __name__ == "__main__":
    main()
