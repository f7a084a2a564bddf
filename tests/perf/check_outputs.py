#!/usr/bin/env python3
"""Check that mpiar-bench's CSV and JSON are well formed and agree with each other.

Reads both files back with the standard csv and json modules and checks the columns, that
every size has every algorithm, the derived figures (busbw = algbw * 2(p-1)/p, speedup vs MPI,
percentage of the limit), the memory floor (its bytes, time, the node bandwidth it comes from,
each column's percentage of it, in a sane range as a format check only), which buffers each
column ran on, that the two files hold the same numbers, and that no result failed its check.
With --plot-script, it also runs gnuplot on the CSV and checks the PNG and SVG files.

Usage: check_outputs.py CSV JSON --nranks P [--require a,b] [--absent c] [--validated]
                        [--in-place] [--shared] [--floor-buffer BYTES]
                        [--gnuplot GNUPLOT --plot-script plot.gp --plot-dir DIR]
"""
import argparse
import csv
import json
import math
import os
import subprocess
import sys
import xml.etree.ElementTree as ET

COLUMNS = [
    "bytes", "count", "dtype", "op", "nranks", "inplace", "algorithm", "selected", "iters",
    "warmup", "time_us_median", "time_us_min", "time_us_max", "algbw_GBps", "busbw_GBps",
    "limit_bytes", "limit_us", "limit_GBps", "busbw_pct_limit", "speedup_vs_mpi", "failures",
    "limit_plan", "regret_vs_best", "memory", "floor_bytes", "floor_us", "node_GBps",
    "floor_busbw_GBps", "pct_floor",
]

errors = []


def check(cond, msg):
    if not cond:
        errors.append(msg)
    return cond


def close(a, b, rel):
    """Equal within a relative tolerance (the files print a limited number of digits)."""
    return abs(a - b) <= rel * max(abs(a), abs(b)) + 1e-12


def num(text):
    return float(text) if text != "" else None


def reject_constant(name):
    raise ValueError("JSON holds the non-standard constant " + name)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("csv")
    ap.add_argument("json")
    ap.add_argument("--nranks", type=int, required=True)
    ap.add_argument("--require", default="", help="algorithms the run must have compared")
    ap.add_argument("--absent", default="", help="algorithms the run must not have compared")
    ap.add_argument("--validated", action="store_true", help="the run used -c")
    ap.add_argument("--in-place", action="store_true", help="the run used --in-place")
    ap.add_argument("--shared", action="store_true", help="the run used -m shared")
    ap.add_argument("--floor-buffer", type=int, default=0,
                    help="the run's --floor-buffer (0: the default, at least 64 MiB per rank)")
    ap.add_argument("--gnuplot")
    ap.add_argument("--plot-script")
    ap.add_argument("--plot-dir")
    args = ap.parse_args()
    p = args.nranks

    with open(args.csv, newline="") as f:
        reader = csv.reader(f)
        header = next(reader)
        check(header == COLUMNS, "CSV header is %s" % header)
        rows = [dict(zip(header, r)) for r in reader]
        for r in rows:
            check(len(r) == len(COLUMNS), "CSV row with %d fields" % len(r))

    with open(args.json) as f:
        doc = json.load(f, parse_constant=reject_constant)

    algs = doc["algorithms"]
    for a in filter(None, args.require.split(",")):
        check(a in algs, "algorithm %s is missing from %s" % (a, algs))
    for a in filter(None, args.absent.split(",")):
        check(a not in algs, "algorithm %s should not be in %s" % (a, algs))
    check(len(set(algs)) == len(algs), "algorithms repeat: %s" % algs)
    check(doc["program"] == "mpiar-bench", "JSON program")
    check(doc["nranks"] == p, "JSON nranks %s" % doc["nranks"])
    check(doc["validate"] == args.validated, "JSON validate flag")
    check(doc["inplace"] == args.in_place, "JSON inplace flag %s" % doc["inplace"])
    for r in rows:
        check(r["inplace"] == ("1" if args.in_place else "0"),
              "CSV inplace %s at %s %s" % (r["inplace"], r["bytes"], r["algorithm"]))
    for key in ("mpiar_version", "date", "host", "mpi_library", "definitions", "dtype", "op"):
        check(key in doc, "JSON lacks %s" % key)
    has_mpi = "mpi" in algs

    # The memory floor's bandwidth: positive, the median inside the range of its passes.
    mf = doc.get("memory_floor")
    if check(isinstance(mf, dict), "JSON lacks memory_floor"):
        check(0 < mf["min_GBps"] <= mf["node_GBps"] <= mf["max_GBps"],
              "memory_floor: min <= median <= max fails: %s" % mf)
        check(mf["end_node_GBps"] is not None and mf["end_node_GBps"] > 0,
              "memory_floor: no bandwidth after the sweep")
        check(mf["passes"] >= 3 and mf["end_passes"] >= 1, "memory_floor: passes %s" % mf)
        check(mf["ranks_per_node"] == p, "memory_floor: %d ranks per node on one node" %
              mf["ranks_per_node"])
        if args.floor_buffer:
            check(mf["buffer_bytes_per_rank"] == args.floor_buffer,
                  "memory_floor: buffer %d, --floor-buffer %d" % (mf["buffer_bytes_per_rank"],
                                                                args.floor_buffer))
        else:
            check(mf["buffer_bytes_per_rank"] >= 64 << 20,
                  "memory_floor: default buffer %d below 64 MiB" % mf["buffer_bytes_per_rank"])
    # -m shared: every mpiar column on shared buffers, with auto on ordinary ones beside it.
    for a in algs:
        if args.shared and a != "mpi":
            check(a.endswith("/shared") or a == "auto", "-m shared: column %s" % a)
    if args.shared and "auto/shared" in algs:
        check("auto" in algs, "-m shared: no auto (the MPI path) beside auto/shared")

    # The CSV: one line per size and algorithm, algorithms in the order of the run.
    check(len(rows) == len(algs) * len(doc["results"]),
          "CSV has %d rows for %d sizes x %d algorithms" % (len(rows), len(doc["results"]),
                                                         len(algs)))
    by_size = {}
    for r in rows:
        by_size.setdefault(int(r["bytes"]), []).append(r)
    sizes = [int(r["bytes"]) for r in rows[:: len(algs)]]
    check(sizes == sorted(set(sizes)), "CSV sizes not strictly increasing: %s" % sizes)
    for size, group in by_size.items():
        check([g["algorithm"] for g in group] == algs, "size %d: algorithms %s" % (size, group))
        mpi_time = None
        for g in group:
            if g["algorithm"] == "mpi":
                mpi_time = float(g["time_us_median"])
        for g in group:
            where = "CSV %d bytes %s" % (size, g["algorithm"])
            check(int(g["nranks"]) == p, where + ": nranks")
            check(int(g["count"]) * {"int8": 1, "uint8": 1, "float16": 2, "bfloat16": 2,
                                      "int32": 4, "uint32": 4, "float32": 4, "int64": 8,
                                      "uint64": 8, "float64": 8}[g["dtype"]] == size,
                  where + ": count * element size != bytes")
            t, tmin, tmax = (float(g[k]) for k in ("time_us_median", "time_us_min",
                                                    "time_us_max"))
            check(0 < tmin <= t <= tmax, where + ": min <= median <= max fails")
            algbw, busbw = float(g["algbw_GBps"]), float(g["busbw_GBps"])
            check(close(algbw, size / (t * 1e-6) / 1e9, 1e-6), where + ": algbw")
            check(close(busbw, algbw * 2 * (p - 1) / p, 1e-6), where + ": busbw")
            lim_bytes = int(g["limit_bytes"])
            check(lim_bytes == math.ceil(2 * (p - 1) * size / p), where + ": limit bytes")
            if p > 1:
                # The limit's plan: the exchange or one of the compared algorithms' schedules.
                plan = g["limit_plan"].split("/seg=")[0]
                picks = {x["selected"] for x in group}
                check(plan == "exchange" or plan in algs or plan in picks,
                      where + ": limit plan '%s'" % g["limit_plan"])
                lim_bw = float(g["limit_GBps"])
                check(close(lim_bw, lim_bytes / (float(g["limit_us"]) * 1e-6) / 1e9, 1e-6),
                      where + ": limit bandwidth")
                check(close(float(g["busbw_pct_limit"]), 100 * busbw / lim_bw, 1e-6),
                      where + ": % of limit")
            speedup = num(g["speedup_vs_mpi"])
            if has_mpi:
                check(speedup is not None and close(speedup, mpi_time / t, 1e-6),
                      where + ": speedup vs mpi")
                if g["algorithm"] == "mpi":
                    check(speedup == 1.0, where + ": mpi's own speedup is not 1")
            else:
                check(speedup is None, where + ": speedup without mpi")
            if g["algorithm"] == "auto":
                check(g["selected"] not in ("auto", "mpi", ""), where + ": auto's pick")
            else:
                check(g["selected"] == g["algorithm"], where + ": selected")
            check(int(g["failures"]) == 0, where + ": %s failed results" % g["failures"])
            check(g["memory"] == ("shared" if g["algorithm"].endswith("/shared") else "malloc"),
                  where + ": memory %s" % g["memory"])
            # The floor: 2 x ranks per node x size, over the node's bandwidth; % = floor / time.
            fbytes = 0 if (args.in_place and p == 1) else 2 * p * size
            check(int(g["floor_bytes"]) == fbytes, where + ": floor bytes %s" % g["floor_bytes"])
            node = float(g["node_GBps"])
            check(mf is None or close(node, mf["node_GBps"], 1e-6), where + ": node bandwidth")
            if fbytes > 0:
                fus = float(g["floor_us"])
                check(fus > 0 and close(fbytes / (fus * 1e-6) / 1e9, node, 1e-6),
                      where + ": floor time %s" % g["floor_us"])
                pct = float(g["pct_floor"])
                check(close(pct, 100 * fus / t, 1e-6), where + ": % of the floor")
                # A format check, not a timing one: positive and not absurd (cache-resident
                # sizes can beat a floor made of memory bandwidth).
                check(0 < pct < 1e5, where + ": %% of the floor %s out of range" % pct)
                check(close(float(g["floor_busbw_GBps"]),
                            size / (fus * 1e-6) / 1e9 * 2 * (p - 1) / p, 1e-6) or p == 1,
                      where + ": floor busbw")

    # The JSON holds the same numbers.
    for res in doc["results"]:
        size = res["bytes"]
        group = {g["algorithm"]: g for g in by_size.get(size, [])}
        check(list(res["algorithms"].keys()) == algs, "JSON %d: algorithms" % size)
        for a, v in res["algorithms"].items():
            g = group.get(a)
            if not check(g is not None, "JSON %d %s not in the CSV" % (size, a)):
                continue
            check(close(v["time_us"]["median"], float(g["time_us_median"]), 1e-6),
                  "JSON/CSV %d %s: median time" % (size, a))
            check(close(v["busbw_GBps"], float(g["busbw_GBps"]), 1e-6),
                  "JSON/CSV %d %s: busbw" % (size, a))
            check(v["failures"] == 0, "JSON %d %s: failures" % (size, a))
            check(v["memory"] == g["memory"], "JSON/CSV %d %s: memory" % (size, a))
            check((v["pct_floor"] is None and g["pct_floor"] == "") or
                  close(v["pct_floor"], float(g["pct_floor"]), 1e-6),
                  "JSON/CSV %d %s: %% of the floor" % (size, a))
        if "auto" in algs:
            check(res["auto_selected"] == group["auto"]["selected"], "JSON %d: auto pick" % size)
            check(res.get("auto_source") in ("MPIAR_ALGORITHM", "tuning table",
                                             "model with fitted parameters",
                                             "model with built-in parameters"),
                  "JSON %d: auto source %s" % (size, res.get("auto_source")))
        # Regret: every column's median over the best column's, which is an algorithm or a
        # segment column (never auto or mpi) no slower than any unsegmented algorithm.
        first = next(iter(group.values())) if group else None
        if first is not None:
            check(res["floor"]["bytes"] == int(first["floor_bytes"]), "JSON/CSV %d: floor" % size)
        best = res["best"]
        best_of = res["best_of"]
        # Shared-buffer and reproducible columns are never candidates: with no other column
        # there is no best (-m shared).
        plain = [a for a in algs if a not in ("auto", "mpi") and "/seg=" not in a
                 and not a.startswith("hier_") and not a.endswith("/shared")
                 and not a.endswith("/repro")]
        check(all(a in best_of for a in plain), "JSON %d: best_of %s" % (size, best_of))
        check(not any(a.endswith("/shared") for a in best_of), "JSON %d: best_of %s" %
              (size, best_of))
        if not plain and not best_of:
            check(best is None, "JSON %d: best %s without candidates" % (size, best))
            continue
        check(best in best_of and "auto" not in best_of and "mpi" not in best_of,
              "JSON %d: best %s of %s" % (size, best, best_of))
        if check(best in group, "JSON %d: best %s" % (size, best)):
            tb = float(group[best]["time_us_median"])
            for a in best_of:
                check(tb <= float(group[a]["time_us_median"]), "JSON %d: %s beats the best" %
                      (size, a))
            for a, g in group.items():
                # Both files print 9 digits, so regret + 1 = time / best time holds to a relative
                # 1e-6 (an absolute bound failed where a loaded machine made one column a
                # thousand times slower than the best: 9 digits of a ratio of 1000).
                check(close(float(g["regret_vs_best"]) + 1, float(g["time_us_median"]) / tb, 1e-6),
                      "CSV %d %s: regret %s, time %s, best %s" % (size, a, g["regret_vs_best"],
                                                                 g["time_us_median"], tb))
                check(close(res["algorithms"][a]["regret_vs_best"],
                            float(g["regret_vs_best"]), 1e-6), "JSON/CSV %d %s: regret" % (size, a))
        if p > 1 and group:
            check(res["limit"]["plan"] == first["limit_plan"], "JSON/CSV %d: limit plan" % size)
            check(close(res["limit"]["time_us"], float(first["limit_us"]), 1e-6),
                  "JSON/CSV %d: limit time" % size)

    summary = doc["summary"]
    for key in ("ranges", "median_speedup_vs_mpi", "large_busbw_pct_limit", "large_pct_floor",
                "auto_vs_mpi_worst", "targets", "regret"):
        check(key in summary, "JSON summary lacks %s" % key)
    for a in ("auto", "mpi"):
        if a in algs:
            vals = sorted(float(g["regret_vs_best"]) for g in rows
                          if g["algorithm"] == a and g["regret_vs_best"] != "")
            n = len(vals)
            if n == 0:  # no best column at any size (-m shared): no regret
                check(summary["regret"][a] is None, "summary: regret of %s without a best" % a)
                continue
            med = vals[n // 2] if n % 2 else 0.5 * (vals[n // 2 - 1] + vals[n // 2])
            r = summary["regret"][a]
            check(r["sizes"] == n and close(r["median"], med, 1e-6) and
                  close(r["worst"], vals[-1], 1e-6), "summary: regret of %s" % a)
    n_small = sum(1 for s in sizes if s <= 4096)
    n_large = sum(1 for s in sizes if s >= 4 << 20)
    check(summary["ranges"]["small"]["sizes"] == n_small, "summary: small sizes")
    check(summary["ranges"]["large"]["sizes"] == n_large, "summary: large sizes")
    if has_mpi and "auto" in algs:
        worst = min(float(g["speedup_vs_mpi"]) for g in rows if g["algorithm"] == "auto")
        check(close(summary["auto_vs_mpi_worst"]["speedup"], worst, 1e-6), "summary: auto worst")
        # The targets are stated for two ranks only; -m shared has its own: 8 B against the
        # MPI path, 16 MiB and 64 MiB against MPI_Allreduce, the floor from 16 MiB.
        if args.shared:
            want = 0
            if p == 2 and "auto/shared" in algs:
                want = (8 in sizes) + (16 << 20 in sizes) + (64 << 20 in sizes) + \
                    any(s >= 16 << 20 for s in sizes)
            check(len(summary["targets"]) == want, "summary: %d shared targets, expected %d" %
                  (len(summary["targets"]), want))
        else:
            check((len(summary["targets"]) >= 2) == (p == 2), "summary: targets")
        for t in summary["targets"]:
            met = t["value"] <= t["target"] if t["at_most"] else t["value"] >= t["target"]
            check(t["met"] == met, "summary: target '%s' judged wrongly" % t["what"])

    if args.plot_script:
        os.makedirs(args.plot_dir, exist_ok=True)
        proc = subprocess.run([args.gnuplot, "-c", args.plot_script, args.csv, args.plot_dir],
                              capture_output=True, text=True)
        check(proc.returncode == 0, "gnuplot failed: %s" % proc.stderr)
        check("warning" not in proc.stderr.lower(), "gnuplot warned: %s" % proc.stderr)
        for name in ("busbw", "latency", "speedup"):
            png = os.path.join(args.plot_dir, name + ".png")
            svg = os.path.join(args.plot_dir, name + ".svg")
            if check(os.path.exists(png), "missing " + png):
                with open(png, "rb") as f:
                    check(f.read(8) == b"\x89PNG\r\n\x1a\n", png + " is not a PNG")
                check(os.path.getsize(png) > 2000, png + " is nearly empty")
            if check(os.path.exists(svg), "missing " + svg):
                root = ET.parse(svg).getroot()
                check(root.tag.endswith("svg"), svg + " is not SVG")
                # Every algorithm appears in the legend of the bandwidth and latency plots.
                if name != "speedup":
                    text = " ".join(t.text or "" for t in root.iter() if t.tag.endswith("text"))
                    for a in algs:
                        check(a in text, "%s: no legend entry for %s" % (svg, a))
                if name == "busbw":
                    check("memory floor" in text, "%s: no legend entry for the floor" % svg)

    for e in errors:
        print("FAIL:", e)
    if errors:
        print("%d check(s) failed" % len(errors))
        return 1
    print("CSV (%d rows) and JSON (%d sizes) are well formed and agree" %
          (len(rows), len(doc["results"])))
    return 0


if __name__ == "__main__":
    sys.exit(main())
