-- Lua API of the linalg/layer ops: matmul/mm/bmm methods, nc.linear, nc.set_matmul_precision,
-- nc.nn_ops forward/backward entry points. Each op runs on the device under test
-- (NETCL_TEST_DEVICE) and on the CPU backend with the same inputs; results must agree. Error
-- messages name the function and the offending shapes.
local lu = require "luaunit"
local nc = require "netcl"
local H = require "helpers"

local dev = nc.device(os.getenv("NETCL_TEST_DEVICE") or "cpu")
local cpu = nc.device("cpu")
local ops = nc.nn_ops

local flat = H.flat

-- max |a - b| / max(1, max |b|) over two tensors' values
local function rel_err(a, b)
  local x, y = flat(a:tolist()), flat(b:tolist())
  lu.assertEquals(#x, #y)
  local err, scale = 0, 1
  for i = 1, #y do scale = math.max(scale, math.abs(y[i])) end
  for i = 1, #y do err = math.max(err, math.abs(x[i] - y[i])) end
  return err / scale
end

local function same(a, b, tol) lu.assertTrue(rel_err(a, b) <= (tol or 1e-5), "rel err " .. rel_err(a, b)) end

-- random tensor on the CPU and a copy on the device under test
local function pair(shape)
  local c = nc.randn(shape, {device = cpu})
  return c:to(dev), c
end

local function labels(n, classes)
  local t = {}
  for i = 1, n do t[i] = (i * 7 + 3) % classes end
  local c = nc.tensor(t, {dtype = "int64", device = cpu})
  return c:to(dev), c
end

TestMatmul = {}
function TestMatmul:test_methods_and_module()
  local a, ac = pair({5, 7})
  local b, bc = pair({7, 3})
  same(a:matmul(b), ac:matmul(bc))
  same(a:mm(b), nc.mm(ac, bc))
  same(nc.matmul(a, b), ac:mm(bc))
  lu.assertEquals(a:matmul(b).shape, {5, 3})
end

function TestMatmul:test_batched_broadcast_transposed()
  local a, ac = pair({2, 1, 4, 6})
  local b, bc = pair({3, 5, 6})
  local r = a:matmul(b:transpose(2, 3))
  lu.assertEquals(r.shape, {2, 3, 4, 5})
  same(r, ac:matmul(bc:transpose(2, 3)))
  local x, xc = pair({3, 4, 6})
  local y, yc = pair({3, 6, 2})
  same(x:bmm(y), xc:bmm(yc))
end

-- A right operand broadcast over the batch runs as one product of batch x rows rows when the left
-- operand's and the result's rows continue from one batch entry into the next (run_batched's fold);
-- checked against sums in Lua (float64), with left operands that fold (contiguous, a narrowed last
-- dim) and that do not (batch-transposed, every other row, a bias).
function TestMatmul:test_broadcast_right_operand_against_loops()
  local function ref(a, b, bias)
    local av, bv = a:to(cpu):tolist(), b:to(cpu):tolist()
    local bb = bias and bias:to(cpu):tolist()
    local out = {}
    for i = 1, #av do
      out[i] = {}
      for r = 1, #av[i] do
        out[i][r] = {}
        for c = 1, #bv[1] do
          local acc = bb and bb[c] or 0
          for k = 1, #bv do acc = acc + av[i][r][k] * bv[k][c] end
          out[i][r][c] = acc
        end
      end
    end
    return nc.tensor(out, {dtype = "float64", device = cpu})
  end
  local w = nc.randn({5, 3}, {device = dev, dtype = "float64"})
  local base = nc.randn({4, 6, 7}, {device = dev, dtype = "float64"})
  local cases = {
    contiguous = base:narrow(3, 1, 5):contiguous(),
    narrowed = base:narrow(3, 2, 5),
    batch_transposed = base:narrow(3, 1, 5):transpose(1, 2):contiguous():transpose(1, 2),
    every_other_row = base:narrow(3, 1, 5):reshape({4, 3, 2, 5}):select(3, 1),
  }
  for name, a in pairs(cases) do
    local r = a:matmul(w)
    lu.assertEquals(r.shape, {a.shape[1], a.shape[2], 3}, name)
    lu.assertTrue(rel_err(r:to(cpu), ref(a, w)) < 1e-12, name)
    local wt, bias = w:transpose(1, 2), nc.randn({3}, {device = dev, dtype = "float64"})
    lu.assertTrue(rel_err(nc.linear(a, wt, bias):to(cpu), ref(a, w, bias)) < 1e-12, name .. " linear")
  end
end

function TestMatmul:test_vectors_and_linear()
  local v, vc = pair({6})
  local m, mc = pair({4, 6})
  lu.assertEquals(m:matmul(v).shape, {4})
  lu.assertEquals(v:matmul(v).ndim, 0)
  same(v:matmul(m:transpose(1, 2)), vc:matmul(mc:transpose(1, 2)))
  local x, xc = pair({2, 3, 6})
  local b, bc = pair({4})
  local y = nc.linear(x, m, b)
  lu.assertEquals(y.shape, {2, 3, 4})
  same(y, nc.linear(xc, mc, bc))
end

function TestMatmul:test_errors()
  local a, b = nc.zeros({2, 3}, {device = dev}), nc.zeros({4, 5}, {device = dev})
  lu.assertErrorMsgContains("netcl.matmul: inner dimensions 3 and 4 do not match ([2,3] @ [4,5])",
                            function() return a:matmul(b) end)
  lu.assertErrorMsgContains("netcl.bmm: bmm needs 3-D operands", function() return a:bmm(b) end)
  lu.assertErrorMsgContains("netcl.matmul: expected operands of one float dtype (float32, float64, bfloat16 or float16), got float32 and int64",
                            function() return a:matmul(nc.zeros({3, 2}, {dtype = "int64", device = dev})) end)
end

function TestMatmul:test_precision()
  lu.assertEquals(nc.get_matmul_precision(), "highest")
  nc.set_matmul_precision("high")
  lu.assertEquals(nc.get_matmul_precision(), "high")
  nc.set_matmul_precision("highest")
  lu.assertErrorMsgContains("netcl.set_matmul_precision: unknown matmul precision 'fast'",
                            function() nc.set_matmul_precision("fast") end)
end

TestConv = {}
function TestConv:test_forward_backward_parity()
  local x, xc = pair({2, 4, 9, 8})
  local w, wc = pair({6, 2, 3, 2})
  local b, bc = pair({6})
  local opts = {stride = {2, 1}, padding = {1, 0}, dilation = {1, 2}, groups = 2}
  local y = ops.conv2d(x, w, b, opts)
  local yc = ops.conv2d(xc, wc, bc, opts)
  same(y, yc)
  local g, gc = pair(y.shape)
  same(ops.conv2d_backward_input(g, w, x.shape, opts), ops.conv2d_backward_input(gc, wc, xc.shape, opts))
  same(ops.conv2d_backward_weight(g, x, w.shape, opts), ops.conv2d_backward_weight(gc, xc, wc.shape, opts))
end

function TestConv:test_errors()
  local x = nc.zeros({1, 4, 4, 4}, {device = dev})
  lu.assertErrorMsgContains("netcl.nn_ops.conv2d: kernel 5x5 (5x5 dilated) is larger than the padded input 4x4",
                            function() return ops.conv2d(x, nc.zeros({2, 4, 5, 5}, {device = dev})) end)
  lu.assertErrorMsgContains("netcl.nn_ops.conv2d: groups 3 does not divide the 4 input channels",
                            function() return ops.conv2d(x, nc.zeros({3, 1, 3, 3}, {device = dev}), nil, {groups = 3}) end)
end

TestPool = {}
function TestPool:test_max_avg_adaptive()
  local x, xc = pair({2, 3, 7, 6})
  local y, idx = ops.max_pool2d(x, 3, {stride = 2, padding = 1})
  local yc, idxc = ops.max_pool2d(xc, 3, {stride = 2, padding = 1})
  same(y, yc)
  lu.assertEquals(idx.dtype, "int64")
  lu.assertEquals(flat(idx:tolist()), flat(idxc:tolist()))
  local g, gc = pair(y.shape)
  same(ops.max_pool2d_backward(g, idx, x.shape, 3, {stride = 2, padding = 1}),
       ops.max_pool2d_backward(gc, idxc, xc.shape, 3, {stride = 2, padding = 1}))
  local a = ops.avg_pool2d(x, {2, 3}, {ceil_mode = true})
  same(a, ops.avg_pool2d(xc, {2, 3}, {ceil_mode = true}))
  local ga, gac = pair(a.shape)
  same(ops.avg_pool2d_backward(ga, x.shape, {2, 3}, {ceil_mode = true}),
       ops.avg_pool2d_backward(gac, xc.shape, {2, 3}, {ceil_mode = true}))
  local ad = ops.adaptive_avg_pool2d(x, {4, 1})
  lu.assertEquals(ad.shape, {2, 3, 4, 1})
  local gd, gdc = pair(ad.shape)
  same(ops.adaptive_avg_pool2d_backward(gd, x.shape), ops.adaptive_avg_pool2d_backward(gdc, xc.shape))
end

function TestPool:test_known_indices()
  local x = nc.tensor({{{{1, 2, 3, 4}, {5, 6, 7, 8}, {9, 10, 11, 12}, {13, 14, 15, 16}}}}, {device = dev})
  local y, idx = ops.max_pool2d(x, 2)
  lu.assertEquals(flat(y:tolist()), {6, 8, 14, 16})
  lu.assertEquals(flat(idx:tolist()), {5, 7, 13, 15}) -- 0-based positions in the plane
end

TestNorm = {}
function TestNorm:test_batch_norm()
  local x, xc = pair({4, 3, 5, 2})
  local w, wc = pair({3})
  local b, bc = pair({3})
  local rm, rmc = nc.zeros({3}, {device = dev}), nc.zeros({3}, {device = cpu})
  local rv, rvc = nc.ones({3}, {device = dev}), nc.ones({3}, {device = cpu})
  local y, m, is = ops.batch_norm(x, w, b, rm, rv, {training = true, momentum = 0.2})
  local yc, mc, isc = ops.batch_norm(xc, wc, bc, rmc, rvc, {training = true, momentum = 0.2})
  same(y, yc); same(rm, rmc); same(rv, rvc)
  local g, gc = pair(x.shape)
  local dx, dw, db = ops.batch_norm_backward(g, x, w, m, is)
  local dxc, dwc, dbc = ops.batch_norm_backward(gc, xc, wc, mc, isc)
  same(dx, dxc); same(dw, dwc); same(db, dbc)
  local ye = ops.batch_norm(x, w, b, rm, rv, {training = false})
  same(ye, (ops.batch_norm(xc, wc, bc, rmc, rvc, {training = false})))
end

function TestNorm:test_layer_rms()
  local x, xc = pair({3, 4, 10})
  local w, wc = pair({10})
  local b, bc = pair({10})
  local y, m, rs = ops.layer_norm(x, 10, w, b)
  local yc, mc, rsc = ops.layer_norm(xc, {10}, wc, bc)
  same(y, yc)
  local g, gc = pair(x.shape)
  local dx, dw, db = ops.layer_norm_backward(g, x, 10, w, m, rs)
  local dxc, dwc, dbc = ops.layer_norm_backward(gc, xc, 10, wc, mc, rsc)
  same(dx, dxc); same(dw, dwc); same(db, dbc)
  local r, rr = ops.rms_norm(x, {4, 10}, nil)
  local rc, rrc = ops.rms_norm(xc, {4, 10}, nil)
  same(r, rc)
  local gx = ops.rms_norm_backward(g, x, {4, 10}, nil, rr)
  same(gx, ops.rms_norm_backward(gc, xc, {4, 10}, nil, rrc))
  lu.assertErrorMsgContains("normalized_shape does not match", function() return ops.layer_norm(x, 4) end)
end

TestEmbeddingLoss = {}
function TestEmbeddingLoss:test_embedding()
  local w, wc = pair({9, 4})
  local idx = nc.tensor({{0, 8, 3}, {3, 3, 1}}, {dtype = "int64", device = dev})
  local out = ops.embedding(w, idx)
  lu.assertEquals(out.shape, {2, 3, 4})
  same(out, ops.embedding(wc, idx:to(cpu)))
  local g, gc = pair(out.shape)
  same(ops.embedding_backward(g, idx, 9, {padding_idx = 1}), ops.embedding_backward(gc, idx:to(cpu), 9, {padding_idx = 1}))
  -- at once on the CPU backend; OpenCL kernels check on the device and the next sync point fails
  lu.assertErrorMsgContains("index 9 at position 2 is out of range for 9 embeddings", function()
    ops.embedding(w, nc.tensor({0, 9}, {dtype = "int64", device = dev}))
    nc.sync(dev)
  end)
  nc.sync(dev) -- reported once
end

function TestEmbeddingLoss:test_cross_entropy()
  local x, xc = pair({16, 5})
  local t, tc = labels(16, 5)
  for _, o in ipairs({{}, {label_smoothing = 0.1, ignore_index = 2}, {reduction = "sum"}, {reduction = "none"}}) do
    local l, lse = ops.cross_entropy(x, t, o)
    local lc, lsec = ops.cross_entropy(xc, tc, o)
    same(l, lc)
    local g, gc = pair(l.shape)
    same(ops.cross_entropy_backward(g, x, t, lse, o), ops.cross_entropy_backward(gc, xc, tc, lsec, o))
  end
  lu.assertErrorMsgContains("netcl.nn_ops.cross_entropy: targets must be int64 class indices, got float32",
                            function() return ops.cross_entropy(x, t:to("float32")) end)
  lu.assertErrorMsgContains("reduction must be", function() return ops.cross_entropy(x, t, {reduction = "avg"}) end)
end

TestGemmFast = {}

-- The large-tile kernels (kernels/gemm_fast.cl) take every float32 product with contiguous rows
-- or columns on OpenCL: edge tiles in M, N and K, both layouts of each operand, batches.
function TestGemmFast:test_layouts_and_edges()
  local function err(a, b) return (a - b):abs():max():item() / math.max(1, b:abs():max():item()) end
  -- {64, 32, 2048} and {60, 50, 1500}: a grid of one tile with a long K, which the kernel splits
  -- along K on devices with more compute units than tiles (2048 in equal chunks, one launch;
  -- 1500 with the last chunk shorter, in a second launch)
  for _, s in ipairs({{1, 1, 1}, {3, 5, 7}, {64, 64, 16}, {127, 129, 33}, {200, 70, 300}, {257, 1, 100}, {65, 130, 17},
                      {64, 32, 2048}, {60, 50, 1500}}) do
    for ta = 0, 1 do
      for tb = 0, 1 do
        for _, batch in ipairs({0, 3}) do
          local M, N, K = s[1], s[2], s[3]
          local ash, bsh = ta == 1 and {K, M} or {M, K}, tb == 1 and {N, K} or {K, N}
          if batch > 0 then table.insert(ash, 1, batch); table.insert(bsh, 1, batch) end
          local a, b = nc.randn(ash, {device = cpu}), nc.randn(bsh, {device = cpu})
          local function tr(x, t) return t == 1 and x:transpose(-1, -2) or x end
          local ref = nc.matmul(tr(a, ta), tr(b, tb))
          local got = nc.matmul(tr(a:to(dev), ta), tr(b:to(dev), tb)):to(cpu)
          local e = err(got, ref)
          lu.assertTrue(e < 1e-5, string.format("M %d N %d K %d ta %d tb %d batch %d: rel err %g", M, N, K, ta, tb, batch, e))
        end
      end
    end
  end
  -- a row offset that is not a multiple of 4 (no aligned vector loads) and a K of 0
  local a, b = nc.randn({9, 37}, {device = cpu}), nc.randn({37, 20}, {device = cpu})
  local ref = nc.matmul(a:narrow(1, 2, 7), b)
  lu.assertTrue(err(nc.matmul(a:to(dev):narrow(1, 2, 7), b:to(dev)):to(cpu), ref) < 1e-5)
  local z = nc.matmul(nc.zeros({4, 0}, {device = dev}), nc.zeros({0, 6}, {device = dev})):to(cpu)
  lu.assertEquals(z:abs():max():item(), 0)
end

-- conv2d's three passes against the CPU backend over geometries that reach every path: stride 1
-- (input gradient as a flipped forward convolution), strides 2 and 3 (the input gradient as one
-- convolution per phase of the stride, with phases no tap reaches, odd extents, a padding past
-- the kernel's reach, a 7x7 stem and a stride of 2 x 1), dilation, 1x1, output channels above one
-- tile, and a batch long enough to split the weight gradient's K.
-- On a device of few compute units (PoCL), the 64 x 128 tile of products of at most 64 rows
-- (cl_conv.c's pick_tile) takes the forward of the last two (the 33-channel one with edges in M
-- and N) and the input gradient (M: input channels) of several.
function TestGemmFast:test_conv_geometries()
  local function err(a, b) return (a - b):abs():max():item() / math.max(1, b:abs():max():item()) end
  for _, c in ipairs({{2, 3, 9, 7, 5, 3, 3, 1, 1, 1}, {3, 8, 11, 13, 70, 3, 3, 1, 2, 1}, {2, 5, 10, 10, 7, 3, 3, 2, 1, 1},
                      {2, 6, 9, 9, 130, 1, 1, 1, 0, 1}, {1, 4, 12, 12, 3, 5, 3, 1, 2, 2}, {2, 3, 7, 7, 4, 2, 2, 2, 0, 1},
                      {5, 3, 9, 11, 33, 3, 3, 1, 1, 1}, {64, 8, 8, 8, 8, 3, 3, 1, 1, 1},
                      {2, 8, 9, 10, 12, 1, 1, 2, 0, 1}, {2, 4, 11, 13, 8, 2, 2, 3, 0, 1}, {2, 5, 13, 12, 9, 7, 7, 2, 3, 1},
                      {2, 4, 8, 9, 6, 3, 3, 2, 3, 1}, {3, 16, 16, 16, 32, 3, 3, 2, 1, 1}, {2, 6, 9, 10, 8, 3, 3, 1, 3, 1},
                      {2, 4, 9, 12, 8, 3, 3, {2, 1}, 1, 1}, {2, 4, 10, 9, 8, 3, 3, {1, 3}, {0, 2}, {2, 1}}}) do
    local B, C, H, W, O, KH, KW, S, P, D = table.unpack(c)
    local o = {stride = S, padding = P, dilation = D}
    local x, w, bias = nc.randn({B, C, H, W}, {device = cpu}), nc.randn({O, C, KH, KW}, {device = cpu}), nc.randn({O}, {device = cpu})
    local y = ops.conv2d(x, w, bias, o)
    local dy = nc.randn(y.shape, {device = cpu})
    local what = {}
    for i, v in ipairs(c) do what[i] = type(v) == "table" and "{" .. table.concat(v, ",") .. "}" or tostring(v) end
    what = table.concat(what, ",")
    lu.assertTrue(err(ops.conv2d(x:to(dev), w:to(dev), bias:to(dev), o):to(cpu), y) < 1e-5, "forward " .. what)
    lu.assertTrue(err(ops.conv2d_backward_input(dy:to(dev), w:to(dev), x.shape, o):to(cpu),
      ops.conv2d_backward_input(dy, w, x.shape, o)) < 1e-5, "input gradient " .. what)
    lu.assertTrue(err(ops.conv2d_backward_weight(dy:to(dev), x:to(dev), w.shape, o):to(cpu),
      ops.conv2d_backward_weight(dy, x, w.shape, o)) < 1e-5, "weight gradient " .. what)
  end
end

os.exit(lu.LuaUnit.run())
