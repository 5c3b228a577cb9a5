/* Several lua_States in one process are independent: each has its own default device and
 * random generator, closing one leaves the others working, tensors can be handed between
 * them through the C API, and states can run on separate threads at the same time. */
#include <lauxlib.h>
#include <lualib.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "netcl_lua.h"

static int failures;
#define CHECK(cond, ...)                                    \
  do {                                                      \
    if (!(cond)) {                                          \
      fprintf(stderr, "%s:%d: FAIL: ", __FILE__, __LINE__); \
      fprintf(stderr, __VA_ARGS__);                         \
      fputc('\n', stderr);                                  \
      failures++;                                           \
    }                                                       \
  } while (0)

static lua_State *new_state(void) {
  lua_State *L = luaL_newstate();
  if (!L) {
    fprintf(stderr, "cannot create a Lua state\n");
    exit(1);
  }
  luaL_openlibs(L);
  netcl_lua_openlibs(L);
  return L;
}

static int traceback(lua_State *L) {
  luaL_traceback(L, L, lua_tostring(L, 1), 1);
  return 1;
}

/* Runs code in L; returns its first result as a new string (caller frees), or exits. */
static char *eval(lua_State *L, const char *code) {
  lua_pushcfunction(L, traceback);
  if (luaL_loadstring(L, code) != LUA_OK || lua_pcall(L, 0, 1, -2) != LUA_OK) {
    fprintf(stderr, "error in state %p running\n  %s\n%s\n", (void *)L, code, lua_tostring(L, -1));
    exit(1);
  }
  const char *s = lua_tostring(L, -1);
  char *r = strdup(s ? s : "");
  lua_pop(L, 2);
  return r;
}

static void set_up(lua_State *L, const char *device, int seed) {
  char code[256];
  snprintf(code, sizeof code,
           "nc = require 'netcl'; nc.set_default_device(%s); nc.manual_seed(%d)"
           "; sample = function() return table.concat(nc.randn({6}):tolist(), ' ') end",
           device, seed);
  free(eval(L, code));
}

/* The draws a fresh state gives for (device, seed): what an undisturbed state must match. */
static void reference(const char *device, int seed, int n, char **out) {
  lua_State *L = new_state();
  set_up(L, device, seed);
  for (int i = 0; i < n; i++) out[i] = eval(L, "return sample()");
  lua_close(L);
}

static int has_opencl(void) {
  for (int i = 0; i < nc_device_count(); i++)
    if (nc_device_info_of(nc_device_get(i))->kind == NC_DEVICE_OPENCL) return 1;
  return 0;
}

static void test_interleaved(const char *dev_b) {
  char *ref_a[3], *ref_b[2];
  reference("'cpu'", 1, 3, ref_a);
  reference(dev_b, 2, 2, ref_b);

  lua_State *A = new_state(), *B = new_state();
  set_up(A, "'cpu'", 1);
  set_up(B, dev_b, 2);
  char *a1 = eval(A, "return sample()");
  char *b1 = eval(B, "return sample()");
  char *a2 = eval(A, "return sample()");
  char *b2 = eval(B, "return sample()");
  CHECK(strcmp(a1, ref_a[0]) == 0 && strcmp(a2, ref_a[1]) == 0,
        "state A's draws changed when B drew: %s / %s", a1, ref_a[0]);
  CHECK(strcmp(b1, ref_b[0]) == 0 && strcmp(b2, ref_b[1]) == 0,
        "state B's draws changed when A drew: %s / %s", b1, ref_b[0]);
  CHECK(strcmp(a1, b1) != 0, "different seeds gave the same numbers");

  /* default devices stay per state */
  char *da = eval(A, "return nc.default_device().spec");
  char *db = eval(B, "return nc.default_device().spec");
  CHECK(strcmp(da, "cpu") == 0, "A's default device is %s", da);
  if (strcmp(dev_b, "'opencl'") == 0)
    CHECK(strncmp(db, "opencl:", 7) == 0, "B's default device is %s", db);
  else
    CHECK(strcmp(db, "cpu") == 0, "B's default device is %s", db);

  /* a tensor handed from A to B through the C API is shared, not copied */
  free(eval(A, "shared = nc.zeros({2, 2}, {device = 'cpu'})"));
  lua_getglobal(A, "shared");
  nc_tensor *t = netcl_lua_checktensor(A, -1);
  netcl_lua_pushtensor(B, t);
  lua_setglobal(B, "from_a");
  lua_pop(A, 1);
  free(eval(B, "from_a:fill_(7)"));
  char *seen = eval(A, "return tostring(shared[1][1]:item())");
  CHECK(strcmp(seen, "7.0") == 0, "A does not see B's write to the shared tensor: %s", seen);

  /* closing A leaves B (and the tensor B shares) working */
  lua_close(A);
  char *after = eval(B, "collectgarbage(); return from_a[2][2]:item() .. ' ' .. #sample()");
  CHECK(strncmp(after, "7.0 ", 4) == 0, "B broke after A closed: %s", after);
  char *b3 = eval(B, "nc.manual_seed(2); return sample()");
  CHECK(strcmp(b3, ref_b[0]) == 0, "B's generator after reseeding: %s", b3);
  lua_close(B);

  free(a1), free(a2), free(b1), free(b2), free(b3), free(da), free(db), free(seen), free(after);
  for (int i = 0; i < 3; i++) free(ref_a[i]);
  for (int i = 0; i < 2; i++) free(ref_b[i]);
}

/* Two states on two threads at once; each must produce what it produces alone. */
enum { ROUNDS = 40 };
typedef struct {
  const char *device;
  int seed;
  char *draws[ROUNDS];
} job;

static void *run_job(void *p) {
  job *j = p;
  lua_State *L = new_state();
  set_up(L, j->device, j->seed);
  for (int i = 0; i < ROUNDS; i++)
    j->draws[i] = eval(L,
                       "local t = nc.randn({64, 64}); t = t:transpose(1, 2):contiguous(); "
                       "return sample() .. ' ' .. t[3][5]:item()");
  lua_close(L);
  return NULL;
}

static void test_threads(const char *dev_b) {
  job solo[2] = {{"'cpu'", 11, {0}}, {dev_b, 12, {0}}};
  job both[2] = {{"'cpu'", 11, {0}}, {dev_b, 12, {0}}};
  run_job(&solo[0]);
  run_job(&solo[1]);
  pthread_t th[2];
  for (int i = 0; i < 2; i++) pthread_create(&th[i], NULL, run_job, &both[i]);
  for (int i = 0; i < 2; i++) pthread_join(th[i], NULL);
  for (int k = 0; k < 2; k++)
    for (int i = 0; i < ROUNDS; i++) {
      CHECK(strcmp(solo[k].draws[i], both[k].draws[i]) == 0, "thread %d round %d: %s vs %s", k, i,
            both[k].draws[i], solo[k].draws[i]);
      free(solo[k].draws[i]);
      free(both[k].draws[i]);
    }
}

/* A host may push a tensor before any script loaded netcl. */
static void test_push_before_require(void) {
  lua_State *L = new_state();
  nc_device *cpu;
  nc_tensor *t;
  int64_t shape[1] = {5};
  if (nc_device_find("cpu", &cpu) != NC_OK || nc_tensor_empty(cpu, NC_FLOAT32, 1, shape, 0, &t) != NC_OK ||
      nc_fill(t, 1.5) != NC_OK) {
    fprintf(stderr, "%s\n", nc_last_error());
    exit(1);
  }
  netcl_lua_pushtensor(L, t);
  lua_setglobal(L, "early");
  char *s = eval(
      L, "return early:numel() .. ' ' .. early[5]:item() .. ' ' .. tostring(require('netcl').zeros(1).ndim)");
  CHECK(strcmp(s, "5 1.5 1") == 0, "a tensor pushed before require: %s", s);
  free(s);
  lua_close(L);
  nc_tensor_release(t);
}

int main(void) {
  test_push_before_require();
  const char *dev_b = has_opencl() ? "'opencl'" : "'cpu'";
  printf("second state's device: %s%s\n", dev_b,
         has_opencl() ? "" : " (no OpenCL device: both states use the CPU backend)");
  test_interleaved(dev_b);
  test_threads(dev_b);
  if (failures) return 1;
  puts("ok");
  return 0;
}
