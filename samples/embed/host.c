/* A C application that embeds netcl-lua (see docs/embedding.md).
 *
 * It loads a model written in Lua, hands it its own float buffers as tensors (zero-copy on
 * the CPU backend), runs inference, and reads the logits straight out of its own memory.
 * To show the result is right, it recomputes the model in C from the weights.
 *
 *   embed_host path/to/mlp.lua */
#include <lauxlib.h>
#include <lualib.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <netcl_lua.h>

enum { BATCH = 4, INPUTS = 8, HIDDEN = 16, OUTPUTS = 3 };

static float logits[BATCH][OUTPUTS]; /* the host's output buffer; Lua writes into it */

static int traceback(lua_State *L) {
  luaL_traceback(L, L, lua_tostring(L, 1), 1);
  return 1;
}

/* Calls the function below its nargs arguments; on error prints the traceback and exits. */
static void call(lua_State *L, int nargs, int nresults, const char *what) {
  int base = lua_gettop(L) - nargs;
  lua_pushcfunction(L, traceback);
  lua_insert(L, base);
  if (lua_pcall(L, nargs, nresults, base) != LUA_OK) {
    fprintf(stderr, "embed_host: %s: %s\n", what, lua_tostring(L, -1));
    exit(1);
  }
  lua_remove(L, base);
}

static void check(nc_status s, const char *what) {
  if (s != NC_OK) {
    fprintf(stderr, "embed_host: %s: %s\n", what, nc_last_error());
    exit(1);
  }
}

/* A [rows, cols] float32 tensor over host memory the caller owns. release(data) runs when
 * the last reference (C's or Lua's) goes; NULL for memory that outlives everything. */
static nc_tensor *wrap_host(float *data, int64_t rows, int64_t cols, void (*release)(void *)) {
  nc_storage *s;
  check(nc_storage_wrap_host(data, (size_t)(rows * cols) * sizeof(float), release, data, &s), "wrap");
  int64_t shape[2] = {rows, cols}, strides[2] = {cols, 1};
  nc_tensor *t;
  check(nc_tensor_from_storage(s, NC_FLOAT32, 2, shape, strides, 0, &t), "tensor over host memory");
  nc_storage_release(s); /* the tensor holds its own reference */
  return t;
}

/* Copies a contiguous tensor's values (Lua owns the tensor; we only borrow it). */
static void read_param(lua_State *L, int idx, float *dst, size_t count) {
  nc_tensor *t = netcl_lua_checktensor(L, idx);
  if ((size_t)nc_tensor_numel(t) != count) {
    fprintf(stderr, "embed_host: parameter %d has %lld values, expected %zu\n", idx,
            (long long)nc_tensor_numel(t), count);
    exit(1);
  }
  check(nc_tensor_read_host(t, dst, count * sizeof(float)), "reading a parameter");
}

/* The same model in C, in double precision as Lua computes it. */
static double max_error(const float *x, const float *w1, const float *b1, const float *w2, const float *b2) {
  double worst = 0;
  for (int r = 0; r < BATCH; r++) {
    double h[HIDDEN];
    for (int o = 0; o < HIDDEN; o++) {
      double s = b1[o];
      for (int i = 0; i < INPUTS; i++) s += (double)w1[o * INPUTS + i] * x[r * INPUTS + i];
      h[o] = s > 0 ? s : 0;
    }
    for (int o = 0; o < OUTPUTS; o++) {
      double s = b2[o];
      for (int i = 0; i < HIDDEN; i++) s += (double)w2[o * HIDDEN + i] * h[i];
      double e = fabs(s - logits[r][o]) / (1 + fabs(s));
      if (e > worst) worst = e;
    }
  }
  return worst;
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: %s path/to/mlp.lua\n", argv[0]);
    return 2;
  }
  lua_State *L = luaL_newstate();
  luaL_openlibs(L);
  netcl_lua_openlibs(L); /* require "netcl" works with no LUA_PATH: the modules are compiled in */

  /* model = dofile(argv[1])({inputs=, hidden=, outputs=, seed=}) */
  if (luaL_loadfile(L, argv[1]) != LUA_OK) {
    fprintf(stderr, "embed_host: %s\n", lua_tostring(L, -1));
    return 1;
  }
  lua_createtable(L, 0, 4);
  lua_pushinteger(L, INPUTS), lua_setfield(L, -2, "inputs");
  lua_pushinteger(L, HIDDEN), lua_setfield(L, -2, "hidden");
  lua_pushinteger(L, OUTPUTS), lua_setfield(L, -2, "outputs");
  lua_pushinteger(L, 42), lua_setfield(L, -2, "seed");
  call(L, 1, 1, "loading the model");
  int model = lua_gettop(L);

  /* The input buffer is malloc'd and handed over: free() runs when the last tensor on it goes,
   * which may be after lua_close if Lua kept a reference. */
  float *input = malloc(sizeof(float) * BATCH * INPUTS);
  if (!input) return 1;
  for (int i = 0; i < BATCH * INPUTS; i++) input[i] = (float)sin(0.7 * i);
  nc_tensor *x = wrap_host(input, BATCH, INPUTS, free);
  nc_tensor *y = wrap_host(&logits[0][0], BATCH, OUTPUTS, NULL);
  if (nc_storage_host_ptr(x->storage) != input) {
    fprintf(stderr, "embed_host: the CPU backend copied the host buffer\n");
    return 1;
  }

  float w1[HIDDEN * INPUTS], b1[HIDDEN], w2[OUTPUTS * HIDDEN], b2[OUTPUTS];
  lua_getfield(L, model, "parameters");
  call(L, 0, 4, "model.parameters");
  read_param(L, -4, w1, HIDDEN * INPUTS);
  read_param(L, -3, b1, HIDDEN);
  read_param(L, -2, w2, OUTPUTS * HIDDEN);
  read_param(L, -1, b2, OUTPUTS);
  lua_pop(L, 4);

  /* Twice: the second pass changes the input in place, and the model must see the change,
   * because Lua reads the host's memory rather than a copy taken when x was made. */
  for (int pass = 0; pass < 2; pass++) {
    if (pass == 1)
      for (int i = 0; i < BATCH * INPUTS; i++) input[i] = -2 * input[i] + 0.25f;
    memset(logits, 0, sizeof logits);
    lua_getfield(L, model, "forward");
    netcl_lua_pushtensor(L, x); /* shared: Lua takes its own reference */
    netcl_lua_pushtensor(L, y);
    call(L, 2, 0, "model.forward");
    double err = max_error(input, w1, b1, w2, b2);
    printf("pass %d: logits[0] = %.5f %.5f %.5f, max relative error vs C %.2e\n", pass + 1, logits[0][0],
           logits[0][1], logits[0][2], err);
    if (!(err < 1e-6)) {
      fprintf(stderr, "embed_host: the logits differ from the C computation\n");
      return 1;
    }
  }

  nc_tensor_release(x); /* our references; Lua's go with the state */
  nc_tensor_release(y);
  lua_close(L);
  puts("ok");
  return 0;
}
