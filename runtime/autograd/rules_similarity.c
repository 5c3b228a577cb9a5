/* cosine_similarity: a composition (each side divided by its norm, clamped below by eps, then
 * the dot product along dim), so its gradient is its parts'. */
#include "compose.h"

nc_status nc_ag_cosine_similarity(nc_tape *t, nc_node *a, nc_node *b, int dim, double eps, nc_node **out) {
  ag_graph G = AG_GRAPH(t);
  nc_node *unit[2], *side[2] = {a, b};
  /* dim counts in the broadcast shape: bring both sides to it first */
  const nc_tensor *va = nc_node_value(a), *vb = nc_node_value(b);
  int64_t shape[NC_MAX_DIMS];
  int nd;
  G.s = nc_broadcast_shapes(va->ndim, va->shape, vb->ndim, vb->shape, &nd, shape);
  for (int i = 0; i < 2 && G.s == NC_OK; i++) {
    const nc_tensor *v = nc_node_value(side[i]);
    bool same = v->ndim == nd;
    for (int k = 0; same && k < nd; k++) same = v->shape[k] == shape[k];
    if (!same) side[i] = cg_take(&G, nc_ag_expand(t, side[i], nd, shape, &side[i]), &side[i]);
  }
  if (G.s == NC_OK && (dim < 0 || dim >= nd))
    G.s = nc_error(NC_ERR_INDEX, "cosine_similarity: dim %d out of range for %d dims", dim, nd);
  for (int i = 0; i < 2; i++) {
    nc_node *norm = NULL, *clamped = NULL;
    if (G.s == NC_OK) cg_take(&G, nc_ag_reduce(t, NC_OP_NORM, side[i], 1, &dim, true, NULL, &norm), &norm);
    nc_scalar lo = nc_scalar_float(eps);
    if (G.s == NC_OK) cg_take(&G, nc_ag_clamp(t, norm, &lo, NULL, &clamped), &clamped);
    unit[i] = cg_bin(&G, NC_OP_DIV, side[i], clamped);
  }
  return cg_end(&G, cg_reduce(&G, NC_OP_SUM, cg_bin(&G, NC_OP_MUL, unit[0], unit[1]), 1, &dim, false), out);
}
