/* Program cache. A program is the op table's op codes, kernels/common.cl and kernels/<name>.cl, built with
 * options. Key: xxh64 over (sources, options, device name, driver version, platform, library
 * version). Built programs stay in memory for the process and their binaries go to
 * $NETCL_CACHE_DIR (default $XDG_CACHE_HOME/netcl or ~/.cache/netcl), written atomically
 * (temporary file, fsync, rename). A cache file that is short, corrupt or for another key is
 * ignored and the program is rebuilt from source.
 *
 * Launches do not come here: they take kernel handles from the device's table by (slot, dtype)
 * (cl_backend.h); only a handle's first resolution builds a name and looks its program up. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>
#include "core/check.h"
#include "cl_backend.h"
#include "netcl/optable.h"

typedef struct {
  const char *name;
  const char *data;
  size_t size;
} nc_embedded_file;
extern const nc_embedded_file nc_embedded_kernels[];

static const char CACHE_MAGIC[8] = {'N', 'C', 'L', 'B', 'I', 'N', '0', '1'};

/* Op codes for kernels, from the op table: enum { NC_OP_ABS, NC_OP_NEG, ... }. */
static const char OP_ENUM[] = "enum nc_op {\n"
#define NC_OP_ENUM_SRC_(id, name, family, arity, dtypes, result, entry, grad, kernel, cpu) "  NC_OP_" #id ",\n"
    NC_OPS(NC_OP_ENUM_SRC_)
#undef NC_OP_ENUM_SRC_
        "  NC_OP_COUNT\n};\n";

/* NETCL_FAULT=prog1,prog2 builds those programs with NC_FAULT defined: the deliberately wrong
 * kernel variants that the parity harness's self-test must catch. Test use only. */
static bool listed(const char *var, const char *program) {
  const char *list = getenv(var);
  size_t n = strlen(program);
  for (const char *p = list; p && *p; p += strcspn(p, ",") + (p[strcspn(p, ",")] ? 1 : 0))
    if (strncmp(p, program, n) == 0 && (p[n] == ',' || p[n] == 0)) return true;
  return false;
}

static bool fault_injected(const char *program) { return listed("NETCL_FAULT", program); }

/* NETCL_FAULT_BUILD=prog1,prog2 appends a line that is not OpenCL C to those programs' sources,
 * so that their build fails: the test of how a kernel build failure is reported. Test use only. */
static const char FAULT_BUILD_SRC[] = "\nthis line is not OpenCL C (NETCL_FAULT_BUILD)\n";
static bool build_fault_injected(const char *program) { return listed("NETCL_FAULT_BUILD", program); }

static const nc_embedded_file *find_source(const char *file) {
  for (const nc_embedded_file *f = nc_embedded_kernels; f->name; f++)
    if (strcmp(f->name, file) == 0) return f;
  return NULL;
}

const char *nc_cl_source(const char *file, size_t *len) {
  const nc_embedded_file *f = find_source(file);
  if (f && len) *len = f->size;
  return f ? f->data : NULL;
}

nc_status nc_cl_cache_dir(char *buf, size_t n) {
  const char *env = getenv("NETCL_CACHE_DIR");
  if (env && *env) snprintf(buf, n, "%s", env);
  else if ((env = getenv("XDG_CACHE_HOME")) && *env) snprintf(buf, n, "%s/netcl", env);
  else if ((env = getenv("HOME")) && *env) snprintf(buf, n, "%s/.cache/netcl", env);
  else return NC_ERR_IO;
  /* mkdir -p */
  for (char *p = buf + 1; *p; p++) {
    if (*p != '/') continue;
    *p = 0;
    mkdir(buf, 0755);
    *p = '/';
  }
  if (mkdir(buf, 0755) != 0 && errno != EEXIST) return NC_ERR_IO;
  return NC_OK;
}

static bool cache_path(uint64_t key, char *path, size_t n) {
  char dir[900];
  if (nc_cl_cache_dir(dir, sizeof dir) != NC_OK) return false;
  snprintf(path, n, "%s/%016llx.clbin", dir, (unsigned long long)key);
  return true;
}

/* Reads a cached binary for key; NULL if absent or invalid. */
static unsigned char *cache_read(uint64_t key, size_t *len) {
  char path[1024];
  if (!cache_path(key, path, sizeof path)) return NULL;
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  char magic[8];
  uint64_t hdr[3]; /* key, size, checksum */
  unsigned char *bin = NULL;
  if (fread(magic, 1, 8, f) == 8 && memcmp(magic, CACHE_MAGIC, 8) == 0 && fread(hdr, sizeof hdr, 1, f) == 1 &&
      hdr[0] == key && hdr[1] > 0 && hdr[1] < ((uint64_t)1 << 31) && (bin = malloc(hdr[1]))) {
    if (fread(bin, 1, hdr[1], f) != hdr[1] || fgetc(f) != EOF || XXH64(bin, hdr[1], 0) != hdr[2]) {
      free(bin);
      bin = NULL;
    } else {
      *len = hdr[1];
    }
  }
  fclose(f);
  return bin;
}

static void cache_write(uint64_t key, const unsigned char *bin, size_t len) {
  char path[1024], tmp[1100];
  if (!cache_path(key, path, sizeof path)) return;
  snprintf(tmp, sizeof tmp, "%s.XXXXXX", path);
  int fd = mkstemp(tmp);
  if (fd < 0) return;
  uint64_t hdr[3] = {key, len, XXH64(bin, len, 0)};
  bool ok = write(fd, CACHE_MAGIC, 8) == 8 && write(fd, hdr, sizeof hdr) == (ssize_t)sizeof hdr &&
            write(fd, bin, len) == (ssize_t)len && fsync(fd) == 0;
  ok = close(fd) == 0 && ok;
  if (!ok || rename(tmp, path) != 0) unlink(tmp);
}

/* Writes the program's binary for cd's device to the cache. */
static void cache_binary(nc_cl_device *cd, cl_program prog, uint64_t key) {
  size_t len = 0;
  unsigned char *bin = nc_cl_program_binary(cd, prog, &len);
  if (bin) cache_write(key, bin, len);
  free(bin);
}

static nc_status build_log(nc_device *dev, nc_cl_device *cd, cl_program prog, const char *file,
                           const char *options, cl_int err) {
  size_t n = 0;
  nc_cl.clGetProgramBuildInfo(prog, cd->id, CL_PROGRAM_BUILD_LOG, 0, NULL, &n);
  char *log = malloc(n + 1);
  if (log) {
    log[0] = 0;
    nc_cl.clGetProgramBuildInfo(prog, cd->id, CL_PROGRAM_BUILD_LOG, n, log, NULL);
    log[n] = 0;
  }
  nc_status s = nc_error(NC_ERR_DEVICE, "building kernel program %s (options: %s) for %s failed: %s (%d)\n%s", file,
                         options, dev->info.name, nc_cl_strerror(err), err, log ? log : "(no build log)");
  free(log);
  return s;
}

/* The cache entry of a program, built or loaded on first request. */
static nc_status build_program(nc_device *dev, nc_cl_device *cd, const char *program, const char *options,
                               nc_cl_program **out) {
  /* "a+b" builds common.cl, a.cl and b.cl as one program (conv.cl uses gemm.cl's engine). */
  enum { MAX_PARTS = 4 };
  const nc_embedded_file *parts[MAX_PARTS + 1];
  int nparts = 0;
  char file[128];
  parts[nparts++] = find_source("common.cl");
  if (!parts[0]) return nc_error(NC_ERR_ARG, "no kernel source common.cl in this build");
  for (const char *p = program; *p && nparts <= MAX_PARTS;) {
    size_t len = strcspn(p, "+");
    snprintf(file, sizeof file, "%.*s.cl", (int)len, p);
    if (!(parts[nparts++] = find_source(file))) return nc_error(NC_ERR_ARG, "no kernel source %s in this build", file);
    p += len;
    if (*p == '+') p++;
  }
  snprintf(file, sizeof file, "%s.cl", program);
  char opts[1024];
  snprintf(opts, sizeof opts, "-cl-std=CL1.2 %s%s%s", dev->info.fp64 ? "-DNC_FP64=1 " : "",
           fault_injected(program) ? "-DNC_FAULT=1 " : "", options ? options : "");

  XXH64_state_t *h = XXH64_createState();
  if (!h) return nc_error(NC_ERR_OOM, "out of host memory hashing a kernel");
  XXH64_reset(h, 0);
  XXH64_update(h, OP_ENUM, sizeof OP_ENUM - 1);
  for (int i = 0; i < nparts; i++) XXH64_update(h, parts[i]->data, parts[i]->size);
  const bool break_build = build_fault_injected(program);
  if (break_build) XXH64_update(h, FAULT_BUILD_SRC, sizeof FAULT_BUILD_SRC - 1);
  XXH64_update(h, opts, strlen(opts) + 1);
  XXH64_update(h, dev->info.name, strlen(dev->info.name) + 1);
  XXH64_update(h, dev->info.driver_version, strlen(dev->info.driver_version) + 1);
  XXH64_update(h, cd->platform_name, strlen(cd->platform_name) + 1);
  XXH64_update(h, NC_VERSION_STRING, sizeof NC_VERSION_STRING);
  nc_cl_ptx_rules_hash(h);
  uint64_t key = XXH64_digest(h);
  XXH64_freeState(h);
  for (nc_cl_program *p = cd->programs; p; p = p->next)
    if (p->key == key) return *out = p, NC_OK;

  cl_int err;
  cl_program prog = NULL;
  size_t blen = 0;
  unsigned char *bin = cache_read(key, &blen);
  if (bin) {
    cl_int bstatus;
    const unsigned char *bins[1] = {bin};
    prog = nc_cl.clCreateProgramWithBinary(cd->ctx, 1, &cd->id, &blen, bins, &bstatus, &err);
    if (err == CL_SUCCESS && bstatus == CL_SUCCESS) err = nc_cl.clBuildProgram(prog, 1, &cd->id, opts, NULL, NULL);
    else if (err == CL_SUCCESS) err = bstatus;
    free(bin);
    if (err == CL_SUCCESS) {
      cd->programs_loaded++;
    } else {
      if (prog) nc_cl.clReleaseProgram(prog);
      prog = NULL; /* stale or corrupt: rebuild from source below */
    }
  }
  if (!prog) {
    const char *srcs[MAX_PARTS + 3] = {OP_ENUM};
    size_t lens[MAX_PARTS + 3] = {sizeof OP_ENUM - 1};
    cl_uint nsrcs = 1;
    for (int i = 0; i < nparts; i++, nsrcs++) srcs[nsrcs] = parts[i]->data, lens[nsrcs] = parts[i]->size;
    if (break_build) srcs[nsrcs] = FAULT_BUILD_SRC, lens[nsrcs++] = sizeof FAULT_BUILD_SRC - 1;
    prog = nc_cl.clCreateProgramWithSource(cd->ctx, nsrcs, srcs, lens, &err);
    if (err != CL_SUCCESS) return nc_cl_fail(err, "creating a program", dev);
    err = nc_cl.clBuildProgram(prog, 1, &cd->id, opts, NULL, NULL);
    if (err != CL_SUCCESS) {
      nc_status s = build_log(dev, cd, prog, file, opts, err);
      nc_cl.clReleaseProgram(prog);
      return s;
    }
    cd->programs_built++;
    prog = nc_cl_ptx_directives(cd, prog, opts);
    cache_binary(cd, prog, key);
  }
  nc_cl_program *entry = calloc(1, sizeof *entry);
  if (!entry) {
    nc_cl.clReleaseProgram(prog);
    return nc_error(NC_ERR_OOM, "out of host memory");
  }
  entry->key = key;
  entry->program = prog;
  entry->next = cd->programs;
  cd->programs = entry;
  *out = entry;
  return NC_OK;
}

/* Kernel `name` of kernels/<program>.cl (common.cl in front, built with `options`; "a+b" builds
 * a.cl and b.cl together), created once per program; programs_lock held. */
static nc_status kernel_locked(nc_device *dev, nc_cl_device *cd, const char *program, const char *options,
                               const char *name, cl_kernel *out) {
  nc_cl_program *entry;
  NC_TRY(build_program(dev, cd, program, options, &entry));
  for (nc_cl_kernel_entry *k = entry->kernels; k; k = k->next)
    if (strcmp(k->name, name) == 0) return *out = k->kernel, NC_OK;
  cl_int err;
  cl_kernel k = nc_cl.clCreateKernel(entry->program, name, &err);
  if (err != CL_SUCCESS)
    return nc_error(NC_ERR_DEVICE, "kernel %s not found in program %s.cl: %s", name, program, nc_cl_strerror(err));
  nc_cl_kernel_entry *ke = calloc(1, sizeof *ke);
  if (!ke) {
    nc_cl.clReleaseKernel(k);
    return nc_error(NC_ERR_OOM, "out of host memory");
  }
  snprintf(ke->name, sizeof ke->name, "%s", name);
  ke->kernel = k;
  ke->next = entry->kernels;
  entry->kernels = ke;
  *out = k;
  return NC_OK;
}

/* The options of the REAL slots: "" for float32, so that --warmup's default build is the float32
 * variant. */
static const char *real_options(nc_dtype dt) { return dt == NC_FLOAT64 ? "-DREAL=double -DNC_REAL_DOUBLE=1" : ""; }

/* ---- kernel handles -------------------------------------------------------------------------- */
enum { TYPED, BYTES, COPY, REAL, REAL16, TILED };

/* The elementwise kernels of the storage dtypes (bfloat16, float16) are a build of their own,
 * after half.cl's conversions (kernels/elementwise.cl, NC_EW_STORAGE): programs that never see
 * those dtypes don't build them. */
#define EW_STORAGE_PROGRAM "half+elementwise"
#define EW_STORAGE_OPTIONS "-DNC_EW_STORAGE=1 -DNC_HALF_CONVERSIONS_ONLY=1"

/* A storage dtype's build of a REAL16 slot's program or of an op row's (activation.cl):
 * "half+<program>" with -DNC_STORAGE=<dtype> (and half.cl's conversions only), into prog and
 * opts. Program names are short; nprog holds "half+" and 26 characters of one. */
static void storage_build(const char *program, nc_dtype dt, char *prog, size_t nprog, char *opts,
                          size_t nopts) {
  snprintf(prog, nprog, "half+%.26s", program);
  snprintf(opts, nopts, "-DNC_STORAGE=%s -DNC_HALF_CONVERSIONS_ONLY=1", nc_dtype_name(dt));
}

static const struct {
  const char *program, *name;
  int naming;
} slots[NC_CL_SLOT_COUNT - NC_OP_COUNT] = {
#define NC_CL_SLOT_ROW_(id, program, name, naming) [NC_CL_K_##id - NC_OP_COUNT] = {program, name, naming},
    NC_CL_KERNELS(NC_CL_SLOT_ROW_)
#undef NC_CL_SLOT_ROW_
};

/* The copy slots are indexed by the source dtype. */
_Static_assert(NC_CL_K_COPY_FROM_FLOAT64 - NC_CL_K_COPY_FROM_FLOAT32 == NC_FLOAT64 &&
                   NC_CL_K_COPY_FROM_INT32 - NC_CL_K_COPY_FROM_FLOAT32 == NC_INT32 &&
                   NC_CL_K_COPY_FROM_INT64 - NC_CL_K_COPY_FROM_FLOAT32 == NC_INT64 &&
                   NC_CL_K_COPY_FROM_UINT8 - NC_CL_K_COPY_FROM_FLOAT32 == NC_UINT8 &&
                   NC_CL_K_COPY_FROM_BOOL - NC_CL_K_COPY_FROM_FLOAT32 == NC_BOOL,
               "copy slots follow nc_dtype");
_Static_assert(NC_CL_K_HALF_FROM_FLOAT64 - NC_CL_K_HALF_FROM_FLOAT32 == NC_FLOAT64 &&
                   NC_CL_K_HALF_FROM_BOOL - NC_CL_K_HALF_FROM_FLOAT32 == NC_BOOL &&
                   NC_CL_K_HALF_FROM_BFLOAT16 - NC_CL_K_HALF_FROM_FLOAT32 == NC_BFLOAT16 &&
                   NC_CL_K_HALF_FROM_FLOAT16 - NC_CL_K_HALF_FROM_FLOAT32 == NC_FLOAT16,
               "the storage dtypes' copy slots follow nc_dtype");

/* The handle of (slot, dt) for tiles: the one held if it matches (another thread may have
 * resolved it meanwhile), else a new one, published; programs_lock held. */
static nc_status publish_locked(nc_device *dev, nc_cl_device *cd, int slot, nc_dtype dt, const char *program,
                                const char *opts, const char *name, const int tiles[6], const nc_cl_handle **out) {
  const nc_cl_handle *held = cd->handles[slot][dt];
  if (held && memcmp(held->tiles, tiles, sizeof held->tiles) == 0) return *out = held, NC_OK;
  cl_kernel k = NULL;
  nc_status s = kernel_locked(dev, cd, program, opts, name, &k);
  if (s != NC_OK) return nc_error_prefix(s, "OpenCL kernel %s", name);
  nc_cl_handle *h = calloc(1, sizeof *h);
  if (!h) return nc_error(NC_ERR_OOM, "out of host memory");
  h->kernel = k;
  h->local = nc_cl_kernel_local_size(dev, k);
  memcpy(h->tiles, tiles, sizeof h->tiles);
  /* A handle replaced (a TILED slot's new variant) stays on the list: a launch may hold it. */
  h->next = cd->handle_list;
  cd->handle_list = h;
  __atomic_store_n(&cd->handles[slot][dt], h, __ATOMIC_RELEASE);
  *out = h;
  return NC_OK;
}

nc_status nc_cl_resolve(nc_device *dev, int slot, nc_dtype dt, const char *options, const int tiles[6],
                        const nc_cl_handle **out) {
  if (slot < 0 || slot >= NC_CL_SLOT_COUNT || !nc_dtype_valid(dt))
    return nc_error(NC_ERR_ARG, "no OpenCL kernel slot %d for dtype %d", slot, (int)dt);
  static const int no_tiles[6];
  if (!tiles) tiles = no_tiles;
  const char *program = "elementwise", *opts = "";
  char name[96];
  char prog[32], sopts[96];
  if (slot < NC_OP_COUNT && nc_op_entry((nc_op)slot) == NC_ENTRY_KERNEL) {
    /* an op defined by its op-table row: the row names "<program>.cl:<kernel>" */
    const nc_op_info *o = nc_op_get((nc_op)slot);
    const char *colon = strchr(o->kernel, ':'), *dot = strstr(o->kernel, ".cl:");
    size_t plen = dot ? (size_t)(dot - o->kernel) : 0,
           klen = colon ? strspn(colon + 1, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_") : 0;
    if (!colon || !dot || dot + 3 != colon || !plen || plen >= sizeof prog || !klen || klen >= sizeof name)
      return nc_error(NC_ERR_ARG, "%s: the op table names no kernel (\"%s\"; expected program.cl:kernel)", o->name,
                      o->kernel);
    memcpy(prog, o->kernel, plen);
    prog[plen] = 0;
    memcpy(name, colon + 1, klen);
    name[klen] = 0;
    program = prog;
    opts = real_options(dt);
    if (nc_dtype_is_storage(dt)) { /* a row that reads a storage dtype as it is: relu_backward's y */
      char base[27];
      if (plen >= sizeof base) return nc_error(NC_ERR_ARG, "%s: program name too long", o->name);
      memcpy(base, prog, plen + 1);
      storage_build(base, dt, prog, sizeof prog, sopts, sizeof sopts);
      opts = sopts;
    }
  } else if (slot < NC_OP_COUNT) {
    snprintf(name, sizeof name, "%s_%s", nc_op_get((nc_op)slot)->name, nc_dtype_name(dt));
  } else {
    const int row = slot - NC_OP_COUNT;
    program = slots[row].program;
    switch (slots[row].naming) {
      case TYPED: snprintf(name, sizeof name, "%s_%s", slots[row].name, nc_dtype_name(dt)); break;
      case BYTES: snprintf(name, sizeof name, "%s_%zu", slots[row].name, nc_dtype_size(dt)); break;
      case COPY: snprintf(name, sizeof name, "copy_%s_%s", nc_dtype_name(dt), slots[row].name); break;
      case REAL:
        snprintf(name, sizeof name, "%s", slots[row].name);
        opts = real_options(dt);
        break;
      case REAL16:
        snprintf(name, sizeof name, "%s", slots[row].name);
        opts = real_options(dt);
        if (nc_dtype_is_storage(dt)) {
          storage_build(program, dt, prog, sizeof prog, sopts, sizeof sopts);
          program = prog, opts = sopts;
        }
        break;
      default:
        if (!options) return nc_error(NC_ERR_ARG, "kernel %s needs a variant's build options", slots[row].name);
        snprintf(name, sizeof name, "%s", slots[row].name);
        opts = options;
        break;
    }
  }
  if (strcmp(program, "elementwise") == 0 && nc_dtype_is_storage(dt))
    program = EW_STORAGE_PROGRAM, opts = EW_STORAGE_OPTIONS;
  nc_cl_device *cd;
  NC_TRY(nc_cl_ready(dev, &cd));
  pthread_mutex_lock(&cd->programs_lock);
  nc_status s = publish_locked(dev, cd, slot, dt, program, opts, name, tiles, out);
  pthread_mutex_unlock(&cd->programs_lock);
  return s;
}

bool nc_cl_handle_optional(nc_device *dev, int slot, nc_dtype dt, const char *options, const int tiles[6],
                           bool *capable, const nc_cl_handle **out) {
  if (!__atomic_load_n(capable, __ATOMIC_ACQUIRE)) return false;
  const nc_cl_handle *h = nc_cl_handle_peek(dev, slot, dt);
  if (h) return *out = h, true;
  if (nc_cl_resolve(dev, slot, dt, options, tiles, out) == NC_OK) return true;
  __atomic_store_n(capable, false, __ATOMIC_RELEASE);
  return false;
}

/* The program of an op-table row's kernel ("<program>.cl:<kernel>") into buf, or NULL. */
static const char *op_program(nc_op op, char *buf, size_t n) {
  if (nc_op_entry(op) != NC_ENTRY_KERNEL) return NULL;
  const char *k = nc_op_get(op)->kernel, *dot = strstr(k, ".cl:");
  if (!dot || (size_t)(dot - k) >= n) return NULL;
  memcpy(buf, k, (size_t)(dot - k));
  buf[dot - k] = 0;
  return buf;
}

/* Builds (or loads from the cache) every program the kernel slots and the op table name, with
 * no options: what `netcl-lua --warmup` does. A program made of several files ("mma+gemm_fast")
 * is built as the runtime builds it, since some files need the one before them. */
nc_status nc_cl_build_all(nc_device *dev) {
  nc_cl_device *cd;
  NC_TRY(nc_cl_ready(dev, &cd));
  enum { MAX_PROGRAMS = NC_CL_SLOT_COUNT + 1 };
  char op_names[NC_OP_COUNT][32];
  const char *programs[MAX_PROGRAMS];
  int n = 0;
  programs[n++] = "elementwise"; /* the ops defined by name, not by a kernel row */
  for (int i = 0; i < NC_CL_SLOT_COUNT; i++) {
    const char *p = i < NC_OP_COUNT ? op_program((nc_op)i, op_names[i], sizeof op_names[i]) : slots[i - NC_OP_COUNT].program;
    if (!p) continue;
    int seen = 0;
    for (int j = 0; j < n && !seen; j++) seen = strcmp(programs[j], p) == 0;
    if (!seen && n < MAX_PROGRAMS) programs[n++] = p;
  }
  for (int i = 0; i <= n; i++) { /* the last: the storage dtypes' elementwise build */
    pthread_mutex_lock(&cd->programs_lock);
    nc_cl_program *entry;
    nc_status s = i < n ? build_program(dev, cd, programs[i], "", &entry)
                        : build_program(dev, cd, EW_STORAGE_PROGRAM, EW_STORAGE_OPTIONS, &entry);
    pthread_mutex_unlock(&cd->programs_lock);
    NC_TRY(s);
  }
  /* The storage dtypes' builds of the REAL16 slots' programs and of the programs of the op rows
   * that take those dtypes (KERNEL rows: activation.cl), once per program. */
  const char *done = NULL;
  for (int i = 0; i < NC_CL_SLOT_COUNT; i++) {
    const char *p = NULL;
    if (i < NC_OP_COUNT) {
      if (nc_op_get((nc_op)i)->dtypes & NC_DT_STORAGE)
        p = op_program((nc_op)i, op_names[i], sizeof op_names[i]);
    } else if (slots[i - NC_OP_COUNT].naming == REAL16) {
      p = slots[i - NC_OP_COUNT].program;
    }
    if (!p || (done && strcmp(done, p) == 0)) continue;
    done = p;
    static const nc_dtype storage[2] = {NC_BFLOAT16, NC_FLOAT16};
    for (int k = 0; k < 2; k++) {
      char prog[32], opts[96];
      storage_build(p, storage[k], prog, sizeof prog, opts, sizeof opts);
      pthread_mutex_lock(&cd->programs_lock);
      nc_cl_program *entry;
      nc_status s = build_program(dev, cd, prog, opts, &entry);
      pthread_mutex_unlock(&cd->programs_lock);
      NC_TRY(s);
    }
  }
  return NC_OK;
}
