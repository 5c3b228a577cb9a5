/* Differentiable ops built from other differentiable ops (autograd-internal): losses and
 * similarities whose gradients follow from their parts' rules, with nothing of their own to get
 * wrong. Like a rule's scope (scope.h), a graph owns every intermediate node, turns the ops
 * after a failure into no-ops, and releases everything at the end. */
#ifndef NETCL_AUTOGRAD_COMPOSE_H
#define NETCL_AUTOGRAD_COMPOSE_H

#include "netcl/autograd_ops.h"

#define AG_GRAPH_MAX 32

typedef struct {
  nc_tape *t;
  nc_status s;
  int n;
  nc_node *nodes[AG_GRAPH_MAX];
} ag_graph;

#define AG_GRAPH(tape)         \
  {                            \
    (tape), NC_OK, 0, { NULL } \
  }

/* Takes *r (made by an op that returned s) into the graph; NULL once anything failed. */
nc_node *cg_take(ag_graph *G, nc_status s, nc_node **r);
/* A constant node over t (retained). */
nc_node *cg_const(ag_graph *G, nc_tensor *t);
nc_node *cg_un(ag_graph *G, nc_op op, nc_node *x);
nc_node *cg_bin(ag_graph *G, nc_op op, nc_node *a, nc_node *b);
nc_node *cg_bins(ag_graph *G, nc_op op, nc_node *a, double b);
nc_node *cg_reduce(ag_graph *G, nc_op op, nc_node *x, int ndims, const int *dims, bool keepdim);
/* The loss reduced as asked: none (as is), mean or sum over every element. */
nc_node *cg_reduction(ag_graph *G, nc_node *loss, int reduction);
/* *out = a new reference to result when all went well; releases the graph; returns its status. */
nc_status cg_end(ag_graph *G, nc_node *result, nc_node **out);

#endif
