# Plots of an mpiar-bench CSV file (--csv), each as PNG and SVG in `outdir`:
#   busbw.png/svg    bus bandwidth vs message size, one line per algorithm, with the
#                    point-to-point limit measured at each size (dashed) and the memory
#                    floor (the busbw of a call that ran at the floor's time, dotted)
#   latency.png/svg  median time vs message size for small messages (up to 64 KiB)
#   speedup.png/svg  speedup vs MPI_Allreduce = time(mpi) / time(algorithm); above 1 is faster
#
# Usage: gnuplot -c perf/bench/plot.gp results/bench.csv results
#    or: gnuplot -e "csv='results/bench.csv'; outdir='results'" perf/bench/plot.gp
# Optional: -e "small_max=65536" sets the largest size of the latency plot in bytes.

if (ARGC >= 1) { csv = ARG1 }
if (ARGC >= 2) { outdir = ARG2 }
if (!exists("csv")) {
  print "plot.gp: no input: gnuplot -c plot.gp BENCH.CSV [OUTDIR]"
  exit status 2
}
if (!exists("outdir")) { outdir = "." }
if (!exists("small_max")) { small_max = 65536 }

set datafile separator comma
# Rows of other algorithms map to NaN below; treating NaN as missing keeps each line unbroken.
set datafile missing NaN

# Columns of the CSV (see mpiar-bench's bench_csv_header()).
c_bytes = 1; c_dtype = 3; c_op = 4; c_nranks = 5; c_inplace = 6; c_alg = 7
c_time = 11; c_busbw = 15; c_limit = 18; c_speedup = 20; c_floor_busbw = 28

# The algorithms in the order they first appear, and the run's parameters for the titles.
algs = " "
nranks = 0
dtype = ""
op = ""
inplace = 0
stats csv skip 1 using (a = strcol(c_alg), \
                        algs = (strstrt(algs, " ".a." ") == 0 ? algs.a." " : algs), \
                        nranks = column(c_nranks), dtype = strcol(c_dtype), \
                        op = strcol(c_op), inplace = column(c_inplace), 0) nooutput
if (words(algs) == 0) {
  print sprintf("plot.gp: no data rows in %s", csv)
  exit status 1
}
first = word(algs, 1)
has_mpi = strstrt(algs, " mpi ") > 0
title_run = sprintf("%d ranks, %s %s%s", int(nranks), dtype, op, inplace != 0 ? ", in place" : "")

# Size axis: powers of two with readable labels.
size_label(x) = x >= 2**30 ? sprintf("%.0fG", x / 2.0**30) : \
                x >= 2**20 ? sprintf("%.0fM", x / 2.0**20) : \
                x >= 2**10 ? sprintf("%.0fK", x / 2.0**10) : sprintf("%.0f", x)
set logscale x 2
set xtics ()
do for [k=0:40:2] { set xtics add (size_label(2.0**k) 2.0**k) }
set xlabel "message size (bytes)"
set grid xtics ytics
set key top left box opaque
set style data linespoints
set pointsize 0.8

# A filtered column: the value on rows of algorithm `a`, NaN elsewhere.
pick(a, col) = strcol(c_alg) eq a ? column(col) : NaN
# Colours by name, shared with perf/cluster/plot.gp (palette.gp, next to this file).
nalgs = words(algs)
here = ""
do for [k=1:strlen(ARG0)] { if (ARG0[k:k] eq "/") { here = ARG0[1:k] } }
load here."palette.gp"

png_term = strstrt(GPVAL_TERMINALS, "pngcairo") > 0 ? "pngcairo" : "png"

do for [fmt in "png svg"] {
  if (fmt eq "png") {
    eval sprintf("set terminal %s size 1100,650 noenhanced", png_term)
  } else {
    set terminal svg size 1100,650 dynamic noenhanced
  }

  set output sprintf("%s/busbw.%s", outdir, fmt)
  set title sprintf("Bus bandwidth, busbw = size / time * 2(p-1)/p: %s", title_run)
  set ylabel "busbw (GB/s)"
  unset logscale y
  set yrange [0:*]
  plot for [i=1:nalgs] csv skip 1 using c_bytes:(pick(word(algs, i), c_busbw)) \
           @style_of title word(algs, i), \
       csv skip 1 using c_bytes:(pick(first, c_limit)) with lines dashtype 2 linewidth 2 \
           linecolor "black" title "point-to-point limit", \
       csv skip 1 using c_bytes:(pick(first, c_floor_busbw)) with lines dashtype 3 linewidth 3 \
           linecolor "#404040" title "memory floor"

  set output sprintf("%s/latency.%s", outdir, fmt)
  set title sprintf("Latency, median of the slowest rank, sizes up to %s: %s", \
                    size_label(small_max), title_run)
  set ylabel "time (microseconds)"
  set logscale y
  set yrange [*:*]
  plot for [i=1:nalgs] csv skip 1 \
       using (column(c_bytes) <= small_max ? column(c_bytes) : NaN):(pick(word(algs, i), c_time)) \
       @style_of title word(algs, i)

  set output sprintf("%s/speedup.%s", outdir, fmt)
  set ylabel "speedup vs MPI_Allreduce (time(mpi) / time(algorithm))"
  unset logscale y
  set yrange [0:*]
  if (has_mpi) {
    set title sprintf("Speedup vs MPI_Allreduce, above 1 is faster: %s", title_run)
    # mpi's own line is 1 at every size: it is drawn as the reference.
    plot for [i=1:nalgs] csv skip 1 using c_bytes:(pick(word(algs, i), c_speedup)) \
             @style_of \
             title (word(algs, i) eq "mpi" ? "mpi (MPI_Allreduce = 1)" : word(algs, i))
  } else {
    set title sprintf("Speedup vs MPI_Allreduce: not measured (no mpi column): %s", title_run)
    plot 1 with lines linecolor rgb "#d62728" linewidth 4 title "MPI_Allreduce"
  }
  unset output
}
