/* Node and Tape userdata (l_autograd.c) and the helpers of the op bindings that take Nodes. */
#ifndef NETCL_L_AUTOGRAD_H
#define NETCL_L_AUTOGRAD_H

#include "l_common.h"
#include "netcl/autograd_ops.h"
#include "netcl_lua.h"

#define NC_NODE_MT "netcl.Node"
#define NC_TAPE_MT "netcl.Tape"

typedef struct {
  nc_node *n;
} nc_lua_node_box;

typedef struct {
  nc_tape *t;
} nc_lua_tape_box;

void nc_lua_pushnode_owned(lua_State *L, nc_node *n);
nc_node *nc_lua_tonode(lua_State *L, int idx);
nc_node *nc_lua_checknode(lua_State *L, int idx, const char *fname);
/* A Node, or a Tensor wrapped in a constant node (the wrapper replaces the argument slot). */
nc_node *nc_lua_checknodelike(lua_State *L, int idx, const char *fname);

/* Helpers of the op bindings, which serve Tensors and Nodes alike: an op whose operands include
 * a Node is the differentiable op (recorded on the active tape), otherwise the pure op. */
bool nc_lua_isnode(lua_State *L, int idx);
/* Whether any of the arguments from..to (inclusive) is a Node. */
bool nc_lua_has_node(lua_State *L, int from, int to);
/* Raises when opts has out= (ops on Nodes make new Nodes). */
void nc_lua_no_out(lua_State *L, int opts, const char *fname);
/* A Node, a Tensor (as a constant node) or a number (l_args.c). */
nc_ag_operand nc_lua_ag_checkoperand(lua_State *L, int idx, const char *fname);
/* Pushes the node an op made (taking the reference; its new bytes are reported to the
 * collector) when s is NC_OK, else raises fname's error; returns 1. *out is read only after s
 * is known (argument evaluation order is unspecified). */
int nc_lua_ag_result(lua_State *L, nc_status s, nc_node **out, const char *fname);
void nc_lua_ag_push(lua_State *L, nc_node *n);
/* A plain Tensor argument (masks, indices, targets, buffers); a Node gives its value. */
nc_tensor *nc_lua_ag_checktensor(lua_State *L, int idx, const char *fname);

/* The tape ops record onto: the active one (tape:record/scope), or NULL under no_grad or
 * when none is active. */
nc_tape *nc_lua_active_tape(lua_State *L);

/* Adds ag.ops() (l_autograd_ops.c) to the autograd table of the module on the stack top. */
void nc_lua_add_autograd_ops(lua_State *L);
/* Raises unless every differentiable op (nc_ag_op_names) has a binding in the autograd table of
 * the module on the stack top: runs once every family has registered its ops. */
void nc_lua_check_autograd(lua_State *L);

#endif
