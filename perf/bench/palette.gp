# The colours of mpiar's plots, by column name, loaded by perf/bench/plot.gp and
# perf/cluster/plot.gp after they set `algs` (the columns' names, blank-separated) and `nalgs`.
# Defines lc_of(i), dt_of(i), lw_of(i) and the macro style_of ("@style_of" in a plot for [i=...]).
#
# Colours by name, so that an algorithm has the same colour in every plot and every run:
# MPI_Allreduce (red), `auto` (blue) and `auto/shared` (orange) are the thick lines; the ring
# and its segment variants (ring/seg=SIZE, ring/repro, ring/shared) one family of greens, dark
# to light in the order they appear; every other column the next colour of a palette without
# red, blue, orange or green, then the same palette dashed. Point types follow the position.
greens = "#00441b #006d2c #238b45 #41ab5d #74c476 #a1d99b #c7e9c0"
strong = "#d62728 #1f3fbf #ff7f00"
others = "#9467bd #8c564b #e377c2 #7f7f7f #bcbd22 #17becf #b8860b #4b0082 #008080 #800000 #ff1493 #556b2f"
colours = ""
dashes = ""
widths = ""
n_ring = 0
n_other = 0
do for [i=1:nalgs] {
  a = word(algs, i)
  d = 1
  w = 1.5
  k = a eq "mpi" ? 1 : a eq "auto" ? 2 : a eq "auto/shared" ? 3 : 0
  ring = a eq "ring" || strstrt(a, "ring/") == 1
  if (k > 0) {
    c = word(strong, k)
    w = 4
  }
  if (k == 0 && ring) {
    n_ring = n_ring + 1
    c = word(greens, (n_ring - 1) % words(greens) + 1)
    d = (n_ring - 1) / words(greens) + 1
    w = 2
  }
  if (k == 0 && !ring) {
    n_other = n_other + 1
    c = word(others, (n_other - 1) % words(others) + 1)
    d = (n_other - 1) / words(others) + 1
  }
  colours = colours . c . " "
  dashes = dashes . sprintf("%d ", d)
  widths = widths . sprintf("%g ", w)
}
lc_of(i) = word(colours, i)
dt_of(i) = int(word(dashes, i))
lw_of(i) = real(word(widths, i))
style_of = "linecolor rgb lc_of(i) dashtype dt_of(i) linewidth lw_of(i) pointtype i"
