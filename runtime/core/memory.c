/* BufferPool and PersistentBufferPool (see DESIGN.md "Memory"). Blocks are cached in size
 * classes of four steps per power of two (at most 25% waste); an allocation that the driver
 * refuses, or that would exceed the device's memory or its memory limit (nc_memory_limit_set,
 * NETCL_MEMORY_LIMIT_MB), frees the cache and retries, then runs the memory-pressure hooks
 * registered on this thread (a full Lua collection), frees the cache again and retries once more
 * before failing with NC_ERR_OOM. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "pool.h"

#define NC_POOL_MIN_CLASS 256u
#define NC_POOL_BINS 256

struct nc_pool {
  nc_device *dev;
  bool caching;
  pthread_mutex_t lock;
  nc_block *bins[NC_POOL_BINS];
  uint64_t in_use, cached, peak, hits, misses, cache_limit;
};

static int size_class(size_t n, size_t *cls) {
  if (n <= NC_POOL_MIN_CLASS) {
    *cls = NC_POOL_MIN_CLASS;
    return 0;
  }
  int k = 63 - __builtin_clzll((unsigned long long)(n - 1)); /* 2^k < n <= 2^(k+1) */
  size_t base = (size_t)1 << k, step = base / 4;
  size_t sub = (n - base + step - 1) / step; /* 1..4 */
  *cls = base + sub * step;
  return (k - 8) * 4 + (int)sub;
}

nc_status nc_pool_new(nc_device *dev, bool caching, struct nc_pool **out) {
  struct nc_pool *p = calloc(1, sizeof *p);
  if (!p) return nc_error(NC_ERR_OOM, "out of host memory creating a buffer pool");
  p->dev = dev;
  p->caching = caching;
  pthread_mutex_init(&p->lock, NULL);
  /* The CPU backend gives cached memory back beyond a quarter of RAM; device pools keep all of
   * it until pressure (as a GPU caching allocator does). */
  p->cache_limit = dev->info.kind == NC_DEVICE_CPU ? dev->info.memory / 4 : UINT64_MAX;
  const char *env = getenv("NETCL_POOL_CACHE_MB");
  if (env && *env) p->cache_limit = strtoull(env, NULL, 10) << 20;
  env = getenv("NETCL_MEMORY_LIMIT_MB");
  if (caching && env && *env) {
    char *end;
    errno = 0;
    unsigned long long mb = strtoull(env, &end, 10);
    if (*end || errno || env[0] == '-' || mb > (UINT64_MAX >> 20)) {
      pthread_mutex_destroy(&p->lock);
      free(p);
      return nc_error(NC_ERR_ARG, "NETCL_MEMORY_LIMIT_MB must be a whole number of MiB (0: no limit), not '%s'", env);
    }
    nc_memory_limit_set(dev, (uint64_t)mb << 20);
  }
  *out = p;
  return NC_OK;
}

static void drop_cache(struct nc_pool *p) {
  nc_block *freed = NULL;
  pthread_mutex_lock(&p->lock);
  for (int i = 0; i < NC_POOL_BINS; i++) {
    while (p->bins[i]) {
      nc_block *b = p->bins[i];
      p->bins[i] = b->next;
      b->next = freed;
      freed = b;
    }
  }
  p->cached = 0;
  pthread_mutex_unlock(&p->lock);
  while (freed) {
    nc_block *b = freed;
    freed = b->next;
    p->dev->iface->release(p->dev, b->handle);
    free(b);
  }
}

void nc_memory_empty_cache(nc_device *dev) {
  if (dev->pool) drop_cache(dev->pool);
}

void nc_memory_limit_set(nc_device *dev, uint64_t bytes) { __atomic_store_n(&dev->memory_limit, bytes, __ATOMIC_RELAXED); }

uint64_t nc_memory_limit_get(nc_device *dev) { return __atomic_load_n(&dev->memory_limit, __ATOMIC_RELAXED); }

/* ---- pressure hooks, per thread (a hook runs only on the thread that registered it, since a
 * Lua state must not be touched from another thread) ---------------------------------------- */
#define NC_MAX_HOOKS 64
static struct { nc_pressure_fn fn; void *ud; pthread_t thread; } hooks[NC_MAX_HOOKS];
static int n_hooks;
static pthread_mutex_t hooks_lock = PTHREAD_MUTEX_INITIALIZER;

nc_status nc_pressure_register(nc_pressure_fn fn, void *ud) {
  pthread_mutex_lock(&hooks_lock);
  if (n_hooks == NC_MAX_HOOKS) {
    pthread_mutex_unlock(&hooks_lock);
    return nc_error(NC_ERR_STATE, "too many memory-pressure hooks (at most %d)", NC_MAX_HOOKS);
  }
  hooks[n_hooks].fn = fn;
  hooks[n_hooks].ud = ud;
  hooks[n_hooks].thread = pthread_self();
  n_hooks++;
  pthread_mutex_unlock(&hooks_lock);
  return NC_OK;
}

void nc_pressure_unregister(nc_pressure_fn fn, void *ud) {
  pthread_mutex_lock(&hooks_lock);
  for (int i = 0; i < n_hooks; i++)
    if (hooks[i].fn == fn && hooks[i].ud == ud) {
      hooks[i] = hooks[--n_hooks];
      break;
    }
  pthread_mutex_unlock(&hooks_lock);
}

static void run_pressure_hooks(void) {
  nc_pressure_fn fns[NC_MAX_HOOKS];
  void *uds[NC_MAX_HOOKS];
  int n = 0;
  pthread_mutex_lock(&hooks_lock);
  for (int i = 0; i < n_hooks; i++)
    if (pthread_equal(hooks[i].thread, pthread_self())) {
      fns[n] = hooks[i].fn;
      uds[n++] = hooks[i].ud;
    }
  pthread_mutex_unlock(&hooks_lock);
  for (int i = 0; i < n; i++) fns[i](uds[i]);
}

/* ---- allocation ---------------------------------------------------------------------------- */
static uint64_t held(struct nc_pool *p) {
  if (!p) return 0;
  pthread_mutex_lock(&p->lock);
  uint64_t n = p->in_use + p->cached;
  pthread_mutex_unlock(&p->lock);
  return n;
}

static nc_status raw_alloc(struct nc_pool *p, size_t cls, void **handle) {
  nc_device *dev = p->dev;
  const nc_device_info *info = &dev->info;
  if (info->max_alloc && cls > info->max_alloc)
    return nc_error(NC_ERR_OOM, "a single buffer of %zu bytes exceeds the device's limit of %llu bytes",
                    cls, (unsigned long long)info->max_alloc);
  /* what the device's two pools hold (the pools are not created at once: either may be NULL) */
  uint64_t total = held(dev->pool) + held(dev->persistent), limit = nc_memory_limit_get(dev);
  if (limit && total + cls > limit)
    return nc_error(NC_ERR_OOM, "the device's memory limit of %llu bytes (NETCL_MEMORY_LIMIT_MB, set_memory_limit) "
                    "would be exceeded: %llu bytes held", (unsigned long long)limit, (unsigned long long)total);
  if (info->memory && total + cls > info->memory)
    return nc_error(NC_ERR_OOM, "device memory exhausted: %llu bytes held of %llu", (unsigned long long)total,
                    (unsigned long long)info->memory);
  return dev->iface->alloc(dev, cls, handle);
}

nc_status nc_pool_alloc(struct nc_pool *p, size_t nbytes, nc_block **out) {
  size_t cls = nbytes;
  int bin = -1;
  if (p->caching) {
    bin = size_class(nbytes, &cls);
    pthread_mutex_lock(&p->lock);
    nc_block *b = p->bins[bin];
    if (b) {
      p->bins[bin] = b->next;
      p->cached -= b->size;
      p->in_use += b->size;
      if (p->in_use > p->peak) p->peak = p->in_use;
      p->hits++;
      pthread_mutex_unlock(&p->lock);
      b->next = NULL;
      *out = b;
      return NC_OK;
    }
    p->misses++;
    pthread_mutex_unlock(&p->lock);
  }
  nc_block *b = calloc(1, sizeof *b);
  if (!b) return nc_error(NC_ERR_OOM, "out of host memory for a block header");
  nc_status s = raw_alloc(p, cls, &b->handle);
  if (s == NC_ERR_OOM) { /* the cache first (cheap), then the collector (a full Lua collection) */
    nc_memory_empty_cache(p->dev);
    s = raw_alloc(p, cls, &b->handle);
  }
  if (s == NC_ERR_OOM) {
    run_pressure_hooks(); /* may free tensors, whose blocks land in the cache: drop it again */
    nc_memory_empty_cache(p->dev);
    s = raw_alloc(p, cls, &b->handle);
  }
  if (s != NC_OK) {
    free(b);
    if (s != NC_ERR_OOM) return s;
    /* the cause is in the error buffer that nc_error writes: copy it out first */
    char cause[512];
    snprintf(cause, sizeof cause, "%s", nc_last_error());
    pthread_mutex_lock(&p->lock);
    unsigned long long in_use = p->in_use;
    pthread_mutex_unlock(&p->lock);
    return nc_error(NC_ERR_OOM, "out of memory on %s: requested %zu bytes with %llu bytes in use (%s)",
                    p->dev->info.name, nbytes, in_use, cause);
  }
  b->size = cls;
  b->pool = p;
  b->host = p->dev->iface->host_ptr(p->dev, b->handle);
  pthread_mutex_lock(&p->lock);
  p->in_use += cls;
  if (p->in_use > p->peak) p->peak = p->in_use;
  pthread_mutex_unlock(&p->lock);
  *out = b;
  return NC_OK;
}

void nc_pool_free(nc_block *b) {
  struct nc_pool *p = b->pool;
  int bin = -1;
  size_t cls;
  if (p->caching) bin = size_class(b->size, &cls);
  pthread_mutex_lock(&p->lock);
  p->in_use -= b->size;
  if (bin >= 0 && p->cached + b->size <= p->cache_limit) {
    b->next = p->bins[bin];
    p->bins[bin] = b;
    p->cached += b->size;
    b = NULL;
  }
  pthread_mutex_unlock(&p->lock);
  if (b) {
    p->dev->iface->release(p->dev, b->handle);
    free(b);
  }
}

nc_status nc_memory_stats_get(nc_device *dev, nc_memory_stats *st) {
  memset(st, 0, sizeof *st);
  struct nc_pool *p = dev->pool;
  pthread_mutex_lock(&p->lock);
  st->in_use = p->in_use;
  st->cached = p->cached;
  st->peak = p->peak;
  st->hits = p->hits;
  st->misses = p->misses;
  pthread_mutex_unlock(&p->lock);
  pthread_mutex_lock(&dev->persistent->lock);
  st->persistent_in_use = dev->persistent->in_use;
  pthread_mutex_unlock(&dev->persistent->lock);
  st->host_reads = atomic_load(&dev->host_reads);
  st->syncs = atomic_load(&dev->syncs);
  st->async_reads = atomic_load(&dev->async_reads);
  if (dev->iface->stats) dev->iface->stats(dev, st);
  return NC_OK;
}
