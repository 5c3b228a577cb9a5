-- Layers without a family of their own: Dropout, Embedding, Flatten, Identity, SwiGLU.
local nc = require "netcl"
local ag = require "netcl.autograd"
local Module = require("netcl.nn.module").Module
local Linear = require "netcl.nn.linear"
local U = require "netcl.nn.util"

local M = {}

M.Dropout = Module:extend("Dropout")

--- nn.Dropout(p=0.5): in training, zeroes each element with probability p and scales the rest
-- by 1/(1-p) (the mask comes from the seeded Philox stream); in evaluation, the identity.
function M.Dropout:init(p)
  self.p = U.number("nn.Dropout", "p", p or 0.5, 0, 1)
end

function M.Dropout:forward(x)
  if not self.training or self.p == 0 then return x end
  return ag.dropout(x, self.p, true)
end

function M.Dropout:extra_repr() return string.format("p=%g", self.p) end

M.Embedding = Module:extend("Embedding")

--- nn.Embedding(num_embeddings, embedding_dim, {padding_idx=, device=, dtype=}): a lookup
-- table [num, dim] initialized N(0, 1). Indices are 0-based; the row padding_idx starts at zero
-- and gets no gradient.
function M.Embedding:init(num_embeddings, embedding_dim, opts)
  local fname = "nn.Embedding"
  opts = U.options(fname, opts, {padding_idx = true, device = true, dtype = true})
  self.num_embeddings = U.int(fname, "num_embeddings", num_embeddings, 1)
  self.embedding_dim = U.int(fname, "embedding_dim", embedding_dim, 1)
  local w = nc.randn({num_embeddings, embedding_dim}, U.tensor_opts(opts))
  if opts.padding_idx ~= nil then
    local pad = U.int(fname, "padding_idx", opts.padding_idx)
    if pad < 0 then pad = pad + num_embeddings end
    if pad < 0 or pad >= num_embeddings then
      error(string.format("%s: padding_idx %d is out of range for %d embeddings", fname, opts.padding_idx,
        num_embeddings), 3)
    end
    self.padding_idx = pad
    w[pad + 1]:zero_()
  end
  self.weight = ag.param(w)
end

function M.Embedding:forward(idx)
  if self.padding_idx then return ag.embedding(idx, self.weight, {padding_idx = self.padding_idx}) end
  return ag.embedding(idx, self.weight)
end

function M.Embedding:extra_repr()
  return string.format("%d, %d%s", self.num_embeddings, self.embedding_dim,
    self.padding_idx and ", padding_idx=" .. self.padding_idx or "")
end

M.Flatten = Module:extend("Flatten")

--- nn.Flatten(start_dim=2, end_dim=-1): merges dims start..end (1-based; the default keeps
-- the batch dim, as PyTorch's Flatten()).
function M.Flatten:init(start_dim, end_dim)
  self.start_dim = U.int("nn.Flatten", "start_dim", start_dim or 2)
  self.end_dim = U.int("nn.Flatten", "end_dim", end_dim or -1)
end

function M.Flatten:forward(x) return ag.flatten(x, self.start_dim, self.end_dim) end

function M.Flatten:extra_repr()
  if self.start_dim == 2 and self.end_dim == -1 then return "" end
  return string.format("start_dim=%d, end_dim=%d", self.start_dim, self.end_dim)
end

M.Identity = Module:extend("Identity")

--- nn.Identity(): returns its input (its arguments are ignored, as PyTorch's).
function M.Identity:forward(x) return x end

M.SwiGLU = Module:extend("SwiGLU")

--- nn.SwiGLU(dim, hidden, {bias=false}): w2(silu(w1 x) * w3 x), the LLaMA feed-forward block
-- (and its parameter names: w1 and w3 [hidden, dim], w2 [dim, hidden]).
function M.SwiGLU:init(dim, hidden, opts)
  local fname = "nn.SwiGLU"
  opts = U.options(fname, opts, {bias = true, device = true, dtype = true})
  dim = U.int(fname, "dim", dim, 1)
  hidden = U.int(fname, "hidden", hidden, 1)
  local lopts = {bias = U.bool(fname, "bias", opts.bias, false), device = opts.device, dtype = opts.dtype}
  self.w1 = Linear(dim, hidden, lopts)
  self.w2 = Linear(hidden, dim, lopts)
  self.w3 = Linear(dim, hidden, lopts)
end

function M.SwiGLU:forward(x)
  return self.w2(ag.silu(self.w1(x)) * self.w3(x))
end

return M
