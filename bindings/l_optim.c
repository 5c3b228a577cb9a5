/* The C half of netcl.optim (lua/netcl/optim/): the fused update entry points, gradient
 * clipping and optimizer state allocation, as netcl.core._optim. Hyper-parameters are read from
 * the optimizer's parameter-group table, which netcl.optim has already checked and completed;
 * its keys are checked again here (nc_lua_checkopts), so an option misspelt in a group edited
 * after construction (opt.param_groups[1].momentun = ...) is an error, not ignored.
 *   _optim.sgd_step(param, grad, momentum_buffer|nil, first, group, rounded|nil)
 *   _optim.rmsprop_step(param, grad, square_avg, grad_avg|nil, momentum_buffer|nil, group, rounded|nil)
 *   _optim.adam_step(param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq|nil, step, decoupled, group,
 *                    rounded|nil)
 * rounded: a bfloat16 or float16 tensor that receives the updated float32 param rounded (the
 * parameter of a master copy), in the update's pass (netcl/optim.h).
 *   _optim.clip_grad_norm({grad, ...}, max_norm) -> total_norm
 *   _optim.state_new(like) -> zero-filled Tensor (persistent pool) */
#include "l_common.h"

static const char *FNAME = "netcl.optim";

static double num_field(lua_State *L, int idx, const char *name) {
  lua_getfield(L, idx, name);
  int isnum;
  double v = lua_tonumberx(L, -1, &isnum);
  if (!isnum) nc_lua_errorf(L, "%s: option '%s' must be a number, got %s", FNAME, name, luaL_typename(L, -1));
  lua_pop(L, 1);
  return v;
}

static double num_at(lua_State *L, int idx, lua_Integer i, const char *name) {
  lua_geti(L, idx, i);
  int isnum;
  double v = lua_tonumberx(L, -1, &isnum);
  if (!isnum)
    nc_lua_errorf(L, "%s: %s[%lld] must be a number, got %s", FNAME, name, (long long)i,
                  luaL_typename(L, -1));
  lua_pop(L, 1);
  return v;
}

static bool bool_field(lua_State *L, int idx, const char *name) {
  lua_getfield(L, idx, name);
  bool v = lua_toboolean(L, -1);
  lua_pop(L, 1);
  return v;
}

/* The group at idx: a table whose keys are among keys ("params" and the optimizer's options). */
static int check_group(lua_State *L, int idx, const char *keys) {
  if (lua_isnoneornil(L, idx))
    return nc_lua_argerror(L, FNAME, idx, "expected the parameter group's options table, got %s",
                           luaL_typename(L, idx));
  return nc_lua_checkopts(L, idx, FNAME, keys);
}

static nc_tensor *opt_tensor(lua_State *L, int idx) {
  return lua_isnoneornil(L, idx) ? NULL : nc_lua_checktensor_f(L, idx, FNAME);
}

static int l_sgd_step(lua_State *L) {
  nc_tensor *p = nc_lua_checktensor_f(L, 1, FNAME), *g = nc_lua_checktensor_f(L, 2, FNAME),
            *b = opt_tensor(L, 3);
  const bool first = lua_toboolean(L, 4);
  check_group(L, 5, "params lr momentum dampening weight_decay nesterov");
  const nc_sgd_options o = {
      .lr = num_field(L, 5, "lr"),
      .momentum = num_field(L, 5, "momentum"),
      .dampening = num_field(L, 5, "dampening"),
      .weight_decay = num_field(L, 5, "weight_decay"),
      .nesterov = bool_field(L, 5, "nesterov"),
      .rounded = opt_tensor(L, 6),
  };
  NC_LUA_CHECK(L, FNAME, nc_sgd_step(p, g, b, first, &o));
  return 0;
}

static int l_rmsprop_step(lua_State *L) {
  nc_tensor *p = nc_lua_checktensor_f(L, 1, FNAME), *g = nc_lua_checktensor_f(L, 2, FNAME);
  nc_tensor *sq = nc_lua_checktensor_f(L, 3, FNAME), *ga = opt_tensor(L, 4), *b = opt_tensor(L, 5);
  check_group(L, 6, "params lr alpha eps weight_decay momentum centered");
  const nc_rmsprop_options o = {
      .lr = num_field(L, 6, "lr"),
      .alpha = num_field(L, 6, "alpha"),
      .eps = num_field(L, 6, "eps"),
      .weight_decay = num_field(L, 6, "weight_decay"),
      .momentum = num_field(L, 6, "momentum"),
      .centered = bool_field(L, 6, "centered"),
      .rounded = opt_tensor(L, 7),
  };
  NC_LUA_CHECK(L, FNAME, nc_rmsprop_step(p, g, sq, ga, b, &o));
  return 0;
}

static int l_adam_step(lua_State *L) {
  nc_tensor *p = nc_lua_checktensor_f(L, 1, FNAME), *g = nc_lua_checktensor_f(L, 2, FNAME);
  nc_tensor *m1 = nc_lua_checktensor_f(L, 3, FNAME), *m2 = nc_lua_checktensor_f(L, 4, FNAME),
            *mx = opt_tensor(L, 5), *rounded = opt_tensor(L, 9); /* before betas is pushed */
  const lua_Integer step = nc_lua_checkinteger(L, 6, FNAME);
  const bool decoupled = lua_toboolean(L, 7);
  check_group(L, 8, "params lr betas eps weight_decay amsgrad");
  if (lua_getfield(L, 8, "betas") != LUA_TTABLE)
    return nc_lua_errorf(L, "%s: option 'betas' must be a table of two numbers, got %s", FNAME,
                         luaL_typename(L, -1));
  const int betas = lua_gettop(L);
  const nc_adam_options o = {
      .lr = num_field(L, 8, "lr"),
      .beta1 = num_at(L, betas, 1, "betas"),
      .beta2 = num_at(L, betas, 2, "betas"),
      .eps = num_field(L, 8, "eps"),
      .weight_decay = num_field(L, 8, "weight_decay"),
      .decoupled = decoupled,
      .amsgrad = bool_field(L, 8, "amsgrad"),
      .step = step,
      .rounded = rounded,
  };
  NC_LUA_CHECK(L, FNAME, nc_adam_step(p, g, m1, m2, mx, &o));
  return 0;
}

static int l_clip_grad_norm(lua_State *L) {
  if (!lua_istable(L, 1))
    return nc_lua_argerror(L, FNAME, 1, "expected a list of gradients, got %s", luaL_typename(L, 1));
  const double max_norm = nc_lua_checknumber(L, 2, FNAME);
  const lua_Integer n = luaL_len(L, 1);
  if (n > 1 << 24) return nc_lua_errorf(L, "%s: too many gradients (%lld)", FNAME, (long long)n);
  nc_tensor **grads = lua_newuserdatauv(L, (size_t)(n > 0 ? n : 1) * sizeof *grads, 0);
  for (lua_Integer i = 1; i <= n; i++) {
    lua_geti(L, 1, i);
    grads[i - 1] = nc_lua_totensor(L, -1);
    if (!grads[i - 1]) return nc_lua_errorf(L, "%s: gradient %lld is not a Tensor", FNAME, (long long)i);
    lua_pop(L, 1);
  }
  double total;
  NC_LUA_CHECK(L, FNAME, nc_clip_grad_norm((int)n, grads, max_norm, &total));
  lua_pushnumber(L, total);
  return 1;
}

static int l_state_new(lua_State *L) {
  nc_tensor *t, *like = nc_lua_checktensor_f(L, 1, FNAME);
  NC_LUA_CHECK(L, FNAME, nc_optim_state_new(like, &t));
  nc_lua_pushtensor_new(L, t);
  return 1;
}

void nc_lua_add_optim(lua_State *L) {
  static const luaL_Reg fns[] = {{"sgd_step", l_sgd_step},   {"rmsprop_step", l_rmsprop_step},
                                 {"adam_step", l_adam_step}, {"clip_grad_norm", l_clip_grad_norm},
                                 {"state_new", l_state_new}, {NULL, NULL}};
  luaL_newlib(L, fns);
  lua_setfield(L, -2, "_optim");
}
