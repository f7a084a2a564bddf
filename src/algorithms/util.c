/* Small arithmetic shared by the builders. */
#include "algorithms/util.h"

int mpiar__pof2_floor(int p) {
  int q = 1;
  while (q <= p / 2) {
    q *= 2;
  }
  return q;
}

int mpiar__log2i(int pof2) {
  int l = 0;
  while ((1 << l) < pof2) {
    l++;
  }
  return l;
}
