/* The CPU thread pool, and the OpenMP entry points GCC's lowering of `#pragma omp parallel for`
 * calls (GOMP_parallel, GOMP_parallel_loop_*_dynamic, ...), defined here with hidden
 * visibility: libnetcl's parallel loops run on this pool, not on libgomp, while the source
 * keeps its pragmas (NC_CPU_PARALLEL_FOR in runtime/backend/cpu/strided.h). libgomp's workers
 * spin for a long time between parallel regions and fought OpenBLAS's threads for the cores;
 * these spin for NC_SPIN_NS, then sleep on a futex (docs/performance.md).
 *
 * One parallel region at a time uses the pool: a region entered from another host thread while
 * the pool is busy, or nested inside a region, runs on its calling thread alone (a team of one),
 * with the same results. A forked child starts with no workers and makes new ones on its first
 * parallel region.
 *
 * Constructs that have no entry point here fail to link into a program (test c.omp_symbols
 * checks libnetcl imports none from libgomp). */
#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#include "netcl/threads.h"
#include "threads_internal.h"

#define NC_MAX_THREADS 1024
#define HIDDEN __attribute__((visibility("hidden")))
/* The entry points below. With oneDNN (runtime/backend/cpu/cpu_dnnl.c) they are exported, so
 * that the dynamic linker binds libdnnl's imports of GOMP_parallel, GOMP_barrier and omp_* to
 * these rather than to libgomp's (libnetcl comes before libgomp in every lookup scope that
 * holds both): oneDNN's threads are this pool's threads (test c.dnnl_threads). */
#ifdef NC_HAVE_DNNL
#define OMP_ENTRY __attribute__((visibility("default")))
#else
#define OMP_ENTRY HIDDEN
#endif

/* How long a waiting thread spins before it sleeps: long enough to catch the next region of a
 * loop of small ops, short enough not to take a core from other processes for long (on the
 * loaded 2-core machine of docs/performance.md, 100 us of spinning cost 60% more CPU time than
 * none on the matmul/relu/sum loop; 30 us, under 10%). OMP_WAIT_POLICY=passive: no spinning. */
#define NC_SPIN_NS 30000

typedef struct {
  void (*fn)(void *);
  void *data;
  int nthreads;
  /* the dynamic loop of a combined `parallel for`, or of the current `for` inside a region */
  _Atomic long next;
  long end, incr, chunk; /* chunk in index units (iterations * incr) */
  /* barrier */
  atomic_uint bar_count, bar_gen;
  /* `single` constructs seen */
  atomic_uint single_seq;
  /* the region's first loop: 0 not set up, 1 being set up, 2 ready */
  atomic_int first_loop;
} nc_team;

static struct {
  pthread_mutex_t busy;    /* held by the host thread whose region uses the workers */
  int nworkers;            /* started workers (ids 1..nworkers) */
  pthread_t workers[NC_MAX_THREADS];
  atomic_uint gen;         /* bumped to start a region */
  atomic_int region_n;     /* team size of the latest region */
  atomic_uint pending;     /* members of the current region not yet done */
  atomic_uint claimed[NC_MAX_THREADS]; /* per member id: the latest generation that took it */
  atomic_int sleepers;     /* threads in (or about to enter) a futex wait */
  nc_team team;
} pool = {.busy = PTHREAD_MUTEX_INITIALIZER};

static atomic_int num_threads;  /* 0 until first read */
static long spin_ns = NC_SPIN_NS;
static pthread_once_t init_once = PTHREAD_ONCE_INIT;
static pthread_mutex_t atomic_lock = PTHREAD_MUTEX_INITIALIZER, critical_lock = PTHREAD_MUTEX_INITIALIZER;

static __thread nc_team *cur_team;
static __thread bool cur_reserved; /* this host thread holds pool.busy through nc_threads_reserve */
static __thread int cur_tid;
static __thread unsigned cur_single, cur_loops;

/* ---- waiting ----------------------------------------------------------------------------- */

static long now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1000000000L + ts.tv_nsec;
}

static inline void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  __asm__ __volatile__("yield");
#endif
}

/* Returns once *addr != val: spins for spin_ns, then sleeps until a wake_all(addr). */
static void wait_ne(atomic_uint *addr, unsigned val) {
  if (atomic_load_explicit(addr, memory_order_acquire) != val) return;
  if (spin_ns > 0) {
    long t0 = now_ns();
    for (unsigned i = 1;; i++) {
      cpu_relax();
      if (atomic_load_explicit(addr, memory_order_acquire) != val) return;
      if ((i & 63) == 0 && now_ns() - t0 > spin_ns) break;
    }
  }
  atomic_fetch_add(&pool.sleepers, 1);
  while (atomic_load(addr) == val)
    syscall(SYS_futex, (unsigned *)addr, FUTEX_WAIT_PRIVATE, val, NULL, NULL, 0);
  atomic_fetch_sub(&pool.sleepers, 1);
}

/* Call after changing *addr (with a seq_cst store or read-modify-write). */
static void wake_all(atomic_uint *addr) {
  if (atomic_load(&pool.sleepers) > 0) syscall(SYS_futex, (unsigned *)addr, FUTEX_WAKE_PRIVATE, INT_MAX, NULL, NULL, 0);
}

/* ---- thread count ------------------------------------------------------------------------ */

static int parse_count(const char *name) {
  const char *s = getenv(name);
  if (!s || !*s) return 0;
  char *end;
  errno = 0;
  long v = strtol(s, &end, 10);
  if (errno || end == s || (*end && *end != ',') || v < 1 || v > NC_MAX_THREADS) {
    fprintf(stderr, "netcl: ignoring %s=%s (expected a thread count from 1 to %d)\n", name, s, NC_MAX_THREADS);
    return 0;
  }
  return (int)v;
}

static void reset_after_fork(void);

static void init(void) {
  const char *policy = getenv("OMP_WAIT_POLICY");
  if (policy && strcasecmp(policy, "passive") == 0) spin_ns = 0;
  int n = parse_count("NETCL_NUM_THREADS");
  if (!n) n = parse_count("OMP_NUM_THREADS");
  if (!n) {
    cpu_set_t set;
    n = sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : (int)sysconf(_SC_NPROCESSORS_ONLN);
    if (n < 1) n = 1;
    if (n > NC_MAX_THREADS) n = NC_MAX_THREADS;
  }
  int zero = 0;
  atomic_compare_exchange_strong(&num_threads, &zero, n);
  pthread_atfork(NULL, NULL, reset_after_fork);
}

int nc_get_num_threads(void) {
  pthread_once(&init_once, init);
  return atomic_load(&num_threads);
}

nc_status nc_set_num_threads(int n) {
  if (n < 1 || n > NC_MAX_THREADS)
    return nc_error(NC_ERR_ARG, "thread count must be from 1 to %d, got %d", NC_MAX_THREADS, n);
  pthread_once(&init_once, init);
  atomic_store(&num_threads, n);
  return NC_OK;
}

/* ---- the pool ---------------------------------------------------------------------------- */

static void run_member(nc_team *t, int tid) {
  nc_team *saved_team = cur_team;
  int saved_tid = cur_tid;
  unsigned saved_single = cur_single, saved_loops = cur_loops;
  cur_team = t, cur_tid = tid, cur_single = 0, cur_loops = 0;
  t->fn(t->data);
  cur_team = saved_team, cur_tid = saved_tid, cur_single = saved_single, cur_loops = saved_loops;
}

/* Member `id` of region g is run once, by its worker or, if that worker has not woken by the
 * time the caller is done with its own share, by the caller: on a busy machine a region never
 * waits for a worker the scheduler has not run yet. Generations only grow, so a worker that
 * wakes after its region is over finds its id taken. */
static bool claim(int id, unsigned g) {
  unsigned c = atomic_load(&pool.claimed[id]);
  return (int)(c - g) < 0 && atomic_compare_exchange_strong(&pool.claimed[id], &c, g);
}

static void *worker_main(void *arg) {
  /* id, and the generation before the region it was started for */
  const int id = (int)((uintptr_t)arg & 0xffff);
  unsigned seen = (unsigned)((uintptr_t)arg >> 16);
  for (;;) {
    wait_ne(&pool.gen, seen);
    /* The region's size and its generation must be read together: a worker outside the latest
     * region may be passed by the next one. */
    unsigned g;
    int n;
    do {
      g = atomic_load(&pool.gen);
      n = atomic_load(&pool.region_n);
    } while (atomic_load(&pool.gen) != g);
    seen = g;
    if (id >= n || !claim(id, g)) continue;
    run_member(&pool.team, id);
    if (atomic_fetch_sub(&pool.pending, 1) == 1) wake_all(&pool.pending);
  }
  return NULL;
}

/* With pool.busy held: starts workers up to id n-1; returns the team size it can have. */
static int ensure_workers(int n) {
  while (pool.nworkers < n - 1) {
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    /* Workers never take signals meant for the process. */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    uintptr_t arg = (uintptr_t)(pool.nworkers + 1) | (uintptr_t)atomic_load(&pool.gen) << 16;
    int rc = pthread_create(&pool.workers[pool.nworkers + 1], &attr, worker_main, (void *)arg);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    pthread_attr_destroy(&attr);
    if (rc != 0) break;
    pool.nworkers++;
  }
  return pool.nworkers + 1 < n ? pool.nworkers + 1 : n;
}

/* The child of a fork has the calling thread only: no workers, and no region running. */
static void reset_after_fork(void) {
  pthread_mutex_init(&pool.busy, NULL);
  pthread_mutex_init(&atomic_lock, NULL);
  pthread_mutex_init(&critical_lock, NULL);
  pool.nworkers = 0;
  atomic_store(&pool.pending, 0);
  atomic_store(&pool.sleepers, 0);
  atomic_store(&pool.region_n, 0);
}

static void loop_init(nc_team *t, long start, long end, long incr, long chunk) {
  if (chunk < 1) chunk = 1;
  atomic_store_explicit(&t->next, start, memory_order_relaxed);
  t->end = end, t->incr = incr, t->chunk = chunk * incr;
}

static void team_init(nc_team *t, void (*fn)(void *), void *data, int n) {
  t->fn = fn, t->data = data, t->nthreads = n;
  atomic_store_explicit(&t->bar_count, 0, memory_order_relaxed);
  atomic_store_explicit(&t->single_seq, 0, memory_order_relaxed);
  atomic_store_explicit(&t->first_loop, 0, memory_order_relaxed);
}

/* Runs fn(data) on a team of up to `req` threads (0: the default), the caller being thread 0.
 * loop: the combined loop's bounds, or NULL. */
static void run_region(void (*fn)(void *), void *data, unsigned req, const long *loop) {
  int n = nc_get_num_threads();
  if (req > 0 && (int)req < n) n = (int)req;
  if (n > 1 && !cur_team && (cur_reserved || pthread_mutex_trylock(&pool.busy) == 0)) {
    n = ensure_workers(n);
    if (n > 1) {
      nc_team *t = &pool.team;
      team_init(t, fn, data, n);
      if (loop) loop_init(t, loop[0], loop[1], loop[2], loop[3]);
      atomic_store(&pool.pending, (unsigned)(n - 1));
      atomic_store(&pool.region_n, n);
      const unsigned g = atomic_fetch_add(&pool.gen, 1) + 1;
      wake_all(&pool.gen);
      const unsigned barriers = atomic_load(&t->bar_gen);
      run_member(t, 0);
      /* Members that no worker has taken yet run here, one after the other. That is only
       * possible when the region has no barrier, and then no member has one (OpenMP: all or
       * none of a team's threads meet each barrier). */
      if (atomic_load(&t->bar_gen) == barriers)
        for (int id = 1; id < n; id++)
          if (claim(id, g)) {
            run_member(t, id);
            atomic_fetch_sub(&pool.pending, 1);
          }
      for (unsigned p; (p = atomic_load(&pool.pending)) != 0;) wait_ne(&pool.pending, p);
      if (!cur_reserved) pthread_mutex_unlock(&pool.busy);
      return;
    }
    if (!cur_reserved) pthread_mutex_unlock(&pool.busy);
  }
  nc_team one;
  team_init(&one, fn, data, 1);
  if (loop) loop_init(&one, loop[0], loop[1], loop[2], loop[3]);
  run_member(&one, 0);
}

bool nc_threads_reserve(void) {
  if (cur_team || cur_reserved) return false;
  const int n = nc_get_num_threads();
  pthread_mutex_lock(&pool.busy);
  if (n > 1 && ensure_workers(n) < n) {
    pthread_mutex_unlock(&pool.busy);
    return false;
  }
  cur_reserved = true;
  return true;
}

void nc_threads_release(void) {
  if (!cur_reserved) return;
  cur_reserved = false;
  pthread_mutex_unlock(&pool.busy);
}

/* The next chunk of the team's dynamic loop. */
static bool loop_next(long *istart, long *iend) {
  nc_team *t = cur_team;
  if (!t) return false;
  long s = atomic_fetch_add_explicit(&t->next, t->chunk, memory_order_relaxed);
  if (t->incr > 0) {
    if (s >= t->end) return false;
    *istart = s, *iend = t->end - s > t->chunk ? s + t->chunk : t->end;
  } else {
    if (s <= t->end) return false;
    *istart = s, *iend = t->end - s < t->chunk ? s + t->chunk : t->end;
  }
  return true;
}

static void barrier(void) {
  nc_team *t = cur_team;
  if (!t || t->nthreads <= 1) return;
  unsigned g = atomic_load(&t->bar_gen);
  if (atomic_fetch_add(&t->bar_count, 1) == (unsigned)t->nthreads - 1) {
    atomic_store(&t->bar_count, 0);
    atomic_fetch_add(&t->bar_gen, 1);
    wake_all(&t->bar_gen);
  } else {
    wait_ne(&t->bar_gen, g);
  }
}

/* `#pragma omp for` inside a region; every member calls this. GCC lowers `parallel for
 * schedule(dynamic)` this way too, so the region's first loop is set up without a barrier: by
 * the member that comes first, while the others wait for it to be ready. A later loop of the
 * same region is set up after a barrier (so that no member is still taking chunks of the loop
 * before, which a `nowait` allows), by member 0, and published by a second barrier. */
static bool loop_start(long start, long end, long incr, long chunk, long *istart, long *iend) {
  nc_team *t = cur_team;
  if (!t) return false;
  if (cur_loops++ == 0) {
    int expect = 0;
    if (atomic_compare_exchange_strong(&t->first_loop, &expect, 1)) {
      loop_init(t, start, end, incr, chunk);
      atomic_store(&t->first_loop, 2);
    } else {
      for (unsigned i = 1; atomic_load(&t->first_loop) != 2; i++) i % 1024 ? cpu_relax() : (void)sched_yield();
    }
  } else {
    barrier();
    if (cur_tid == 0) loop_init(t, start, end, incr, chunk);
    barrier();
  }
  return loop_next(istart, iend);
}

/* ---- the entry points of GCC's OpenMP lowering ------------------------------------------- */

typedef void (*nc_omp_fn)(void *);

OMP_ENTRY void GOMP_parallel(nc_omp_fn fn, void *data, unsigned num_threads, unsigned flags) {
  run_region(fn, data, num_threads, NULL);
}

#define PARALLEL_LOOP(name, chunk_expr)                                                                  \
  OMP_ENTRY void name(nc_omp_fn fn, void *data, unsigned num_threads, long start, long end, long incr,      \
                   long chunk_size, unsigned flags) {                                                    \
    long chunk = (chunk_expr);                                                                           \
    const long loop[4] = {start, end, incr, chunk};                                                      \
    run_region(fn, data, num_threads, loop);                                                             \
  }
/* guided and runtime schedules run as dynamic ones; runtime in chunks of about 1/(4n) of the
 * loop. */
#define RUNTIME_CHUNK (((end - start) / (incr ? incr : 1)) / (4 * (long)nc_get_num_threads()) + 1)
PARALLEL_LOOP(GOMP_parallel_loop_dynamic, chunk_size)
PARALLEL_LOOP(GOMP_parallel_loop_nonmonotonic_dynamic, chunk_size)
PARALLEL_LOOP(GOMP_parallel_loop_guided, chunk_size)
PARALLEL_LOOP(GOMP_parallel_loop_nonmonotonic_guided, chunk_size)

#define PARALLEL_LOOP_RUNTIME(name)                                                                      \
  OMP_ENTRY void name(nc_omp_fn fn, void *data, unsigned num_threads, long start, long end, long incr,      \
                   unsigned flags) {                                                                     \
    const long loop[4] = {start, end, incr, RUNTIME_CHUNK};                                              \
    run_region(fn, data, num_threads, loop);                                                             \
  }
PARALLEL_LOOP_RUNTIME(GOMP_parallel_loop_runtime)
PARALLEL_LOOP_RUNTIME(GOMP_parallel_loop_nonmonotonic_runtime)
PARALLEL_LOOP_RUNTIME(GOMP_parallel_loop_maybe_nonmonotonic_runtime)

#define LOOP_START(name)                                                                                 \
  OMP_ENTRY bool name(long start, long end, long incr, long chunk_size, long *istart, long *iend) {         \
    return loop_start(start, end, incr, chunk_size, istart, iend);                                       \
  }
LOOP_START(GOMP_loop_dynamic_start)
LOOP_START(GOMP_loop_nonmonotonic_dynamic_start)
LOOP_START(GOMP_loop_guided_start)
LOOP_START(GOMP_loop_nonmonotonic_guided_start)

#define LOOP_START_RUNTIME(name)                                                                         \
  OMP_ENTRY bool name(long start, long end, long incr, long *istart, long *iend) {                          \
    return loop_start(start, end, incr, RUNTIME_CHUNK, istart, iend);                                    \
  }
LOOP_START_RUNTIME(GOMP_loop_runtime_start)
LOOP_START_RUNTIME(GOMP_loop_nonmonotonic_runtime_start)
LOOP_START_RUNTIME(GOMP_loop_maybe_nonmonotonic_runtime_start)

#define LOOP_NEXT(name) \
  OMP_ENTRY bool name(long *istart, long *iend) { return loop_next(istart, iend); }
LOOP_NEXT(GOMP_loop_dynamic_next)
LOOP_NEXT(GOMP_loop_nonmonotonic_dynamic_next)
LOOP_NEXT(GOMP_loop_guided_next)
LOOP_NEXT(GOMP_loop_nonmonotonic_guided_next)
LOOP_NEXT(GOMP_loop_runtime_next)
LOOP_NEXT(GOMP_loop_nonmonotonic_runtime_next)
LOOP_NEXT(GOMP_loop_maybe_nonmonotonic_runtime_next)

OMP_ENTRY void GOMP_loop_end(void) { barrier(); }
OMP_ENTRY void GOMP_loop_end_nowait(void) {}
OMP_ENTRY void GOMP_barrier(void) { barrier(); }

OMP_ENTRY bool GOMP_single_start(void) {
  nc_team *t = cur_team;
  if (!t || t->nthreads <= 1) return true;
  unsigned mine = cur_single++;
  return atomic_compare_exchange_strong(&t->single_seq, &mine, mine + 1);
}

/* atomic and critical sections: a process-wide lock each (they guard short updates; named
 * critical sections share one). */
OMP_ENTRY void GOMP_atomic_start(void) { pthread_mutex_lock(&atomic_lock); }
OMP_ENTRY void GOMP_atomic_end(void) { pthread_mutex_unlock(&atomic_lock); }
OMP_ENTRY void GOMP_critical_start(void) { pthread_mutex_lock(&critical_lock); }
OMP_ENTRY void GOMP_critical_end(void) { pthread_mutex_unlock(&critical_lock); }
OMP_ENTRY void GOMP_critical_name_start(void **p) { pthread_mutex_lock(&critical_lock); }
OMP_ENTRY void GOMP_critical_name_end(void **p) { pthread_mutex_unlock(&critical_lock); }

OMP_ENTRY int omp_get_thread_num(void) { return cur_team ? cur_tid : 0; }
OMP_ENTRY int omp_get_num_threads(void) { return cur_team ? cur_team->nthreads : 1; }
OMP_ENTRY int omp_get_max_threads(void) { return cur_team ? 1 : nc_get_num_threads(); }
OMP_ENTRY int omp_in_parallel(void) { return cur_team && cur_team->nthreads > 1; }
OMP_ENTRY void omp_set_num_threads(int n) { (void)nc_set_num_threads(n < 1 ? 1 : n); }
OMP_ENTRY double omp_get_wtime(void) { return (double)now_ns() * 1e-9; }
