# Bus bandwidth against the link rate, from an mpiar-bench CSV file (--csv) of a run on the
# emulated cluster: busbw = size / time * 2(p-1)/p, in percent of the rate every node's link
# was set to, one line per algorithm, coloured by name (MPI_Allreduce and auto thick, in red and
# blue; perf/bench/palette.gp). Written as PNG and SVG.
#
# Usage: gnuplot -c perf/cluster/plot.gp BENCH.CSV OUT_PREFIX LINK_BITS_PER_S "TITLE"
#   e.g. gnuplot -c perf/cluster/plot.gp results/2x1-1gbit.csv results/busbw-2x1-1gbit 1e9 \
#        "2 nodes x 1 rank, 1 Gbit/s links"
# writes OUT_PREFIX.png and OUT_PREFIX.svg.

if (ARGC < 3) {
  print "plot.gp: gnuplot -c plot.gp BENCH.CSV OUT_PREFIX LINK_BITS_PER_S [TITLE]"
  exit status 2
}
csv = ARG1
prefix = ARG2
eval sprintf("link = %s * 1.0", ARG3)  # 1e9, 200e6 or 200000000
title_run = ARGC >= 4 ? ARG4 : ""

set datafile separator comma
set datafile missing NaN
# Columns of the CSV (see mpiar-bench's bench_csv_header()).
c_bytes = 1; c_alg = 7; c_busbw = 15

algs = " "
stats csv skip 1 using (a = strcol(c_alg), \
                        algs = (strstrt(algs, " ".a." ") == 0 ? algs.a." " : algs), 0) nooutput
if (words(algs) == 0) {
  print sprintf("plot.gp: no data rows in %s", csv)
  exit status 1
}
nalgs = words(algs)

size_label(x) = x >= 2**30 ? sprintf("%.0fG", x / 2.0**30) : \
                x >= 2**20 ? sprintf("%.0fM", x / 2.0**20) : \
                x >= 2**10 ? sprintf("%.0fK", x / 2.0**10) : sprintf("%.0f", x)
set logscale x 2
set xtics ()
do for [k=0:40:2] { set xtics add (size_label(2.0**k) 2.0**k) }
set xlabel "message size (bytes)"
set ylabel "busbw, % of the link rate"
set yrange [0:*]
set grid xtics ytics
set key top left box opaque
set style data linespoints
set pointsize 0.8

# busbw (GB/s) of algorithm `a` in percent of the link, NaN on other rows.
pct(a) = strcol(c_alg) eq a ? column(c_busbw) * 8e9 / link * 100 : NaN
# Colours by name, as in perf/bench/plot.gp (perf/bench/palette.gp).
here = ""
do for [k=1:strlen(ARG0)] { if (ARG0[k:k] eq "/") { here = ARG0[1:k] } }
load here."../bench/palette.gp"
name_of(i) = word(algs, i) eq "mpi" ? "mpi (MPI\\_Allreduce)" : word(algs, i)

png_term = strstrt(GPVAL_TERMINALS, "pngcairo") > 0 ? "pngcairo" : "png"
do for [fmt in "png svg"] {
  if (fmt eq "png") {
    eval sprintf("set terminal %s size 1100,650 noenhanced", png_term)
  } else {
    set terminal svg size 1100,650 dynamic noenhanced
  }
  set output sprintf("%s.%s", prefix, fmt)
  set title sprintf("Bus bandwidth against the link rate (%.4g Gbit/s each way per node): %s", \
                    link / 1e9, title_run)
  plot for [i=1:nalgs] csv skip 1 using c_bytes:(pct(word(algs, i))) \
           @style_of title word(algs, i), \
       100 with lines dashtype 2 linewidth 2 linecolor "black" title "link rate"
  unset output
}
