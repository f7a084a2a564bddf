#!/usr/bin/env python3
"""Summary of run-cluster-bench.sh's results, as Markdown tables.

For every configuration (NAME.meta, NAME.txt with the harness's lines and mpiar-bench's output,
NAME.csv, NAME.latency.txt) it gives:
  - the link rate, the load average before and after, and the calibration (the slowest
    ping-pong or exchange rate in % of the link, the 4-byte one-way ping-pong latency);
  - the bus bandwidth at >= 16 MiB in % of the link rate (median over those sizes) of the best
    algorithm, of `auto` and of MPI_Allreduce;
  - the 4-byte latency of `auto`, the best algorithm and MPI_Allreduce (mpiar-bench, between
    barriers) and back to back (mpiar-latency), against the one-way ping-pong;
  - `auto` against the best algorithm at every size: the worst ratio, and every size where
    auto is more than 5 % slower, with what it picked and what won;
  - the link utilisation at >= 16 MiB of every algorithm: the bytes each node must move across
    its link at the least, 2(N-1)/N n for N nodes, over the time, over the link rate; and
    hier_ring against the flat ring where both ran;
  - with --sim MPIAR_SIM: the two-level model's time of every algorithm at >= 1 MiB (mpiar-sim
    on the same nodes, ranks and placement, with the calibration's alpha and beta between nodes
    and the library's built-in parameters inside a node) against the measured time.

Usage: report.py OUT_DIR [--sim PATH_TO_MPIAR_SIM]
"""
import json
import subprocess
import csv
import glob
import os
import re
import statistics
import sys

LARGE = 16 << 20
MODEL_MIN = 1 << 20
TOLERANCE = 1.05
MODEL_TOLERANCE = 0.15
# Inside a node: the library's built-in parameters (src/core/select.c).
INTRA = {"alpha": 1.0e-6, "beta": 1.0 / 9.4e9, "gamma": 1.0 / 16.0e9}


def rate_bits(text):
    m = re.fullmatch(r"(\d+)(kbit|mbit|gbit|bit)?", text.lower())
    scale = {"kbit": 1e3, "mbit": 1e6, "gbit": 1e9, "bit": 1, None: 1}[m.group(2)]
    return int(m.group(1)) * scale


def size_name(b):
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if b >= 1 << shift and b % (1 << shift) == 0:
            return f"{b >> shift} {unit}"
    return f"{b} B"


def read_meta(path):
    meta = {}
    with open(path) as f:
        for line in f:
            key, _, value = line.strip().partition("=")
            meta[key] = value
    return meta


def read_harness(path):
    """Load averages and calibration figures from the harness's lines."""
    h = {"load": {}, "calib_pct": None, "calib_verdict": "not run", "pingpong_us": None,
         "alpha_us": None, "beta_gbit": None}
    with open(path) as f:
        for line in f:
            m = re.search(r"load average (\S+) (\S+) (\S+) on (\d+) cores \((\w+)\)", line)
            if m:
                h["load"][m.group(5)] = f"{m.group(1)} {m.group(2)} {m.group(3)}"
                h["cores"] = int(m.group(4))
            m = re.search(r"4-byte ping-pong, one way \(median of \d+\): ([\d.]+) us", line)
            if m:
                h["pingpong_us"] = float(m.group(1))
            m = re.search(r"alpha (-?[\d.]+) us, beta \S+ ns/B \(([\d.e+-]+) Gbit/s\)", line)
            if m:
                h["alpha_us"], h["beta_gbit"] = float(m.group(1)), float(m.group(2))
            m = re.search(r"calibration: (PASS|FAIL): the slowest size and pattern reached "
                          r"([\d.]+) %", line)
            if m:
                h["calib_verdict"], h["calib_pct"] = m.group(1), float(m.group(2))
    return h


def read_latency(path):
    lat = {}
    if not os.path.exists(path):
        return lat
    with open(path) as f:
        for line in f:
            m = re.match(r"(mpiar_allreduce \(wait policy|mpiar_allreduce, spinning|"
                         r"persistent|MPI_Allreduce)\S*.*?([\d.]+) us", line)
            if m:
                lat[{"mpiar_allreduce (wait policy": "auto", "mpiar_allreduce, spinning": "spin",
                     "persistent": "persistent", "MPI_Allreduce": "mpi"}[m.group(1)]] = \
                    float(m.group(2))
    return lat


def read_bench(path):
    """{bytes: {algorithm: (time_us, busbw_GBps, selected)}}, in size order."""
    rows = {}
    with open(path) as f:
        for r in csv.DictReader(f):
            if not r["time_us_median"]:
                continue
            rows.setdefault(int(r["bytes"]), {})[r["algorithm"]] = (
                float(r["time_us_median"]), float(r["busbw_GBps"] or 0), r["selected"])
    return dict(sorted(rows.items()))


def best_of(algs):
    """The fastest registry algorithm (not auto, not mpi) at one size: (name, time, busbw)."""
    cands = [(t, name, bw) for name, (t, bw, _) in algs.items()
             if name not in ("auto", "mpi") and not name.endswith("/repro")]
    t, name, bw = min(cands)
    return name, t, bw


def summarize(out):
    configs = []
    for meta_path in sorted(glob.glob(os.path.join(out, "*.meta")), key=os.path.getmtime):
        meta = read_meta(meta_path)
        base = meta_path[:-len(".meta")]
        if not os.path.exists(base + ".csv"):
            continue
        configs.append((meta, read_harness(base + ".txt"), read_bench(base + ".csv"),
                        read_latency(base + ".latency.txt")))
    if not configs:
        sys.exit(f"report.py: no results in {out}")

    print("### Bandwidth: busbw at >= 16 MiB in % of the link rate (median over those sizes)\n")
    print("| nodes x ranks, placement | link | load before / after | calibration: slowest "
          "ping-pong or exchange | best algorithm | best busbw | `auto` | `MPI_Allreduce` |")
    print("|---|---|---|---|---|---|---|---|")
    for meta, h, bench, _ in configs:
        link = rate_bits(meta["rate"])
        large = [b for b in bench if b >= LARGE]
        pct = lambda bw: 100 * bw * 8e9 / link
        if large:
            bests = [best_of(bench[b]) for b in large]
            winner = statistics.mode(name for name, _, _ in bests)
            best = statistics.median(pct(bw) for _, _, bw in bests)
            auto = statistics.median(pct(bench[b]["auto"][1]) for b in large if "auto" in bench[b])
            mpi = [pct(bench[b]["mpi"][1]) for b in large if "mpi" in bench[b]]
            cells = [winner, f"{best:.1f} %", f"{auto:.1f} %",
                     f"{statistics.median(mpi):.1f} %" if mpi else "-"]
        else:
            cells = ["-"] * 4
        calib = (f"{h['calib_pct']:.1f} % ({h['calib_verdict']})" if h["calib_pct"] is not None
                 else h["calib_verdict"])
        print(f"| {meta['nodes']} x {meta['ranks_per_node']}, {meta['place']} | {meta['rate']} | "
              f"{h['load'].get('before', '?')} / {h['load'].get('after', '?')} | {calib} | "
              + " | ".join(cells) + " |")

    print("\n### 4-byte latency (us)\n")
    print("| nodes x ranks, placement | ping-pong, one way | `auto` | best algorithm | "
          "`MPI_Allreduce` | `auto` / ping-pong | back to back: `auto` | back to back: "
          "`MPI_Allreduce` |")
    print("|---|---|---|---|---|---|---|---|")
    for meta, h, bench, lat in configs:
        first = bench[min(bench)]
        name, t, _ = best_of(first)
        pp = h["pingpong_us"]
        auto = first.get("auto", (None,))[0]
        mpi = first.get("mpi", (None,))[0]
        fmt = lambda v: f"{v:.1f}" if v is not None else "-"
        ratio = f"{auto / pp:.2f}x" if auto and pp else "-"
        print(f"| {meta['nodes']} x {meta['ranks_per_node']}, {meta['place']} | {fmt(pp)} | "
              f"{fmt(auto)} | {fmt(t)} ({name}) | {fmt(mpi)} | {ratio} | "
              f"{fmt(lat.get('auto'))} | {fmt(lat.get('mpi'))} |")

    print(f"\n### `auto` against the best algorithm at every size (target: within "
          f"{round((TOLERANCE - 1) * 100)} %)\n")
    print("| nodes x ranks, placement | worst auto / best | sizes more than 5 % slower "
          "(auto's pick / the best, ratio) |")
    print("|---|---|---|")
    for meta, _, bench, _ in configs:
        worst, misses = 0.0, []
        for b, algs in bench.items():
            if "auto" not in algs:
                continue
            name, t, _ = best_of(algs)
            ratio = algs["auto"][0] / t
            worst = max(worst, ratio)
            if ratio > TOLERANCE:
                misses.append(f"{size_name(b)}: {algs['auto'][2]} / {name}, {ratio:.2f}x")
        print(f"| {meta['nodes']} x {meta['ranks_per_node']}, {meta['place']} | {worst:.2f}x | "
              + ("; ".join(misses) if misses else "none") + " |")

    print("\n### Calibration of each configuration's links (mpiar-pingpong, nodes 0 and 1)\n")
    print("| nodes x ranks, placement | link | fit: alpha | fit: rate | verdict |")
    print("|---|---|---|---|---|")
    for meta, h, _, _ in configs:
        a = f"{h['alpha_us']:.1f} us" if h["alpha_us"] is not None else "-"
        r = f"{h['beta_gbit']:.3g} Gbit/s" if h["beta_gbit"] is not None else "-"
        print(f"| {meta['nodes']} x {meta['ranks_per_node']}, {meta['place']} | {meta['rate']} | "
              f"{a} | {r} | {h['calib_verdict']} |")


    utilisation(configs)
    if SIM:
        model(configs)


def utilisation(configs):
    print("\n### Link utilisation at >= 16 MiB: 2(N-1)/N n per node over the time, in % of the "
          "link (median over those sizes)\n")
    print("| nodes x ranks, placement | best hierarchical | best flat | ring | `auto` | "
          "`MPI_Allreduce` | hier_ring / ring (speed) |")
    print("|---|---|---|---|---|---|---|")
    for meta, _, bench, _ in configs:
        n_nodes = int(meta["nodes"])
        link = rate_bits(meta["rate"])
        large = [b for b in bench if b >= LARGE]
        if not large or n_nodes < 2:
            continue

        def util(b, t_us):
            return 100 * 2 * (n_nodes - 1) / n_nodes * b * 8 / (t_us * 1e-6) / link

        def med(names):
            per = []
            for b in large:
                ts = [bench[b][a][0] for a in bench[b] if a in names]
                if ts:
                    per.append((util(b, min(ts)), min(bench[b], key=lambda a: bench[b][a][0]
                                                       if a in names else float("inf"))))
            if not per:
                return "-"
            return f"{statistics.median(u for u, _ in per):.1f} % ({statistics.mode(a for _, a in per)})"

        names = set().union(*(bench[b].keys() for b in large))
        hier = {a for a in names if a.startswith("hier_") and not a.endswith("/repro")}
        flat = {a for a in names if a not in hier and a not in ("auto", "mpi")
                and not a.startswith("hier_") and not a.endswith("/repro")}
        speed = [bench[b]["ring"][0] / bench[b]["hier_ring"][0] for b in large
                 if "ring" in bench[b] and "hier_ring" in bench[b]]
        print(f"| {meta['nodes']} x {meta['ranks_per_node']}, {meta['place']} | {med(hier)} | "
              f"{med(flat)} | {med({'ring'})} | {med({'auto'})} | {med({'mpi'})} | "
              + (f"{statistics.median(speed):.2f}x" if speed else "-") + " |")


def simulate(meta, h, alg, nbytes):
    base, _, seg = alg.partition("/seg=")
    cmd = [SIM, "--algorithm", base, "--ranks",
           str(int(meta["nodes"]) * int(meta["ranks_per_node"])), "--bytes", str(nbytes),
           "--nodes", meta["nodes"], "--ppn", meta["ranks_per_node"], "--placement",
           "roundrobin" if meta["place"] == "cyclic" else "block",
           "--alpha", str(INTRA["alpha"]), "--beta", str(INTRA["beta"]),
           "--gamma", str(INTRA["gamma"]), "--alpha-inter", str(h["pingpong_us"] * 1e-6),
           "--beta-inter", str(8 / (h["beta_gbit"] * 1e9)), "--no-data", "--json"]
    if seg:
        cmd += ["--segment", seg]
    r = subprocess.run(cmd, capture_output=True, text=True, check=True)
    return json.loads(r.stdout)["time_s"] * 1e6


def model(configs):
    print("\n### The two-level model against the measured time at >= 1 MiB (model / measured - 1; "
          f"target: within {round(MODEL_TOLERANCE * 100)} %)\n")
    print("Model: mpiar-sim on the same nodes, ranks and placement; between nodes alpha is the "
          "calibration's 4-byte one-way ping-pong and beta its fitted rate, inside a node the "
          "library's built-in alpha, beta and gamma.\n")
    print("| nodes x ranks, placement | algorithm | " + "sizes: model / measured - 1 | "
          "median | within 15 % |")
    print("|---|---|---|---|---|")
    for meta, h, bench, _ in configs:
        if h["pingpong_us"] is None or h["beta_gbit"] is None:
            continue
        sizes = [b for b in bench if b >= MODEL_MIN]
        algs = sorted({a for b in sizes for a in bench[b]
                       if a not in ("auto", "mpi") and not a.endswith("/repro")})
        for a in algs:
            errs = []
            for b in sizes:
                if a in bench[b]:
                    errs.append((b, simulate(meta, h, a, b) / bench[b][a][0] - 1))
            if not errs:
                continue
            cells = ", ".join(f"{size_name(b)} {100 * e:+.0f} %" for b, e in errs)
            within = sum(abs(e) <= MODEL_TOLERANCE for _, e in errs)
            print(f"| {meta['nodes']} x {meta['ranks_per_node']}, {meta['place']} | {a} | {cells} | "
                  f"{100 * statistics.median(e for _, e in errs):+.0f} % | {within} of "
                  f"{len(errs)} |")


SIM = None

if __name__ == "__main__":
    args = sys.argv[1:]
    if len(args) == 3 and args[1] == "--sim":
        SIM = args[2]
        args = args[:1]
    if len(args) != 1:
        sys.exit("usage: report.py OUT_DIR [--sim PATH_TO_MPIAR_SIM]")
    summarize(args[0])
