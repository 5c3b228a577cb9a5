-- The parity table: one entry per op (tests/parity/README.md says how to add one).
--
-- An entry is {name = <op name in nc.ops()>, trials = <builder>, ...options}; further variants of an
-- op (other options of the fused optimizer updates, "optim.*") have cases under names of their own. The builders below
-- (K.unary, K.binary, K.reduce, K.along, ...) turn an entry into trials for one size and dtype;
-- an op with its own calling convention writes its builder inline, returning trials:
--   {label = "...", layout = "contiguous"|"transposed"|"narrowed"|"broadcast",
--    layouts = {per input}, inputs = {CPU tensors or numbers}, bshape = <broadcast target>,
--    call = function(ins) return result(s) end,             -- results: tensors (or a list)
--    into = function(ins, dst) <write the result into dst> end,   -- optional: guard checks
--    tol = <threshold multiplier>, exact = <no float64 reference on the CPU device>}
-- Options read by the builders: domain = {lo, hi} of input values (domain_b: second input),
-- dtypes = {...} (default: the op table's, see DTYPES below), tol (default 1), args/opts
-- passed to the op.
local nc = require "netcl"

local K = {}
local F = {"float32", "float64"}
local FI = {"float32", "float64", "int32"}
local NUM = {"float32", "float64", "int32", "int64", "uint8"}
local ALL = {"float32", "float64", "int32", "int64", "uint8", "bool"}

local function key(case, size, dtype, extra) return case.name .. "/" .. size .. "/" .. dtype .. "/" .. (extra or "") end

-- Trials of one input in every layout, plus nan/inf values for floats.
local function one_input_trials(case, size, dtype, H, call, into)
  local shape = H.SHAPES[size]
  local dom = case.domain or {-3, 3}
  local x = H.values(shape, dtype, dom, key(case, size, dtype))
  local trials = {}
  local function add(label, layout, input, bshape)
    trials[#trials + 1] = {label = label, layout = layout, inputs = {input}, bshape = bshape, call = call, into = into}
  end
  add("contiguous", "contiguous", x)
  add("transposed", "transposed", x)
  add("narrowed", "narrowed", x)
  add("broadcast", "broadcast", H.values(H.broadcast_shape(shape), dtype, dom, key(case, size, dtype, "b")), shape)
  if H.FLOATS[dtype] then add("nan/inf", "contiguous", H.specials(x:clone())) end
  return trials
end

-- t:<name>(args..., opts)
function K.unary(case, size, dtype, H)
  local args = case.args or {}
  local call = function(ins) return ins[1][case.name](ins[1], table.unpack(args)) end
  local into = function(ins, dst)
    local a = {table.unpack(args)}
    a[#a + 1] = {out = dst}
    return ins[1][case.name](ins[1], table.unpack(a))
  end
  return one_input_trials(case, size, dtype, H, call, into)
end

-- nc.<name>(a, b): tensors in every layout, broadcasting, and a number on either side.
function K.binary(case, size, dtype, H)
  local shape = H.SHAPES[size]
  local da, db = case.domain or {-3, 3}, case.domain_b or case.domain or {-3, 3}
  local a = H.values(shape, dtype, da, key(case, size, dtype, "a"))
  local b = H.values(shape, dtype, db, key(case, size, dtype, "b"))
  local f = nc[case.name]
  local call = function(ins) return f(ins[1], ins[2]) end
  local into = function(ins, dst) return f(ins[1], ins[2], {out = dst}) end
  local trials = {}
  local function add(label, layout, x, y)
    trials[#trials + 1] = {label = label, layout = layout, inputs = {x, y}, call = call, into = into}
  end
  add("contiguous", "contiguous", a, b)
  add("transposed", "transposed", a, b)
  add("narrowed", "narrowed", a, b)
  add("broadcast", "contiguous", a, H.values(H.broadcast_shape(shape), dtype, db, key(case, size, dtype, "bb")))
  if dtype ~= "bool" then
    local s = H.FLOATS[dtype] and (case.scalar or 1.25) or math.floor(case.scalar_int or 2)
    add("scalar right", "narrowed", a, s)
    add("scalar left", "transposed", case.scalar_left or s, b)
  end
  if H.FLOATS[dtype] then add("nan/inf", "contiguous", H.specials(a:clone()), b) end
  return trials
end

-- t:<name>(dims, opts) over several dim sets, keepdim, and layouts.
function K.reduce(case, size, dtype, H)
  local shape = H.SHAPES[size]
  local dom = case.domain or {-3, 3}
  local x = H.values(shape, dtype, dom, key(case, size, dtype))
  local nd = #shape
  local trials = {}
  local function opts(keepdim, dst)
    local o = {keepdim = keepdim, out = dst}
    for k, v in pairs(case.opts or {}) do o[k] = v end
    return o
  end
  local function add(label, layout, input, dims, keepdim, bshape)
    local m = case.name
    trials[#trials + 1] = {
      label = label, layout = layout, inputs = {input}, bshape = bshape,
      call = function(ins) return ins[1][m](ins[1], dims, opts(keepdim)) end,
      into = type(dims) ~= "number" and function(ins, dst) return ins[1][m](ins[1], dims, opts(keepdim, dst)) end or nil,
    }
  end
  local single = case.single -- argmax/argmin: one dim or none
  add("all dims", "contiguous", x, nil, false)
  add("dim -1", "contiguous", x, single and -1 or {-1}, false)
  if nd >= 2 then add("dim 1 keepdim", "contiguous", x, single and 1 or {1}, true) end
  if nd >= 3 and not single then add("dims {1,3}", "contiguous", x, {1, 3}, false) end
  if case.indexed then add("dim -1 with indices", "transposed", x, -1, false) end
  add("transposed, all dims", "transposed", x, nil, false)
  add("transposed, dim -1", "transposed", x, single and -1 or {-1}, true)
  add("narrowed, dim 1", "narrowed", x, single and 1 or {1}, false)
  add("broadcast, dim -1", "broadcast", H.values(H.broadcast_shape(shape), dtype, dom, key(case, size, dtype, "b")),
    single and -1 or {-1}, false, shape)
  if H.FLOATS[dtype] then add("nan/inf, dim -1", "contiguous", H.specials(x:clone()), single and -1 or {-1}, false) end
  return trials
end

-- t:<name>(d): along one dim.
function K.along(case, size, dtype, H)
  local shape = H.SHAPES[size]
  local x = H.values(shape, dtype, case.domain or {-3, 3}, key(case, size, dtype))
  local trials = {}
  local function add(label, layout, input, d)
    local m = case.name
    trials[#trials + 1] = {
      label = label, layout = layout, inputs = {input},
      call = function(ins) return ins[1][m](ins[1], d) end,
      into = function(ins, dst) return ins[1][m](ins[1], d, {out = dst}) end,
    }
  end
  add("dim -1", "contiguous", x, -1)
  add("dim 1", "contiguous", x, 1)
  add("transposed, dim -1", "transposed", x, -1)
  add("narrowed, dim 1", "narrowed", x, 1)
  if H.FLOATS[dtype] then add("nan/inf, dim -1", "contiguous", H.specials(x:clone()), -1) end
  return trials
end

-- Index tensors: int64 positions below n.
local function positions(shape, n, H, k, dtype)
  return H.values(shape, dtype or "int64", {0, n - 1}, k)
end

local function idx_shape(shape, d, m)
  local s = {}
  for i, v in ipairs(shape) do s[i] = v end
  s[d] = m
  return s
end

local function dim_of(d, nd) return d < 0 and nd + d + 1 or d end

function K.index_select(case, size, dtype, H)
  local shape = H.SHAPES[size]
  local x = H.values(shape, dtype, {-3, 3}, key(case, size, dtype))
  local trials = {}
  for _, d in ipairs({1, -1}) do
    local n = shape[dim_of(d, #shape)]
    local idx = positions({5}, n, H, key(case, size, dtype, "i" .. d))
    for _, lay in ipairs({{"contiguous", "contiguous"}, {"transposed", "transposed"}, {"narrowed", "contiguous"}}) do
      trials[#trials + 1] = {
        label = lay[1] .. ", dim " .. d, layouts = lay, inputs = {x, idx},
        call = function(ins) return ins[1]:index_select(d, ins[2]) end,
        into = function(ins, dst) return ins[1]:index_select(d, ins[2], {out = dst}) end,
      }
    end
    trials[#trials + 1] = {
      label = "int32 index, dim " .. d, layouts = {"contiguous", "contiguous"},
      inputs = {x, positions({5}, n, H, key(case, size, dtype, "j" .. d), "int32")},
      call = function(ins) return ins[1]:index_select(d, ins[2]) end,
    }
  end
  return trials
end

function K.gather(case, size, dtype, H)
  local shape = H.SHAPES[size]
  local x = H.values(shape, dtype, {-3, 3}, key(case, size, dtype))
  local trials = {}
  for _, d in ipairs({1, -1}) do
    local dd = dim_of(d, #shape)
    local idx = positions(idx_shape(shape, dd, 3), shape[dd], H, key(case, size, dtype, "i" .. d))
    for _, lay in ipairs({{"contiguous", "contiguous"}, {"transposed", "transposed"}, {"narrowed", "narrowed"}}) do
      trials[#trials + 1] = {
        label = lay[1] .. ", dim " .. d, layouts = lay, inputs = {x, idx},
        call = function(ins) return ins[1]:gather(d, ins[2]) end,
        into = function(ins, dst) return ins[1]:gather(d, ins[2], {out = dst}) end,
      }
    end
  end
  return trials
end

function K.scatter_add(case, size, dtype, H)
  local shape = H.SHAPES[size]
  local x = H.values(shape, dtype, {-3, 3}, key(case, size, dtype))
  local trials = {}
  for _, d in ipairs({1, -1}) do
    local dd = dim_of(d, #shape)
    local m = math.min(shape[dd], 7) -- each output sums over the index's length along d
    local ishape = idx_shape(shape, dd, m)
    local idx = positions(ishape, shape[dd], H, key(case, size, dtype, "i" .. d))
    local src = H.values(ishape, dtype, {-3, 3}, key(case, size, dtype, "s" .. d))
    for _, lay in ipairs({{"contiguous", "contiguous", "contiguous"}, {"transposed", "transposed", "transposed"},
      {"narrowed", "contiguous", "narrowed"}}) do
      trials[#trials + 1] = {
        label = lay[1] .. ", dim " .. d, layouts = lay, inputs = {x, idx, src},
        call = function(ins) return ins[1]:scatter_add(d, ins[2], ins[3]) end,
        into = function(ins, dst) return ins[1]:scatter_add(d, ins[2], ins[3], {out = dst}) end,
      }
    end
  end
  return trials
end

-- nc.where(cond, a, b) and t:masked_fill(mask, v)
function K.where(case, size, dtype, H)
  local shape = H.SHAPES[size]
  local c = H.values(shape, "bool", {0, 1}, key(case, size, dtype, "c"))
  local a = H.values(shape, dtype, {-3, 3}, key(case, size, dtype, "a"))
  local b = H.values(shape, dtype, {-3, 3}, key(case, size, dtype, "b"))
  local cs = H.values(H.broadcast_shape(shape), "bool", {0, 1}, key(case, size, dtype, "cs"))
  local trials = {}
  local masked = case.name == "masked_fill"
  local v = dtype == "bool" and true or (H.FLOATS[dtype] and -0.5 or 5)
  local call = masked and function(ins) return ins[2]:masked_fill(ins[1], v) end or function(ins) return nc.where(ins[1], ins[2], ins[3]) end
  local into = masked and function(ins, dst) return ins[2]:masked_fill(ins[1], v, {out = dst}) end
    or function(ins, dst) return nc.where(ins[1], ins[2], ins[3], {out = dst}) end
  local function add(label, layout, ins)
    trials[#trials + 1] = {label = label, layout = layout, inputs = ins, call = call, into = into}
  end
  add("contiguous", "contiguous", {c, a, b})
  add("transposed", "transposed", {c, a, b})
  add("narrowed", "narrowed", {c, a, b})
  add("broadcast condition", "contiguous", {cs, a, b})
  if not masked and dtype ~= "bool" then add("scalar", "narrowed", {c, a, H.FLOATS[dtype] and 0.75 or 3}) end
  if H.FLOATS[dtype] then add("nan/inf", "contiguous", {c, H.specials(a:clone()), b}) end
  return trials
end

function K.one_hot(case, size, dtype, H)
  local shape = H.SHAPES[size]
  local idx = positions(shape, 5, H, key(case, size, dtype), dtype)
  return {
    {label = "5 classes", layout = "contiguous", inputs = {idx}, call = function(ins) return nc.one_hot(ins[1], 5) end},
    {label = "inferred, transposed", layout = "transposed", inputs = {idx}, call = function(ins) return nc.one_hot(ins[1]) end},
  }
end

function K.join(case, size, dtype, H)
  local shape = H.SHAPES[size]
  local trials = {}
  for _, d in ipairs({1, -1}) do
    local dd = dim_of(d, #shape)
    local a = H.values(shape, dtype, {-3, 3}, key(case, size, dtype, "a" .. d))
    local b = H.values(case.name == "cat" and idx_shape(shape, dd, 3) or shape, dtype, {-3, 3}, key(case, size, dtype, "b" .. d))
    local f = nc[case.name]
    for _, lay in ipairs({"contiguous", "transposed", "narrowed"}) do
      trials[#trials + 1] = {label = lay .. ", dim " .. d, layout = lay, inputs = {a, b, a},
                             call = function(ins) return f({ins[1], ins[2], ins[3]}, d) end}
    end
  end
  return trials
end

function K.split(case, size, dtype, H)
  local shape = H.SHAPES[size]
  local x = H.values(shape, dtype, {-3, 3}, key(case, size, dtype))
  local trials = {}
  for _, d in ipairs({1, -1}) do
    -- three pieces either way: split by a piece size, chunk by a count
    local n = case.name == "split" and math.max(1, math.ceil(shape[dim_of(d, #shape)] / 3)) or 3
    for _, lay in ipairs({"contiguous", "transposed", "narrowed"}) do
      trials[#trials + 1] = {label = lay .. ", dim " .. d, layout = lay, inputs = {x},
                             call = function(ins) return ins[1][case.name](ins[1], n, d) end}
    end
  end
  return trials
end

function K.sort(case, size, dtype, H)
  local shape = H.SHAPES[size]
  local x = H.values(shape, dtype, {-3, 3}, key(case, size, dtype))
  local trials = {}
  for _, d in ipairs({-1, 1}) do
    for _, flag in ipairs({false, true}) do
      for _, lay in ipairs({"contiguous", "transposed", "narrowed"}) do
        local call
        if case.name == "sort" then
          call = function(ins) return ins[1]:sort(d, {descending = flag}) end
        else
          local k = math.min(3, shape[dim_of(d, #shape)])
          call = function(ins) return ins[1]:topk(k, d, {largest = flag}) end
        end
        trials[#trials + 1] = {label = lay .. ", dim " .. d .. (flag and ", descending/largest" or ""), layout = lay, inputs = {x}, call = call}
      end
    end
    if H.FLOATS[dtype] then
      trials[#trials + 1] = {label = "nan/inf, dim " .. d, layout = "contiguous", inputs = {H.specials(x:clone())},
                             call = function(ins) return ins[1][case.name](ins[1], case.name == "topk" and 1 or d, case.name == "topk" and d or nil) end}
    end
  end
  return trials
end

-- Random draws: the same seed must give the same numbers on every device. The input is a
-- template tensor that carries the device and the layout to draw into.
function K.random(case, size, dtype, H)
  local shape = H.SHAPES[size]
  local trials = {}
  local draw = case.draw
  for _, lay in ipairs({"contiguous", "transposed"}) do
    local template = case.probabilities and H.values(shape, dtype, {0, 1}, key(case, size, dtype)) or nc.zeros(shape, {dtype = dtype})
    trials[#trials + 1] = {label = lay, layout = lay, inputs = {template}, exact = true, tol = case.tol,
                           call = function(ins)
                             nc.manual_seed(size * 31 + #lay)
                             return draw(ins[1], shape, dtype)
                           end}
  end
  return trials
end

-- Fused optimizer updates (netcl.optim's C entry points, not in the op table): the parameter
-- and state are contiguous (the updates require it) and cloned, since the update writes them in
-- place; the gradient comes in every layout. Results: the parameter, then each state tensor.
-- case.update(p, g, states) runs one update; case.state lists each state's domain.
function K.optim(case, size, dtype, H)
  local shape = H.SHAPES[size]
  local p = H.values(shape, dtype, {-3, 3}, key(case, size, dtype, "p"))
  local g = H.values(shape, dtype, {-2, 2}, key(case, size, dtype, "g"))
  local inputs = {p, g}
  for i, dom in ipairs(case.state) do inputs[#inputs + 1] = H.values(shape, dtype, dom, key(case, size, dtype, "s" .. i)) end
  local function call(ins)
    local outs, states = {ins[1]:clone()}, {}
    for i = 3, #ins do
      states[#states + 1] = ins[i]:clone()
      outs[#outs + 1] = states[#states]
    end
    case.update(outs[1], ins[2], states)
    return outs
  end
  local trials = {}
  for _, lay in ipairs({"contiguous", "transposed", "narrowed", "broadcast"}) do
    local layouts, ins = {"contiguous", lay}, inputs
    if lay == "broadcast" then
      ins = {p, H.values(H.broadcast_shape(shape), dtype, {-2, 2}, key(case, size, dtype, "gb"))}
      for i = 3, #inputs do ins[i] = inputs[i] end
    end
    trials[#trials + 1] = {label = "gradient " .. lay, layouts = layouts, inputs = ins, bshape = shape, call = call}
  end
  local sp = {H.specials(p:clone()), H.specials(g:clone())}
  for i = 3, #inputs do sp[i] = inputs[i] end
  trials[#trials + 1] = {label = "nan/inf", layout = "contiguous", inputs = sp, call = call}
  return trials
end

-- clip_grad_norm's sum of squares over a gradient in every layout (measure only: the input is
-- not written), and the clipping of a contiguous copy. Results: the total norm, the clipped copy.
function K.clip(case, size, dtype, H)
  local shape = H.SHAPES[size]
  local g = H.values(shape, dtype, {-2, 2}, key(case, size, dtype))
  local function call(ins)
    local total = nc._optim.clip_grad_norm({ins[1]}, math.huge)
    local copy = ins[1]:clone()
    nc._optim.clip_grad_norm({copy}, total / 2)
    return nc.tensor({total}, {dtype = ins[1].dtype}), copy
  end
  local trials = {}
  for _, lay in ipairs({"contiguous", "transposed", "narrowed"}) do
    trials[#trials + 1] = {label = lay, layout = lay, inputs = {g}, call = call}
  end
  trials[#trials + 1] = {label = "broadcast", layout = "broadcast", inputs = {H.values(H.broadcast_shape(shape), dtype,
    {-2, 2}, key(case, size, dtype, "b"))}, bshape = shape, call = call}
  return trials
end

-- x:<name>(args...) for a view (or the copy behind it); case.args(shape) gives the arguments.
-- case.contiguous: only contiguous inputs (view refuses layouts that would need a copy).
function K.view(case, size, dtype, H)
  local args = case.args(H.SHAPES[size])
  local call = function(ins) return ins[1][case.name](ins[1], table.unpack(args)) end
  local trials = one_input_trials(case, size, dtype, H, call)
  if not case.contiguous then return trials end
  local kept = {}
  for _, t in ipairs(trials) do
    if t.layout == "contiguous" then kept[#kept + 1] = t end
  end
  return kept
end

-- nc.autograd.<name>(input, target) on constant nodes, for every reduction (a loss) or along the
-- last dim (cosine_similarity); case.targets: int64 class targets for log-probabilities [N, C].
function K.loss(case, size, dtype, H)
  local shape = H.SHAPES[size]
  local ag = nc.autograd
  local x = H.values(shape, dtype, {-3, 3}, key(case, size, dtype, "x"))
  local trials = {}
  if case.targets then
    local n, c = shape[1], #shape > 1 and shape[#shape] or 1
    local logp = H.values({n, c}, dtype, {-3, 0}, key(case, size, dtype, "lp"))
    local t = positions({n}, c, H, key(case, size, dtype, "t"))
    for _, red in ipairs({"mean", "sum", "none"}) do
      trials[#trials + 1] = {label = red, layouts = {"transposed", "contiguous"}, inputs = {logp, t},
                             call = function(ins) return ag[case.name](ag.tensor(ins[1]), ins[2], {reduction = red}).value end}
    end
    return trials
  end
  local y = H.values(shape, dtype, case.domain_b or {-3, 3}, key(case, size, dtype, "y"))
  for _, lay in ipairs({"contiguous", "transposed", "narrowed"}) do
    if case.dim then
      trials[#trials + 1] = {label = lay, layout = lay, inputs = {x, y},
                             call = function(ins) return ag[case.name](ag.tensor(ins[1]), ag.tensor(ins[2]), {dim = -1}).value end}
    else
      for _, red in ipairs({"mean", "sum", "none"}) do
        trials[#trials + 1] = {label = lay .. ", " .. red, layout = lay, inputs = {x, y},
                               call = function(ins) return ag[case.name](ag.tensor(ins[1]), ag.tensor(ins[2]), {reduction = red}).value end}
      end
    end
  end
  return trials
end

-- nc.<name>(x, case.opts): the activations defined by their op-table rows (no out=, no methods).
function K.activation(case, size, dtype, H)
  return one_input_trials(case, size, dtype, H, function(ins) return nc[case.name](ins[1], case.opts) end)
end

-- nc.nn_ops.relu_backward(dy, y): both in every layout, nan and infinities in either, and a bfloat16 or
-- float16 y beside a float32 dy (the kernels' storage build reads it as it is), at offsets that
-- are and are not multiples of 4 (the vector and the scalar loops).
function K.relu_backward(case, size, dtype, H)
  local shape = H.SHAPES[size]
  local dy = H.values(shape, dtype, {-3, 3}, key(case, size, dtype, "dy"))
  local y = H.values(shape, dtype, {-3, 3}, key(case, size, dtype, "y"))
  local call = function(ins) return nc.nn_ops.relu_backward(ins[1], ins[2]) end
  local trials = {}
  local function add(label, layouts, a, b)
    trials[#trials + 1] = {label = label, layout = layouts[1], layouts = layouts, inputs = {a, b}, call = call}
  end
  add("contiguous", {"contiguous", "contiguous"}, dy, y)
  add("transposed", {"transposed", "transposed"}, dy, y)
  add("narrowed", {"narrowed", "narrowed"}, dy, y)
  add("narrowed dy", {"narrowed", "contiguous"}, dy, y)
  add("nan/inf dy", {"contiguous", "contiguous"}, H.specials(dy:clone()), y)
  add("nan/inf y", {"contiguous", "contiguous"}, dy, H.specials(y:clone()))
  if dtype == "float32" then
    for _, s in ipairs({"bfloat16", "float16"}) do
      add("y " .. s, {"contiguous", "contiguous"}, dy, y:to(s))
      add("y " .. s .. " narrowed", {"contiguous", "narrowed"}, dy, y:to(s))
      add("y " .. s .. " transposed", {"transposed", "transposed"}, dy, y:to(s))
    end
  end
  return trials
end

local function act(name, domain, opts)
  return {name = name, trials = K.activation, dtypes = F, domain = domain, opts = opts}
end

local function u(name, domain, extra)
  local c = {name = name, trials = K.unary, domain = domain}
  for k, v in pairs(extra or {}) do c[k] = v end
  return c
end

local function b(name, extra)
  local c = {name = name, trials = K.binary}
  for k, v in pairs(extra or {}) do c[k] = v end
  return c
end

local function r(name, extra)
  local c = {name = name, trials = K.reduce}
  for k, v in pairs(extra or {}) do c[k] = v end
  return c
end

local POS = {0.05, 4}

return {
  -- elementwise: unary
  u("abs", nil, {dtypes = NUM}), u("neg", nil, {dtypes = NUM}),
  u("exp", nil, {dtypes = FI}), u("log", POS, {dtypes = FI}), u("log1p", {-0.9, 4}, {dtypes = FI}),
  u("sqrt", POS, {dtypes = FI}), u("rsqrt", POS, {dtypes = FI}), u("sin", {-6, 6}, {dtypes = FI}),
  u("cos", {-6, 6}, {dtypes = FI}), u("tanh", nil, {dtypes = FI}), u("sigmoid", {-8, 8}, {dtypes = FI}),
  u("relu", nil, {dtypes = NUM}), u("gelu", nil, {dtypes = FI}), u("gelu_tanh", nil, {dtypes = FI}),
  u("silu", {-8, 8}, {dtypes = FI}), u("floor", nil, {dtypes = NUM}), u("ceil", nil, {dtypes = NUM}),
  u("round", {-5, 5}, {dtypes = NUM}), u("sign", nil, {dtypes = NUM}),
  u("clamp", nil, {dtypes = NUM, args = {-1, 2}}),
  u("isnan", nil, {dtypes = ALL}), u("isinf", nil, {dtypes = ALL}),
  -- activations: each with its default numbers and others; softplus and mish over both sides of
  -- the threshold (20, or beta x = threshold)
  act("elu", {-6, 6}), act("elu", nil, {alpha = 0.3}),
  act("softplus", {-30, 30}), act("softplus", nil, {beta = 2, threshold = 1.5}),
  act("softplus", nil, {beta = -0.5, threshold = 1}),
  act("mish", {-30, 30}), act("mish", {-3, 3}),
  act("leaky_relu"), act("leaky_relu", nil, {negative_slope = -0.5}),
  {name = "relu_backward", trials = K.relu_backward, dtypes = F},
  -- elementwise: binary and comparisons
  b("add", {dtypes = ALL}), b("sub", {dtypes = NUM}), b("mul", {dtypes = ALL}),
  b("div", {dtypes = {"float32", "float64", "int32", "int64"}, domain_b = {0.25, 3}, scalar_int = 3}),
  b("pow", {dtypes = {"float32", "float64", "int32", "int64"}, domain = {0.5, 2}, domain_b = {-2, 3}, scalar = 1.5, scalar_int = 3,
            scalar_left = 2}),
  b("maximum", {dtypes = ALL}), b("minimum", {dtypes = ALL}),
  -- floor_divide and remainder (// and %): divisors of both signs for floats; integer divisors
  -- avoid 0 (an error) and reach negative values through the scalar cases
  b("floor_divide", {dtypes = {"float32", "float64"}, domain = {-6, 6}}),
  b("remainder", {dtypes = {"float32", "float64"}, domain = {-6, 6}}),
  b("floor_divide", {dtypes = {"int32", "int64", "uint8"}, domain = {0, 50}, domain_b = {1, 7}, scalar_int = -3}),
  b("remainder", {dtypes = {"int32", "int64", "uint8"}, domain = {0, 50}, domain_b = {1, 7}, scalar_int = -3}),
  b("eq", {dtypes = ALL, domain = {-2, 2}}), b("ne", {dtypes = ALL, domain = {-2, 2}}), b("lt", {dtypes = ALL}),
  b("le", {dtypes = ALL, domain = {-2, 2}}), b("gt", {dtypes = ALL}), b("ge", {dtypes = ALL, domain = {-2, 2}}),
  {name = "where", trials = K.where, dtypes = ALL},
  {name = "masked_fill", trials = K.where, dtypes = ALL},
  -- reductions
  r("sum", {dtypes = {"float32", "float64", "int32", "int64", "bool"}, tol = 30}),
  r("mean", {dtypes = FI, tol = 30}),
  r("prod", {dtypes = {"float32", "float64", "int64"}, domain = {0.9, 1.1}, tol = 30}),
  r("max", {dtypes = NUM, indexed = true}), r("min", {dtypes = NUM, indexed = true}),
  r("argmax", {dtypes = NUM, single = true}), r("argmin", {dtypes = NUM, single = true}),
  r("var", {dtypes = FI, tol = 30}), r("std", {dtypes = FI, tol = 30}),
  r("norm", {dtypes = F, tol = 30}), {name = "norm", trials = K.reduce, dtypes = F, opts = {p = 1}, tol = 30},
  {name = "norm", trials = K.reduce, dtypes = F, opts = {p = "inf"}}, {name = "norm", trials = K.reduce, dtypes = F, opts = {p = 3}, tol = 30},
  r("logsumexp", {dtypes = F, tol = 30}),
  r("any", {dtypes = {"float32", "int32", "bool"}, domain = {0, 1}}), r("all", {dtypes = {"float32", "int32", "bool"}, domain = {0, 1}}),
  {name = "cumsum", trials = K.along, dtypes = {"float32", "float64", "int32", "int64"}, tol = 30},
  {name = "softmax", trials = K.along, dtypes = F, tol = 10},
  {name = "log_softmax", trials = K.along, dtypes = F, tol = 10},
  -- indexing and shape
  {name = "index_select", trials = K.index_select, dtypes = ALL},
  {name = "gather", trials = K.gather, dtypes = ALL},
  {name = "scatter_add", trials = K.scatter_add, dtypes = ALL},
  {name = "one_hot", trials = K.one_hot, dtypes = {"int32", "int64", "uint8"}},
  {name = "cat", trials = K.join, dtypes = ALL},
  {name = "stack", trials = K.join, dtypes = ALL},
  {name = "split", trials = K.split, dtypes = {"float32", "int64"}},
  {name = "chunk", trials = K.split, dtypes = {"float32", "int64"}},
  {name = "sort", trials = K.sort, dtypes = {"float32", "float64", "int32", "int64", "bool"}},
  {name = "topk", trials = K.sort, dtypes = {"float32", "float64", "int64"}},
  -- random
  {name = "uniform", trials = K.random, dtypes = F, draw = function(t) return t:uniform_(-2, 3) end},
  {name = "normal", trials = K.random, dtypes = F, tol = 10, draw = function(t) return t:normal_(1, 2) end},
  {name = "bernoulli", trials = K.random, dtypes = F, probabilities = true, draw = function(p) return nc.bernoulli(p) end},
  {name = "randint", trials = K.random, dtypes = {"int64", "int32", "float32"},
   draw = function(t, shape, dtype) return nc.randint(-50, 1000, shape, {dtype = dtype, device = t.device}) end},
  {name = "randperm", trials = K.random, dtypes = {"int64"},
   draw = function(t, shape, dtype) return nc.randperm(t:numel(), {dtype = dtype, device = t.device}) end},
  -- fill, copy, arange: the foundation every other op builds on
  {name = "fill", dtypes = ALL, trials = function(case, size, dtype, H)
     local v = H.FLOATS[dtype] and 2.5 or (dtype == "bool" and 1 or 3)
     return one_input_trials(case, size, dtype, H, function(ins) return ins[1]:clone():fill_(v) end,
                             function(_, dst) return dst:fill_(v) end)
   end},
  {name = "copy", dtypes = ALL, trials = function(case, size, dtype, H)
     return one_input_trials(case, size, dtype, H, function(ins) return ins[1]:clone() end,
                             function(ins, dst) return dst:copy_(ins[1]) end)
   end},
  {name = "arange", dtypes = NUM, trials = function(case, size, dtype, H)
     local n = H.SHAPES[size]
     local count = 1
     for _, d in ipairs(n) do count = count * d end
     count = math.min(count, 250) -- uint8 holds up to 255
     return {{label = "contiguous", layout = "contiguous", inputs = {H.values({1}, dtype, {0, 1}, "arange")},
              call = function(ins) return nc.arange(1, count + 1, 1, {dtype = dtype, device = ins[1].device}) end}}
   end},
  -- views and the copies behind them: the view's elements, read back through the device's copy
  {name = "view", dtypes = ALL, trials = K.view, contiguous = true, args = function() return {{-1}} end},
  {name = "reshape", dtypes = ALL, trials = K.view, args = function(shape) return {{#shape > 1 and shape[#shape] or 1, -1}} end},
  {name = "transpose", dtypes = ALL, trials = K.view, args = function(shape) return {1, #shape} end},
  {name = "permute", dtypes = ALL, trials = K.view, args = function(shape)
     local p = {}
     for i = #shape, 1, -1 do p[#p + 1] = i end
     return {p}
   end},
  {name = "narrow", dtypes = ALL, trials = K.view, args = function(shape) return {1, shape[1] > 1 and 2 or 1, 1} end},
  {name = "select", dtypes = ALL, trials = K.view, args = function(shape) return {1, shape[1]} end},
  {name = "expand", dtypes = ALL, trials = K.view, args = function(shape) return {{2, table.unpack(shape)}} end},
  {name = "squeeze", dtypes = ALL, trials = K.view, args = function() return {} end},
  {name = "unsqueeze", dtypes = ALL, trials = K.view, args = function() return {1} end},
  {name = "flatten", dtypes = ALL, trials = K.view, args = function() return {} end},
  {name = "contiguous", dtypes = ALL, trials = K.view, args = function() return {} end},
  {name = "clone", dtypes = ALL, trials = K.view, args = function() return {} end},
  -- composed differentiable ops, through their autograd form on constant nodes
  {name = "dropout", dtypes = F, trials = function(case, size, dtype, H)
     return one_input_trials(case, size, dtype, H, function(ins)
       nc.manual_seed(size)
       return nc.autograd.dropout(nc.autograd.tensor(ins[1]), 0.3, {training = true}).value
     end)
   end},
  {name = "nll_loss", dtypes = F, trials = K.loss, targets = true},
  {name = "mse_loss", dtypes = F, trials = K.loss},
  {name = "l1_loss", dtypes = F, trials = K.loss},
  {name = "bce_with_logits", dtypes = F, trials = K.loss, domain_b = {0, 1}},
  {name = "cosine_similarity", dtypes = F, trials = K.loss, dim = true},
  -- fused optimizer updates (sgd_step, rmsprop_step, adam_step) and clip_grad_norm's partial sums
  -- (sum_squares), netcl/optim.h
  {name = "sgd_step", trials = K.optim, dtypes = F, state = {{-1, 1}}, update = function(p, g, s)
     nc._optim.sgd_step(p, g, s[1], false, {lr = 0.1, momentum = 0.9, dampening = 0, weight_decay = 0.01, nesterov = true})
   end},
  {name = "optim.sgd_first", trials = K.optim, dtypes = F, state = {{-1, 1}}, update = function(p, g, s)
     nc._optim.sgd_step(p, g, s[1], true, {lr = 0.1, momentum = 0.9, dampening = 0.2, weight_decay = 0, nesterov = false})
   end},
  {name = "rmsprop_step", trials = K.optim, dtypes = F, tol = 10, state = {{1, 2}, {-0.5, 0.5}, {-1, 1}},
   update = function(p, g, s)
     nc._optim.rmsprop_step(p, g, s[1], s[2], s[3], {lr = 0.01, alpha = 0.9, eps = 1e-8, weight_decay = 0.1,
                                                     momentum = 0.5, centered = true})
   end},
  {name = "adam_step", trials = K.optim, dtypes = F, tol = 10, state = {{-1, 1}, {0.01, 2}, {0.01, 2}},
   update = function(p, g, s)
     nc._optim.adam_step(p, g, s[1], s[2], s[3], 3, false, {lr = 0.01, betas = {0.9, 0.999}, eps = 1e-8,
                                                             weight_decay = 0.1, amsgrad = true})
   end},
  {name = "optim.adamw", trials = K.optim, dtypes = F, tol = 10, state = {{-1, 1}, {0.01, 2}}, update = function(p, g, s)
     nc._optim.adam_step(p, g, s[1], s[2], nil, 7, true, {lr = 0.01, betas = {0.5, 0.99}, eps = 1e-8,
                                                          weight_decay = 0.1, amsgrad = false})
   end},
  {name = "sum_squares", trials = K.clip, dtypes = F, tol = 10},
  -- netcl.ssl's momentum update (op-table row ema_update): target in place, online in any layout
  {name = "ema_update", trials = K.optim, dtypes = F, state = {}, update = function(p, g)
     nc.nn_ops.ema_update(p, g, {momentum = 0.9})
   end},
}
