/* Kernel timings on OpenCL devices, for finding where a GPU's time goes: with NETCL_PROFILE=1
 * the queue is made with CL_QUEUE_PROFILING_ENABLE, every kernel launch keeps its event, and
 * the device's run time of each is summed by kernel name and global work size. The table goes
 * to stderr when the device shuts down (process exit), sorted by total time. Off by default:
 * a launch then costs nothing more. Resolving the events every NC_CL_PROFILE_BATCH launches
 * waits for the queue, so a profiled run's wall time is not the unprofiled one's; the kernels'
 * own times are. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "cl_backend.h"

#define NC_CL_PROFILE_BATCH 2048

typedef struct {
  cl_event ev;
  char key[96];
} nc_cl_prof_rec;

typedef struct {
  char key[96];
  uint64_t calls;
  double ns;
} nc_cl_prof_stat;

struct nc_cl_profile {
  nc_cl_prof_rec recs[NC_CL_PROFILE_BATCH];
  size_t n;
  nc_cl_prof_stat *stats;
  size_t nstats, cap;
  uint64_t failed; /* events whose times the driver did not give */
};

static pthread_once_t once = PTHREAD_ONCE_INIT;
static bool enabled;

static void read_env(void) {
  const char *e = getenv("NETCL_PROFILE");
  enabled = e && *e && strcmp(e, "0") != 0;
}

bool nc_cl_profiling(void) {
  pthread_once(&once, read_env);
  return enabled;
}

static nc_cl_prof_stat *stat_of(nc_cl_profile *p, const char *key) {
  for (size_t i = 0; i < p->nstats; i++)
    if (strcmp(p->stats[i].key, key) == 0) return &p->stats[i];
  if (p->nstats == p->cap) {
    size_t cap = p->cap ? p->cap * 2 : 64;
    nc_cl_prof_stat *s = realloc(p->stats, cap * sizeof *s);
    if (!s) return NULL;
    p->stats = s, p->cap = cap;
  }
  nc_cl_prof_stat *s = &p->stats[p->nstats++];
  snprintf(s->key, sizeof s->key, "%s", key);
  s->calls = 0, s->ns = 0;
  return s;
}

/* Waits for the recorded launches and adds their times to the table. */
static void resolve(nc_cl_profile *p) {
  if (p->n == 0) return;
  (void)nc_cl.clWaitForEvents(1, &p->recs[p->n - 1].ev); /* an in-order queue: the others ran before it */
  for (size_t i = 0; i < p->n; i++) {
    nc_cl_prof_rec *r = &p->recs[i];
    cl_ulong t0 = 0, t1 = 0;
    nc_cl_prof_stat *s = stat_of(p, r->key);
    if (s && nc_cl.clGetEventProfilingInfo(r->ev, CL_PROFILING_COMMAND_START, sizeof t0, &t0, NULL) == CL_SUCCESS &&
        nc_cl.clGetEventProfilingInfo(r->ev, CL_PROFILING_COMMAND_END, sizeof t1, &t1, NULL) == CL_SUCCESS && t1 >= t0) {
      s->calls++;
      s->ns += (double)(t1 - t0);
    } else {
      p->failed++;
    }
    nc_cl.clReleaseEvent(r->ev);
  }
  p->n = 0;
}

cl_event *nc_cl_profile_event(nc_cl_device *cd) {
  if (!cd->profile) return NULL;
  if (cd->profile->n == NC_CL_PROFILE_BATCH) resolve(cd->profile);
  return &cd->profile->recs[cd->profile->n].ev;
}

void nc_cl_profile_record(nc_cl_device *cd, cl_kernel k, int dims, const size_t *global) {
  nc_cl_profile *p = cd->profile;
  if (!p) return;
  nc_cl_prof_rec *r = &p->recs[p->n];
  char name[64] = "?";
  if (nc_cl.clGetKernelInfo(k, CL_KERNEL_FUNCTION_NAME, sizeof name, name, NULL) != CL_SUCCESS) strcpy(name, "?");
  name[sizeof name - 1] = 0;
  int at = snprintf(r->key, sizeof r->key, "%s [", name);
  for (int d = 0; d < dims && at > 0 && (size_t)at < sizeof r->key; d++)
    at += snprintf(r->key + at, sizeof r->key - (size_t)at, d ? "x%zu" : "%zu", global[d]);
  if (at > 0 && (size_t)at < sizeof r->key - 1) strcat(r->key, "]");
  p->n++;
}

void nc_cl_profile_start(nc_cl_device *cd) {
  if (!nc_cl_profiling()) return;
  cd->profile = calloc(1, sizeof *cd->profile);
  if (!cd->profile) fprintf(stderr, "netcl: no memory for the kernel profile; NETCL_PROFILE ignored\n");
}

static int by_time(const void *a, const void *b) {
  double x = ((const nc_cl_prof_stat *)a)->ns, y = ((const nc_cl_prof_stat *)b)->ns;
  return x < y ? 1 : x > y ? -1 : 0;
}

void nc_cl_profile_report(nc_cl_device *cd, const char *device_name) {
  nc_cl_profile *p = cd->profile;
  if (!p) return;
  resolve(p);
  qsort(p->stats, p->nstats, sizeof *p->stats, by_time);
  double total = 0;
  uint64_t calls = 0;
  for (size_t i = 0; i < p->nstats; i++) total += p->stats[i].ns, calls += p->stats[i].calls;
  fprintf(stderr, "netcl: kernel time on %s (NETCL_PROFILE): %.3f ms in %llu launches\n", device_name, total / 1e6,
          (unsigned long long)calls);
  fprintf(stderr, "%10s %6s %8s %10s  %s\n", "total ms", "%", "calls", "mean us", "kernel [global work]");
  for (size_t i = 0; i < p->nstats; i++) {
    const nc_cl_prof_stat *s = &p->stats[i];
    if (!s->calls) continue;
    fprintf(stderr, "%10.3f %6.2f %8llu %10.2f  %s\n", s->ns / 1e6, total > 0 ? 100 * s->ns / total : 0,
            (unsigned long long)s->calls, s->ns / 1e3 / (double)s->calls, s->key);
  }
  if (p->failed) fprintf(stderr, "netcl: %llu launches gave no times\n", (unsigned long long)p->failed);
  free(p->stats);
  free(p);
  cd->profile = NULL;
}
