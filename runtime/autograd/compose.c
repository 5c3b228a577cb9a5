#include "compose.h"
#include "netcl/loss.h"

nc_node *cg_take(ag_graph *G, nc_status s, nc_node **r) {
  if (s != NC_OK) {
    if (G->s == NC_OK) G->s = s;
    return NULL;
  }
  if (G->n == AG_GRAPH_MAX) {
    nc_node_release(*r);
    G->s = nc_error(NC_ERR_STATE, "a composite op used more than %d nodes", AG_GRAPH_MAX);
    return NULL;
  }
  return G->nodes[G->n++] = *r;
}

nc_node *cg_const(ag_graph *G, nc_tensor *t) {
  if (G->s != NC_OK) return NULL;
  nc_node *r = NULL;
  return cg_take(G, nc_node_new(t, false, &r), &r);
}

nc_node *cg_un(ag_graph *G, nc_op op, nc_node *x) {
  if (G->s != NC_OK) return NULL;
  nc_node *r = NULL;
  return cg_take(G, nc_ag_unary(G->t, op, x, &r), &r);
}

nc_node *cg_bin(ag_graph *G, nc_op op, nc_node *a, nc_node *b) {
  if (G->s != NC_OK) return NULL;
  nc_node *r = NULL;
  return cg_take(G, nc_ag_binary(G->t, op, nc_ag_node(a), nc_ag_node(b), &r), &r);
}

nc_node *cg_bins(ag_graph *G, nc_op op, nc_node *a, double b) {
  if (G->s != NC_OK) return NULL;
  nc_node *r = NULL;
  return cg_take(G, nc_ag_binary(G->t, op, nc_ag_node(a), nc_ag_scalar(nc_scalar_float(b)), &r), &r);
}

nc_node *cg_reduce(ag_graph *G, nc_op op, nc_node *x, int ndims, const int *dims, bool keepdim) {
  if (G->s != NC_OK) return NULL;
  nc_node *r = NULL;
  return cg_take(G, nc_ag_reduce(G->t, op, x, ndims, dims, keepdim, NULL, &r), &r);
}

nc_node *cg_reduction(ag_graph *G, nc_node *loss, int reduction) {
  switch (reduction) {
    case NC_REDUCTION_NONE:
      return loss;
    case NC_REDUCTION_MEAN:
      return cg_reduce(G, NC_OP_MEAN, loss, 0, NULL, false);
    case NC_REDUCTION_SUM:
      return cg_reduce(G, NC_OP_SUM, loss, 0, NULL, false);
    default:
      if (G->s == NC_OK) G->s = nc_error(NC_ERR_ARG, "unknown reduction %d", reduction);
      return NULL;
  }
}

nc_status cg_end(ag_graph *G, nc_node *result, nc_node **out) {
  if (G->s == NC_OK) *out = nc_node_retain(result);
  for (int i = 0; i < G->n; i++) nc_node_release(G->nodes[i]);
  G->n = 0;
  return G->s;
}
