-- Parity cases of the layer ops (linalg, conv, pool, norm, embedding, loss), forward and
-- backward: tests/parity/README.md describes entries and trials. The harness's five sizes
-- (1, 7, 33, 1000, 65537) index five geometries per op: GEMM dims rotate through
-- M, N, K in {1, 3, 17, 129, 1000}; convolutions cover batch 1, stride 2, groups, dilation and
-- non-square kernels; inputs run contiguous, transposed (strided) and narrowed (offset inside
-- a nan-padded buffer, so a kernel reading outside its operand fails the comparison).
local nc = require "netcl"
local ops = nc.nn_ops

local F = {"float32", "float64"}
local SIZES = {1, 7, 33, 1000, 65537}
local DIMS = {1, 3, 17, 129, 1000}

local function index_of(size)
  for i, s in ipairs(SIZES) do
    if s == size then return i end
  end
  error("unknown parity size " .. tostring(size))
end

local function key(case, size, dtype, extra) return case.name .. "/" .. size .. "/" .. dtype .. "/" .. (extra or "") end

-- Trials of one call over layouts: each entry of `layouts` is a per-input list.
local function over_layouts(inputs, call, layouts, tol)
  local trials = {}
  for _, lay in ipairs(layouts) do
    trials[#trials + 1] = {label = table.concat(lay, "/"), layouts = lay, inputs = inputs, call = call, tol = tol}
  end
  return trials
end

local function rep(v, n)
  local r = {}
  for i = 1, n do r[i] = v end
  return r
end

-- The three layouts for every input, and narrowed for the first with the rest contiguous.
local function standard_layouts(n)
  return {rep("contiguous", n), rep("transposed", n), rep("narrowed", n)}
end

-- ---- matrix products -----------------------------------------------------------------------------
local function mnk(size)
  local i = index_of(size)
  return DIMS[i], DIMS[i % 5 + 1], DIMS[(i + 1) % 5 + 1]
end

local function products(case, size, dtype, H)
  local m, n, k = mnk(size)
  local v = function(shape, x) return H.values(shape, dtype, {-1, 1}, key(case, size, dtype, x)) end
  local trials
  if case.name == "bmm" then
    trials = over_layouts({v({3, m, k}, "a"), v({3, k, n}, "b")}, function(ins) return ins[1]:bmm(ins[2]) end,
      standard_layouts(2))
  elseif case.name == "linear" then
    trials = over_layouts({v({2, m, k}, "x"), v({n, k}, "w"), v({n}, "b")},
      function(ins) return nc.linear(ins[1], ins[2], ins[3]) end, standard_layouts(3))
    trials[#trials + 1] = {label = "no bias", layout = "transposed", inputs = {v({m, k}, "x"), v({n, k}, "w")},
                           call = function(ins) return nc.linear(ins[1], ins[2]) end}
  else
    local f = case.name == "mm" and function(ins) return ins[1]:mm(ins[2]) end or function(ins) return ins[1]:matmul(ins[2]) end
    trials = over_layouts({v({m, k}, "a"), v({k, n}, "b")}, f, standard_layouts(2))
    trials[#trials + 1] = {label = "transposed/contiguous", layouts = {"transposed", "contiguous"},
                           inputs = {v({m, k}, "a"), v({k, n}, "b")}, call = f}
    if case.name == "matmul" then
      -- batch dims that broadcast ([2,1,m,k] @ [3,k,n]), and 1-D operands
      trials[#trials + 1] = {label = "broadcast batch", layouts = {"contiguous", "transposed"},
                             inputs = {v({2, 1, m, k}, "ba"), v({3, k, n}, "bb")}, call = f}
      trials[#trials + 1] = {label = "vector @ matrix", layouts = {"transposed", "narrowed"},
                             inputs = {v({k}, "va"), v({k, n}, "b")}, call = f}
      trials[#trials + 1] = {label = "matrix @ vector", layouts = {"narrowed", "transposed"},
                             inputs = {v({m, k}, "a"), v({k}, "vb")}, call = f}
    end
  end
  return trials
end

-- ---- convolution ------------------------------------------------------------------------------------
-- {N, C, H, W, O, KH, KW, opts}: batch 1; stride 2 + groups + non-square; dilation + groups;
-- 20 channels per group with strides (2, 1); a tall 5x1 kernel over 24 channels at stride 1
-- (OpenCL's implicit-GEMM input gradient; the others take its columns route).
local CONVS = {
  {1, 2, 5, 5, 3, 3, 3, {padding = 1}},
  {2, 4, 9, 7, 6, 3, 2, {stride = 2, padding = {1, 0}, groups = 2}},
  {2, 6, 12, 10, 6, 3, 3, {padding = 2, dilation = 2, groups = 3}},
  {3, 40, 9, 7, 8, 3, 3, {stride = {2, 1}, padding = 1, groups = 2}},
  {2, 24, 17, 19, 32, 5, 1, {padding = {2, 0}}},
}

local function conv_trials(case, size, dtype, H)
  local g = CONVS[index_of(size)]
  local o = g[8]
  local groups = o.groups or 1
  local xs, ws = {g[1], g[2], g[3], g[4]}, {g[5], g[2] // groups, g[6], g[7]}
  local v = function(shape, x) return H.values(shape, dtype, {-1, 1}, key(case, size, dtype, x)) end
  local x, w, b = v(xs, "x"), v(ws, "w"), v({g[5]}, "b")
  local ys = ops.conv2d(x, w, nil, o).shape
  local dy = v(ys, "dy")
  if case.name == "conv2d" then
    local trials = over_layouts({x, w, b}, function(ins) return ops.conv2d(ins[1], ins[2], ins[3], o) end,
      standard_layouts(3), 10)
    trials[#trials + 1] = {label = "no bias", layout = "narrowed", inputs = {x, w},
                           call = function(ins) return ops.conv2d(ins[1], ins[2], nil, o) end, tol = 10}
    return trials
  elseif case.name == "conv2d_backward_input" then
    return over_layouts({dy, w}, function(ins) return ops.conv2d_backward_input(ins[1], ins[2], xs, o) end,
      standard_layouts(2), 10)
  end
  return over_layouts({dy, x}, function(ins) return ops.conv2d_backward_weight(ins[1], ins[2], ws, o) end,
    standard_layouts(2), 30)
end

-- ---- pooling ---------------------------------------------------------------------------------------
-- {input shape, kernel, opts} per size.
local MAXPOOLS = {
  {{1, 1, 4, 4}, 2, {}},
  {{2, 3, 9, 7}, 3, {stride = 2, padding = 1}},
  {{2, 2, 11, 9}, {3, 2}, {stride = {1, 2}, padding = {1, 0}, dilation = {2, 1}, ceil_mode = true}},
  {{3, 8, 7}, 3, {stride = 2, ceil_mode = true}},
  {{2, 4, 32, 30}, {2, 3}, {padding = {1, 1}}},
}
local AVGPOOLS = {
  {{1, 1, 4, 4}, 2, {}},
  {{2, 3, 9, 7}, 3, {stride = 2, padding = 1}},
  {{2, 2, 11, 9}, {3, 2}, {stride = {1, 2}, padding = {1, 0}, ceil_mode = true, count_include_pad = false}},
  {{3, 8, 7}, 3, {stride = 2, ceil_mode = true}},
  {{2, 4, 32, 30}, {2, 3}, {padding = {1, 1}, count_include_pad = false}},
}
local ADAPTIVE = {{{1, 1, 4, 4}, 1}, {{2, 3, 9, 7}, {4, 3}}, {{2, 2, 11, 9}, {5, 9}}, {{3, 8, 7}, {3, 5}}, {{2, 4, 32, 30}, 7}}

local function pool_trials(case, size, dtype, H)
  local i = index_of(size)
  local v = function(shape, x) return H.values(shape, dtype, {-3, 3}, key(case, size, dtype, x)) end
  local n = case.name
  if n == "adaptive_avg_pool2d" or n == "adaptive_avg_pool2d_backward" then
    local shape, out = ADAPTIVE[i][1], ADAPTIVE[i][2]
    local x = v(shape, "x")
    if n == "adaptive_avg_pool2d" then
      local t = over_layouts({x}, function(ins) return ops.adaptive_avg_pool2d(ins[1], out) end, standard_layouts(1))
      t[#t + 1] = {label = "nan/inf", layout = "contiguous", inputs = {H.specials(x:clone())},
                   call = function(ins) return ops.adaptive_avg_pool2d(ins[1], out) end}
      return t
    end
    local dy = v(ops.adaptive_avg_pool2d(x, out).shape, "dy")
    return over_layouts({dy}, function(ins) return ops.adaptive_avg_pool2d_backward(ins[1], shape) end,
      standard_layouts(1))
  end
  local max = n:find("^max") ~= nil
  local g = (max and MAXPOOLS or AVGPOOLS)[i]
  local shape, k, o = g[1], g[2], g[3]
  local x = v(shape, "x")
  if n == "max_pool2d" or n == "avg_pool2d" then
    local f = ops[n]
    local t = over_layouts({x}, function(ins) return f(ins[1], k, o) end, standard_layouts(1))
    t[#t + 1] = {label = "nan/inf", layout = "contiguous", inputs = {H.specials(x:clone())},
                 call = function(ins) return f(ins[1], k, o) end}
    return t
  end
  if max then
    local y, idx = ops.max_pool2d(x, k, o)
    local dy = v(y.shape, "dy")
    return over_layouts({dy, idx}, function(ins) return ops.max_pool2d_backward(ins[1], ins[2], shape, k, o) end,
      standard_layouts(2))
  end
  local dy = v(ops.avg_pool2d(x, k, o).shape, "dy")
  return over_layouts({dy}, function(ins) return ops.avg_pool2d_backward(ins[1], shape, k, o) end, standard_layouts(1))
end

-- ---- normalization ---------------------------------------------------------------------------------------
-- the last two split each channel over several work-groups on OpenCL (the one at 65537 over
-- dozens, with an odd spatial size; the one at 1000 with s % 4 == 0 for the four-wide pass)
local BN_SHAPES = {{2, 1}, {3, 2, 5}, {4, 3, 5, 2}, {8, 16, 9, 12}, {21, 3, 33, 31}}
local ROW_SHAPES = {{{1, 2}, 1}, {{3, 7}, 1}, {{2, 3, 11}, 2}, {{10, 100}, 1}, {{65, 1000}, 1}}

local function norm_trials(case, size, dtype, H)
  local i = index_of(size)
  local v = function(shape, x, dom) return H.values(shape, dtype, dom or {-2, 2}, key(case, size, dtype, x)) end
  local n = case.name
  if n == "batch_norm" or n == "batch_norm_backward" then
    local shape = BN_SHAPES[i]
    local c = shape[2]
    local x, w, b = v(shape, "x", {-1, 3}), v({c}, "w"), v({c}, "b")
    local rm, rv = v({c}, "rm"), v({c}, "rv", {0.5, 2})
    if n == "batch_norm" then
      -- running stats update in place: each call works on its own copies and returns them
      local function call(training)
        return function(ins)
          local m, s = ins[4]:clone(), ins[5]:clone()
          local y, mean, invstd = ops.batch_norm(ins[1], ins[2], ins[3], m, s, {training = training, momentum = 0.3})
          return {y, mean, invstd, m, s}
        end
      end
      local t = over_layouts({x, w, b, rm, rv}, call(true), standard_layouts(5), 10)
      t[#t + 1] = {label = "inference", layout = "narrowed", inputs = {x, w, b, rm, rv}, call = call(false), tol = 10}
      -- a mean far from 0 against the spread: the statistics must not cancel
      t[#t + 1] = {label = "large mean", layout = "contiguous", inputs = {x + 300, w, b, rm, rv}, call = call(true),
                   tol = 10}
      t[#t + 1] = {label = "no affine", layout = "transposed", inputs = {x}, tol = 10,
                   call = function(ins) return {ops.batch_norm(ins[1], nil, nil, nil, nil)} end}
      return t
    end
    local _, mean, invstd = ops.batch_norm(x, w, b, nil, nil)
    local dy = v(shape, "dy")
    local t = over_layouts({dy, x, w, mean, invstd},
      function(ins) return {ops.batch_norm_backward(ins[1], ins[2], ins[3], ins[4], ins[5])} end, standard_layouts(5), 30)
    t[#t + 1] = {label = "inference", layout = "contiguous", inputs = {dy, x, w, mean, invstd}, tol = 30,
                 call = function(ins) return {ops.batch_norm_backward(ins[1], ins[2], ins[3], ins[4], ins[5], {training = false})} end}
    return t
  end
  local shape, nd = ROW_SHAPES[i][1], ROW_SHAPES[i][2]
  local ns = {}
  for j = #shape - nd + 1, #shape do ns[#ns + 1] = shape[j] end
  local x, w, b, dy = v(shape, "x", {-1, 3}), v(ns, "w"), v(ns, "b"), v(shape, "dy")
  if n == "layer_norm" then
    local t = over_layouts({x, w, b}, function(ins) return {ops.layer_norm(ins[1], ns, ins[2], ins[3])} end,
      standard_layouts(3), 10)
    t[#t + 1] = {label = "no affine", layout = "narrowed", inputs = {x}, tol = 10,
                 call = function(ins) return {ops.layer_norm(ins[1], ns)} end}
    return t
  elseif n == "rms_norm" then
    local t = over_layouts({x, w}, function(ins) return {ops.rms_norm(ins[1], ns, ins[2])} end, standard_layouts(2), 10)
    t[#t + 1] = {label = "no weight", layout = "transposed", inputs = {x}, tol = 10,
                 call = function(ins) return {ops.rms_norm(ins[1], ns)} end}
    return t
  elseif n == "layer_norm_backward" then
    local _, mean, rstd = ops.layer_norm(x, ns, w, b)
    return over_layouts({dy, x, w, mean, rstd},
      function(ins) return {ops.layer_norm_backward(ins[1], ins[2], ns, ins[3], ins[4], ins[5])} end, standard_layouts(5), 30)
  end
  local _, rstd = ops.rms_norm(x, ns, w)
  return over_layouts({dy, x, w, rstd}, function(ins) return {ops.rms_norm_backward(ins[1], ins[2], ns, ins[3], ins[4])} end,
    standard_layouts(4), 30)
end

-- ---- group norm (an op defined by its op-table row) ----------------------------------------------------
-- [N, C, ...] shapes with a group count dividing C, one per size.
local GROUP_SHAPES = {{{1, 1}, 1}, {{2, 4, 3}, 2}, {{3, 6, 2, 2}, 3}, {{4, 8, 5, 5}, 4}, {{2, 32, 16, 16}, 8}}

local function group_norm_trials(case, size, dtype, H)
  local spec = GROUP_SHAPES[index_of(size)]
  local shape, groups = spec[1], spec[2]
  local c = shape[2]
  local function v(s, k, dom) return H.values(s, dtype, dom or {-1, 1}, key(case, size, dtype, k)) end
  local x, w, b = v(shape, "x", {-1, 3}), v({c}, "w"), v({c}, "b")
  if case.name == "group_norm" then
    local t = over_layouts({x, w, b}, function(ins) return nc.group_norm(ins[1], groups, ins[2], ins[3]) end,
      standard_layouts(3), 10)
    t[#t + 1] = {label = "no affine", layout = "narrowed", inputs = {x}, tol = 10,
                 call = function(ins) return nc.group_norm(ins[1], groups, nil, nil, {eps = 1e-3}) end}
    return t
  end
  -- the statistics the forward saves, from the same formula on the CPU (float64)
  local x64 = x:to("float64"):reshape({shape[1], groups, -1})
  local mean = x64:mean(3)
  local rstd = (x64:var(3, {unbiased = false}) + 1e-5):rsqrt()
  mean, rstd = mean:to(dtype), rstd:to(dtype)
  local dy = v(shape, "dy")
  local t = over_layouts({dy, x, w, mean, rstd},
    function(ins) return ops.group_norm_backward(ins[1], ins[2], groups, ins[3], ins[4], ins[5]) end, standard_layouts(5), 30)
  t[#t + 1] = {label = "no weight", layout = "contiguous", inputs = {dy, x, mean, rstd}, tol = 30,
               call = function(ins) return ops.group_norm_backward(ins[1], ins[2], groups, nil, ins[3], ins[4]) end}
  return t
end

-- ---- image transforms (ops defined by their op-table rows) -------------------------------------------
-- Batches [N, 3, H, W] per size, with per-sample parameters that cover boxes outside the image,
-- up- and downscaling, flips, every step order of adjust_color, and several blur widths.
local IMAGES = {{1, 3, 1, 1}, {2, 3, 3, 4}, {3, 3, 7, 5}, {4, 3, 16, 16}, {2, 3, 32, 32}}

local function image_trials(case, size, dtype, H)
  local shape = IMAGES[index_of(size)]
  local n, h, w = shape[1], shape[3], shape[4]
  local x = H.values(shape, dtype, {0, 1}, key(case, size, dtype, "x"))
  local p, call = {}, nil
  if case.name == "resized_crop" then
    for j = 0, n - 1 do
      p[#p + 1] = {j % 3 - 1, (2 * j) % 3 - 1, math.max(1, h - j % 2), math.max(1, w - (j + 1) % 2), j % 2}
    end
    local oh, ow = 2 * h + 1, math.max(1, w - 1)
    call = function(ins) return ops.resized_crop(ins[1], ins[2], oh, ow, {fill = 0.25}) end
  elseif case.name == "adjust_color" then
    local orders = {0 + 4 * 1 + 16 * 2 + 64 * 3, 3 + 4 * 2 + 16 * 1 + 64 * 0, 1 + 4 * 3 + 16 * 0 + 64 * 2, 2 + 4 * 0 + 16 * 3 + 64 * 1}
    for j = 0, n - 1 do
      p[#p + 1] = {0.6 + 0.3 * j, 1.4 - 0.25 * j, 0.5 + 0.4 * j, (j % 3 - 1) * 0.2 + 0.05, orders[j % 4 + 1], j % 2}
    end
    call = function(ins) return ops.adjust_color(ins[1], ins[2]) end
  else
    for j = 0, n - 1 do p[#p + 1] = 0.5 + 0.6 * j end
    local k = math.min(5, 2 * math.min(h, w) - 1)
    call = function(ins) return ops.gaussian_blur(ins[1], ins[2], k) end
  end
  return over_layouts({x, nc.tensor(p, {dtype = dtype, device = nc.device("cpu")})}, call, standard_layouts(2), 10)
end

-- ---- embedding and cross entropy ---------------------------------------------------------------------
local EMB = {{3, 1, {1}}, {7, 4, {2, 3}}, {33, 8, {5, 7}}, {1000, 16, {64}}, {500, 32, {4, 50}}}

local function embedding_trials(case, size, dtype, H)
  local e = EMB[index_of(size)]
  local w = H.values({e[1], e[2]}, dtype, {-1, 1}, key(case, size, dtype, "w"))
  local idx = H.values(e[3], "int64", {0, e[1] - 1}, key(case, size, dtype, "i"))
  if case.name == "embedding" then
    local t = over_layouts({w, idx}, function(ins) return ops.embedding(ins[1], ins[2]) end, standard_layouts(2))
    t[#t + 1] = {label = "int32 indices", layout = "contiguous", inputs = {w, idx:to("int32")},
                 call = function(ins) return ops.embedding(ins[1], ins[2]) end}
    return t
  end
  local shape = H.copy_shape(e[3])
  shape[#shape + 1] = e[2]
  local dout = H.values(shape, dtype, {-1, 1}, key(case, size, dtype, "g"))
  local t = over_layouts({dout, idx}, function(ins) return ops.embedding_backward(ins[1], ins[2], e[1]) end,
    standard_layouts(2), 10)
  t[#t + 1] = {label = "padding_idx", layout = "contiguous", inputs = {dout, idx}, tol = 10,
               call = function(ins) return ops.embedding_backward(ins[1], ins[2], e[1], {padding_idx = 0}) end}
  return t
end

-- {logits shape, opts} per size; targets hit ignore_index at some positions.
local CE = {
  {{1, 1}, {}},
  {{7, 3}, {label_smoothing = 0.1, ignore_index = 1}},
  {{4, 5, 3, 2}, {reduction = "sum", ignore_index = 0}},
  {{64, 1000}, {label_smoothing = 0.2}},
  {{300, 17}, {reduction = "none", ignore_index = 5, label_smoothing = 0.05}},
}

local function ce_trials(case, size, dtype, H)
  local c = CE[index_of(size)]
  local shape, o = c[1], c[2]
  local x = H.values(shape, dtype, {-4, 4}, key(case, size, dtype, "x"))
  local tshape = {shape[1]}
  for j = 3, #shape do tshape[#tshape + 1] = shape[j] end
  local t = H.values(tshape, "int64", {0, shape[2] - 1}, key(case, size, dtype, "t"))
  if case.name == "cross_entropy" then
    return over_layouts({x, t}, function(ins) return {ops.cross_entropy(ins[1], ins[2], o)} end, standard_layouts(2), 10)
  end
  local loss, lse = ops.cross_entropy(x, t, o)
  local g = H.values(loss.shape, dtype, {-1, 1}, key(case, size, dtype, "g"))
  return over_layouts({g, x, t, lse}, function(ins) return ops.cross_entropy_backward(ins[1], ins[2], ins[3], ins[4], o) end,
    standard_layouts(4), 10)
end

-- ---- rotary embeddings and flash attention (ops defined by their op-table rows) ---------------------
-- rope: {shape [..., T, Dh], theta} per size; positions are a shuffled, partly negative range.
local ROPE = {{{1, 2}, 10000}, {{7, 4}, 10000}, {{2, 3, 11, 6}, 500}, {{2, 4, 25, 10}, 10000}, {{1, 8, 64, 128}, 1e6}}

local function rope_trials(case, size, dtype, H)
  local spec = ROPE[index_of(size)]
  local shape, theta = spec[1], spec[2]
  local x = H.values(shape, dtype, {-2, 2}, key(case, size, dtype, "x"))
  local pos = H.values({shape[#shape - 1]}, "int64", {-5, 90}, key(case, size, dtype, "p"))
  local t = over_layouts({x, pos}, function(ins) return nc.rope(ins[1], ins[2], {theta = theta}) end,
    standard_layouts(2), 30)
  t[#t + 1] = {label = "inverse, int32 positions", layout = "contiguous", inputs = {x, pos:to("int32")}, tol = 30,
               call = function(ins) return nc.rope(ins[1], ins[2], {theta = theta, inverse = true}) end}
  return t
end

-- flash attention: {B, H, Hkv, Tq, Tk, D, causal} per size (GQA, odd T, more keys than queries).
local ATT = {{1, 1, 1, 1, 1, 2, true}, {1, 2, 1, 7, 7, 8, false}, {2, 4, 2, 33, 33, 16, true},
             {1, 2, 2, 5, 300, 64, true}, {1, 4, 1, 129, 129, 128, false}}

-- The log-sum-exp of each query's scores, from the naive formula on the CPU in float64.
local function naive_lse(q, k, causal, scale)
  local b, h, tq, d = q.shape[1], q.shape[2], q.shape[3], q.shape[4]
  local hkv, tk = k.shape[2], k.shape[3]
  local kx = k:to("float64"):unsqueeze(3):expand({b, hkv, h // hkv, tk, d}):reshape({b, h, tk, d})
  local s = q:to("float64"):matmul(kx:transpose(3, 4)) * scale
  if causal then
    local mask = {}
    for i = 1, tq do
      for j = 1, tk do mask[#mask + 1] = (j - 1 > i - 1 + tk - tq) and -math.huge or 0 end
    end
    s = s + nc.tensor(mask, {shape = {tq, tk}, dtype = "float64", device = nc.device("cpu")})
  end
  return s:logsumexp(4)
end

local function attention_trials(case, size, dtype, H)
  local a = ATT[index_of(size)]
  local b, h, hkv, tq, tk, d, causal = table.unpack(a)
  local function v(s, k, dom) return H.values(s, dtype, dom or {-1, 1}, key(case, size, dtype, k)) end
  local q, k, vv = v({b, h, tq, d}, "q", {-2, 2}), v({b, hkv, tk, d}, "k", {-2, 2}), v({b, hkv, tk, d}, "v")
  if case.name == "flash_attention" then
    local t = over_layouts({q, k, vv}, function(ins) return nc.flash_attention(ins[1], ins[2], ins[3], {causal = causal}) end,
      standard_layouts(3), 30)
    t[#t + 1] = {label = "scale 0.3, other mask", layout = "contiguous", inputs = {q, k, vv}, tol = 30,
                 call = function(ins) return nc.flash_attention(ins[1], ins[2], ins[3], {causal = not causal and tq <= tk, scale = 0.3}) end}
    return t
  end
  local lse = naive_lse(q, k, causal, 1 / math.sqrt(d)):to(dtype)
  local dout, delta = v({b, h, tq, d}, "g"), v({b, h, tq}, "delta", {-0.5, 0.5})
  local op = ops[case.name]
  return over_layouts({dout, q, k, vv, lse, delta},
    function(ins) return op(ins[1], ins[2], ins[3], ins[4], ins[5], ins[6], {causal = causal}) end, standard_layouts(6), 30)
end

-- ---- k-means steps (ops defined by their op-table rows) ----------------------------------------------
-- (N, D, K) per size; points lie near their own centroid (centroids in [-10, 10]^D, noise 0.3), so no
-- label is a near tie. Distances come from the GEMM form on the CPU backend (|x|^2 - 2 x.c + |c|^2,
-- which loses float32 digits to cancellation) and directly on OpenCL: tol 100.
local KM = {{1, 1, 1}, {7, 3, 2}, {33, 17, 5}, {1000, 8, 37}, {65537, 20, 129}}

local function kmeans_trials(case, size, dtype, H)
  local n, d, k = table.unpack(KM[index_of(size)])
  local cpu = nc.device("cpu")
  local C = H.values({k, d}, dtype, {-10, 10}, key(case, size, dtype, "c"))
  local ownl, dropl = {}, {}
  for i = 1, n do ownl[i], dropl[i] = (i * 7919) % k, (i * 7919) % k == k - 1 and i % 3 == 0 and -1 or (i * 7919) % k end
  local own = nc.tensor(ownl, {dtype = "int64", device = cpu})
  local X = C:index_select(1, own) + H.values({n, d}, dtype, {-0.3, 0.3}, key(case, size, dtype, "x"))
  if case.name == "kmeans_update" then
    local labels = nc.tensor(dropl, {dtype = "int64", device = cpu})
    local t = over_layouts({X, labels}, function(ins) return {ops.kmeans_update(ins[1], ins[2], k)} end,
      standard_layouts(2), 30)
    t[#t + 1] = {label = "k above the labels", layout = "contiguous", inputs = {X, own}, tol = 30,
                 call = function(ins) return {ops.kmeans_update(ins[1], ins[2], k + 3)} end}
    return t
  end
  local t = over_layouts({X, C}, function(ins) return {ops.kmeans_assign(ins[1], ins[2])} end, standard_layouts(2), 100)
  -- Hamerly's bounds: every third centroid moved by 2 along dim 1, the rest still
  local labels, dist = ops.kmeans_assign(X, C)
  local stepl = {}
  for j = 1, k do stepl[j] = j % 3 == 1 and 2 or 0 end
  local step = nc.tensor(stepl, {dtype = dtype, device = cpu})
  local C2 = (C + nc.cat({step:view({k, 1}), nc.zeros({k, d - 1}, {dtype = dtype, device = cpu})}, 2)):contiguous()
  local cn = (C2 * C2):sum(2)
  local gaps = (cn:view({k, 1}) + cn:view({1, k}) - C2:matmul(C2:transpose(1, 2)) * 2):clamp(0, nil)
  gaps = gaps:masked_fill(nc.eye(k, {dtype = "bool", device = cpu}), math.huge):min(2):sqrt() * 0.5
  local moves = nc.stack({step, gaps}, 2):contiguous()
  local bounded = over_layouts({X, C2, labels, dist, moves},
    function(ins) return {ops.kmeans_assign(ins[1], ins[2], ins[3], ins[4], ins[5])} end, standard_layouts(5), 100)
  for _, b in ipairs(bounded) do b.label = "bounds " .. b.label; t[#t + 1] = b end
  return t
end

return {
  {name = "kmeans_assign", trials = kmeans_trials, dtypes = F},
  {name = "kmeans_update", trials = kmeans_trials, dtypes = F},
  {name = "matmul", trials = products, dtypes = F, tol = 30},
  {name = "mm", trials = products, dtypes = F, tol = 30},
  {name = "bmm", trials = products, dtypes = F, tol = 30},
  {name = "linear", trials = products, dtypes = F, tol = 30},
  {name = "conv2d", trials = conv_trials, dtypes = F},
  {name = "conv2d_backward_input", trials = conv_trials, dtypes = F},
  {name = "conv2d_backward_weight", trials = conv_trials, dtypes = F},
  {name = "max_pool2d", trials = pool_trials, dtypes = F},
  {name = "max_pool2d_backward", trials = pool_trials, dtypes = F},
  {name = "avg_pool2d", trials = pool_trials, dtypes = F},
  {name = "avg_pool2d_backward", trials = pool_trials, dtypes = F},
  {name = "adaptive_avg_pool2d", trials = pool_trials, dtypes = F},
  {name = "adaptive_avg_pool2d_backward", trials = pool_trials, dtypes = F},
  {name = "batch_norm", trials = norm_trials, dtypes = F},
  {name = "batch_norm_backward", trials = norm_trials, dtypes = F},
  {name = "group_norm", trials = group_norm_trials, dtypes = F},
  {name = "group_norm_backward", trials = group_norm_trials, dtypes = F},
  {name = "resized_crop", trials = image_trials, dtypes = F},
  {name = "adjust_color", trials = image_trials, dtypes = F},
  {name = "gaussian_blur", trials = image_trials, dtypes = F},
  {name = "layer_norm", trials = norm_trials, dtypes = F},
  {name = "layer_norm_backward", trials = norm_trials, dtypes = F},
  {name = "rms_norm", trials = norm_trials, dtypes = F},
  {name = "rms_norm_backward", trials = norm_trials, dtypes = F},
  {name = "embedding", trials = embedding_trials, dtypes = F},
  {name = "embedding_backward", trials = embedding_trials, dtypes = F},
  {name = "cross_entropy", trials = ce_trials, dtypes = F},
  {name = "cross_entropy_backward", trials = ce_trials, dtypes = F},
  {name = "rope", trials = rope_trials, dtypes = F},
  {name = "flash_attention", trials = attention_trials, dtypes = F},
  {name = "flash_attention_backward_q", trials = attention_trials, dtypes = F},
  {name = "flash_attention_backward_kv", trials = attention_trials, dtypes = F},
}
