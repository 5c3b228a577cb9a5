/* The C module table (netcl.core): every binding file adds its part. */
#include "l_autograd.h"

int nc_lua_open_core(lua_State *L) {
  if (nc_init() != NC_OK) return nc_lua_errorf(L, "netcl: %s", nc_last_error());
  lua_newtable(L);
  nc_lua_add_device(L);
  nc_lua_add_tensor(L);
  nc_lua_add_async(L);
  nc_lua_add_autograd(L); /* the Node type and nc.autograd, which the op families extend */
  nc_lua_add_ops(L);
  nc_lua_add_creation(L);
  nc_lua_add_autograd_ops(L);
  nc_lua_add_text(L);
  nc_lua_add_linalg(L);
  nc_lua_add_table_ops(L);
  nc_lua_add_io(L);
  nc_lua_add_data(L);
  nc_lua_add_json(L);
  nc_lua_add_term(L);
  nc_lua_add_optim(L);
  nc_lua_add_dist(L);
  nc_lua_check_autograd(L);
  lua_pushstring(L, nc_version());
  lua_setfield(L, -2, "version");
  return 1;
}
