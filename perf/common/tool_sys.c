/*
 * What the tools ask of the machine before a run: which process prints before MPI starts, how
 * much memory is available, whether stderr is a terminal.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/tool.h"

int tool_launcher_rank0(void) {
  static const char *const vars[] = {"PMI_RANK", "OMPI_COMM_WORLD_RANK", "PMIX_RANK",
                                     "SLURM_PROCID"};
  for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) {
    const char *v = getenv(vars[i]);
    if (v != NULL && *v != '\0') {
      return strcmp(v, "0") == 0;
    }
  }
  return 1;
}

double tool_available_memory(void) {
  const char *limit = getenv("MPIAR_TOOLS_MEMORY");
  size_t v = 0;
  if (limit != NULL && *limit != '\0') {
    return tool_parse_size(limit, &v) == 0 ? (double)v : -1.0;
  }
  FILE *f = fopen("/proc/meminfo", "r");
  if (f != NULL) {
    char line[256];
    unsigned long long kib = 0;
    int found = 0;
    while (!found && fgets(line, sizeof line, f) != NULL) {
      found = sscanf(line, "MemAvailable: %llu kB", &kib) == 1;
    }
    fclose(f);
    if (found) {
      return (double)kib * 1024.0;
    }
  }
  long pages = sysconf(_SC_AVPHYS_PAGES);
  long page = sysconf(_SC_PAGESIZE);
  return (pages > 0 && page > 0) ? (double)pages * (double)page : 0.0;
}

int tool_check_memory(double need, const char *what, char *err, size_t errlen) {
  double avail = tool_available_memory();
  if (avail < 0) {
    snprintf(err, errlen, "MPIAR_TOOLS_MEMORY='%s' is not a size (e.g. 512M, 16G)",
             getenv("MPIAR_TOOLS_MEMORY"));
    return -1;
  }
  if (avail == 0 || need <= avail) {
    return 0;
  }
  char n[32];
  char a[32];
  snprintf(err, errlen, "%s needs %s of memory; %s is available on this machine", what,
           tool_format_bytes(need, n, sizeof n), tool_format_bytes(avail, a, sizeof a));
  return -1;
}

int tool_progress_wanted(void) {
  return isatty(STDERR_FILENO);
}
