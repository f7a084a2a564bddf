/*
 * What the tools ask of the machine before a run: which process prints before MPI starts, how
 * much memory is available, whether stderr is a terminal, whether the output can be written.
 */
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/tool.h"
#include "tuning/input.h"

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

int tool_check_output(const char *path, char *err, size_t errlen) {
  struct stat st;
  if (stat(path, &st) == 0 && !S_ISREG(st.st_mode)) {
    snprintf(err, errlen, "'%s' is %s, not a regular file", path,
             mpiar__input_kind((unsigned)st.st_mode));
    return -1;
  }
  char *copy = strdup(path);
  if (copy == NULL) {
    snprintf(err, errlen, "out of memory");
    return -1;
  }
  const char *dir = dirname(copy);
  int rc = 0;
  if (stat(dir, &st) != 0) {
    snprintf(err, errlen, "cannot write '%s': its directory '%s': %s", path, dir, strerror(errno));
    rc = -1;
  } else if (!S_ISDIR(st.st_mode)) {
    snprintf(err, errlen, "cannot write '%s': '%s' is not a directory", path, dir);
    rc = -1;
  }
  free(copy);
  if (rc != 0) {
    return rc;
  }
  /* The file is written as PATH.tmp and renamed over PATH: PATH.tmp must be creatable. A
   * PATH.tmp left by an earlier run is opened, not removed (the write replaces it anyway);
   * O_NONBLOCK keeps a FIFO in its place from blocking the check. */
  char tmp[4096];
  if ((size_t)snprintf(tmp, sizeof tmp, "%s.tmp", path) >= sizeof tmp) {
    snprintf(err, errlen, "the path '%.64s...' is too long", path);
    return -1;
  }
  int created = 1;
  int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NONBLOCK, 0644);
  if (fd < 0 && errno == EEXIST) {
    created = 0;
    fd = open(tmp, O_WRONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
    if (fd >= 0 && (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode))) {
      close(fd);
      snprintf(err, errlen, "cannot write '%s': '%s' is in the way, and not a regular file", path,
               tmp);
      return -1;
    }
  }
  if (fd < 0) {
    snprintf(err, errlen, "cannot write '%s': %s", tmp, strerror(errno));
    return -1;
  }
  close(fd);
  if (created) {
    unlink(tmp);
  }
  return 0;
}
