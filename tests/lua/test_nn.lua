-- netcl.nn: the Module protocol (classes, registration on assignment, traversal, modes,
-- devices, gradients), state dicts and their errors, tostring, Sequential's error re-raise,
-- and each layer's values against the same computation written with tensor ops.
local lu = require "luaunit"
local nc = require "netcl"
local ag = require "netcl.autograd"
local nn = require "netcl.nn"
local H = require "helpers"

local dev = H.device()

local function keys(t)
  local out = {}
  for k in pairs(t) do out[#out + 1] = k end
  table.sort(out)
  return out
end

local function names(iter)
  local out = {}
  for name in iter do out[#out + 1] = name end
  return out
end

local function value(x) return ag.is_node(x) and x.value or x end

-- A small net with every kind of registration: a layer, a container, a buffer, a parameter
-- of its own and a plain attribute.
local Net = nn.Module:extend("Net")
function Net:init(hidden)
  self.hidden = hidden
  self.fc1 = nn.Linear(3, hidden)
  self.body = nn.Sequential(nn.ReLU(), nn.BatchNorm1d(hidden), nn.Linear(hidden, 2, {bias = false}))
  self.scale = ag.param(nc.ones({2}))
  self:register_buffer("calls", nc.zeros({1}))
end
function Net:forward(x)
  return self.body(self.fc1(x)) * self.scale
end

TestModule = {}

function TestModule:setUp() nc.manual_seed(1) end

function TestModule:test_class_and_call()
  local net = Net(4)
  lu.assertEquals(getmetatable(net).__name, "Net")
  lu.assertTrue(nn.is_module(net))
  lu.assertFalse(nn.is_module({}))
  lu.assertEquals(net.hidden, 4)
  lu.assertTrue(net.training)
  local y = net(nc.randn({5, 3}))
  lu.assertEquals(y.shape, {5, 2})
  -- a subclass inherits methods and metamethods, and can call its parent's init
  local Wide = Net:extend("Wide")
  function Wide:init() Net.init(self, 16) self.extra = nn.Identity() end
  local w = Wide()
  lu.assertEquals(w.fc1.out_features, 16)
  lu.assertEquals(w(nc.randn({4, 3})).shape, {4, 2})
  lu.assertStrContains(tostring(w), "Wide")
  -- a class without forward says so
  local Empty = nn.Module:extend("Empty")
  H.assert_error(function() Empty()(1) end, "Empty: forward is not defined")
  H.assert_error(function() nn.Module:extend() end, "a class needs a name")
end

function TestModule:test_registration_order_and_names()
  local net = Net(4)
  lu.assertEquals(names(net:named_parameters()),
    {"scale", "fc1.weight", "fc1.bias", "body.1.weight", "body.1.bias", "body.2.weight"})
  lu.assertEquals(#net:parameters(), 6)
  lu.assertEquals(names(net:named_children()), {"fc1", "body"})
  lu.assertEquals(#net:children(), 2)
  lu.assertEquals(names(net:named_modules()), {"", "fc1", "body", "body.0", "body.1", "body.2"})
  lu.assertEquals(#net:modules(), 6)
  lu.assertIs(net:modules()[1], net)
  lu.assertEquals(names(net:named_buffers()),
    {"calls", "body.1.running_mean", "body.1.running_var", "body.1.num_batches_tracked"})
  -- 3*4+4 + 4+4 + 4*2 + 2
  lu.assertEquals(net:num_parameters(), 16 + 8 + 8 + 2)
  lu.assertEquals(keys(net:state_dict()), {"body.1.bias", "body.1.num_batches_tracked", "body.1.running_mean",
    "body.1.running_var", "body.1.weight", "body.2.weight", "calls", "fc1.bias", "fc1.weight", "scale"})
  lu.assertEquals(net:state_dict_keys(), {"scale", "calls", "fc1.weight", "fc1.bias", "body.1.weight",
    "body.1.bias", "body.1.running_mean", "body.1.running_var", "body.1.num_batches_tracked", "body.2.weight"})
end

function TestModule:test_reassignment_and_removal()
  local m = nn.Module()
  m.a = 5                            -- a plain field ...
  m.a = nn.Linear(2, 2)              -- ... replaced by a module: registered
  lu.assertEquals(names(m:named_parameters()), {"a.weight", "a.bias"})
  m.a = nil
  lu.assertEquals(#m:parameters(), 0)
  lu.assertNil(m.a)
  m.w = ag.param(nc.zeros({3}))
  m.t = nc.zeros({3})                -- a Tensor is a plain field, not state
  lu.assertEquals(keys(m:state_dict()), {"w"})
  m:register_buffer("t", m.t)
  lu.assertEquals(keys(m:state_dict()), {"t", "w"})
  m.t = nc.ones({4})                 -- re-assigning a buffer keeps it a buffer
  lu.assertEquals(m:state_dict().t.shape, {4})
  m:register_buffer("scratch", nc.zeros({1}), {persistent = false})
  lu.assertEquals(keys(m:state_dict()), {"t", "w"})
  lu.assertEquals(names(m:named_buffers()), {"t", "scratch"})
  m.w = nil
  lu.assertEquals(#m:parameters(), 0)
  -- a Node that is not a leaf is a plain field
  m.h = ag.param(nc.ones({2})) * 2
  lu.assertEquals(#m:parameters(), 0)
  -- explicit registration of a frozen parameter
  local frozen = ag.tensor(nc.ones({2}))
  m:register_parameter("frozen", frozen)
  lu.assertEquals(names(m:named_parameters()), {"frozen"})
  H.assert_error(function() m:register_buffer("b", ag.param(nc.ones({1}))) end, "must be a Tensor")
  H.assert_error(function() m:register_parameter("p", nc.ones({1})) end, "must be a leaf Node")
  H.assert_error(function() m:register_buffer("a.b", nc.ones({1})) end, "without '.'")
  H.assert_error(function() m[1] = 2 end, "field names must be strings")
end

function TestModule:test_shared_modules_and_parameters()
  local shared = nn.Linear(2, 2)
  local m = nn.Module()
  m.a = shared
  m.b = shared
  m.c = nn.Linear(2, 2, {bias = false})
  m.c.weight = shared.weight          -- weight tying
  -- parameters() and num_parameters() count each once; state_dict names every path, as PyTorch
  lu.assertEquals(names(m:named_parameters()), {"a.weight", "a.bias"})
  lu.assertEquals(m:num_parameters(), 6)
  lu.assertEquals(m:state_dict_keys(), {"a.weight", "a.bias", "b.weight", "b.bias", "c.weight"})
  local sd = {}
  for k, v in pairs(m:state_dict()) do sd[k] = v:clone() end
  m:load_state_dict(sd)
  lu.assertEquals(#m:modules(), 3)
  lu.assertStrContains(tostring(m), "shared, listed above")
  -- a module that contains itself: traversals visit it once, a state dict is an error
  local loop = nn.Module()
  loop.inner = nn.Module()
  loop.inner.back = loop
  lu.assertEquals(#loop:modules(), 2)
  H.assert_error(function() loop:state_dict() end, "module 'inner.back' contains itself")
end

function TestModule:test_train_eval()
  local net = Net(4)
  lu.assertIs(net:eval(), net)
  for _, m in ipairs(net:modules()) do lu.assertFalse(m.training) end
  net:train()
  for _, m in ipairs(net:modules()) do lu.assertTrue(m.training) end
  net.body:train(false)
  lu.assertTrue(net.training)
  lu.assertFalse(net.body[2].training)
  H.assert_error(function() net:train("yes") end, "flag must be a boolean")
end

function TestModule:test_gradients_and_zero_grad()
  local net = Net(4)
  local x = nc.randn({6, 3})
  local tape = ag.Tape()
  local loss = tape:record(function() return (net(x) ^ 2):mean() end)
  tape:backward(loss)
  for name, p in net:named_parameters() do
    lu.assertNotNil(p.grad, name .. " has no gradient")
    lu.assertEquals(p.grad.shape, p.shape)
  end
  net:zero_grad()
  for _, p in ipairs(net:parameters()) do lu.assertNil(p.grad) end
end

function TestModule:test_to_device_and_dtype()
  local cpu = nc.device("cpu")
  local net = Net(4)
  local node = net.fc1.weight
  net:to("float64")
  for _, p in ipairs(net:parameters()) do lu.assertEquals(p.dtype, "float64") end
  lu.assertIs(net.fc1.weight, node) -- the same Node: optimizers keep working
  lu.assertEquals(net.body[2].running_mean.dtype, "float64")
  lu.assertEquals(net.body[2].num_batches_tracked.dtype, "int64")
  lu.assertEquals(net(nc.randn({2, 3}, {dtype = "float64"})).dtype, "float64")
  net:to("float32")
  local w = net.fc1.weight.value:tolist()
  net:to(cpu)
  lu.assertIs(net.fc1.weight.device, cpu)
  lu.assertIs(net.body[2].running_var.device, cpu)
  H.assert_close(net.fc1.weight.value, w, 0)
  net:to(dev)
  lu.assertIs(net.fc1.weight.device, dev)
  lu.assertEquals(net(nc.randn({2, 3})).shape, {2, 2})
  -- moved parameters stay tied
  local m = nn.Module()
  m.a = nn.Linear(2, 2)
  m.b = nn.Linear(2, 2)
  m.b.weight = m.a.weight
  m:to("float64")
  lu.assertIs(m.a.weight, m.b.weight)
  H.assert_error(function() net:to(42) end, "expected a Device")
end

function TestModule:test_tostring_tree()
  local s = tostring(Net(4))
  local lines = {}
  for l in s:gmatch("[^\n]+") do lines[#lines + 1] = l end
  lu.assertEquals(lines[1], "Net  {scale [2]}  34 params")
  lu.assertEquals(lines[2], "  (fc1): Linear(3 -> 4)  {weight [4, 3], bias [4]}  16 params")
  lu.assertEquals(lines[3], "  (body): Sequential  16 params")
  lu.assertEquals(lines[4], "    (0): ReLU")
  lu.assertEquals(lines[5], "    (1): BatchNorm1d(4, eps=1e-05, momentum=0.1)  {weight [4], bias [4]}  8 params")
  lu.assertEquals(lines[6], "    (2): Linear(4 -> 2, bias=false)  {weight [2, 4]}  8 params")
  lu.assertEquals(#lines, 6)
end

-- ---- state dicts -------------------------------------------------------------------------------
TestStateDict = {}

function TestStateDict:setUp() nc.manual_seed(2) end

function TestStateDict:test_round_trip()
  local a, b = Net(4), Net(4)
  local x = nc.randn({5, 3})
  a(x) -- training step: running statistics move away from their initial values
  a:eval()
  b:eval()
  local sd = a:state_dict()
  lu.assertIs(sd["fc1.weight"], sd["fc1.weight"])
  lu.assertEquals(sd["body.1.num_batches_tracked"]:item(), 1)
  local r = b:load_state_dict(sd)
  lu.assertEquals(r.missing_keys, {})
  lu.assertEquals(r.unexpected_keys, {})
  for k, v in pairs(b:state_dict()) do H.assert_close(v, sd[k], 0, k) end
  H.assert_close(value(b(x)), value(a(x)), 0, "outputs")
  -- the state dict shares storage with the model: clone for a snapshot
  local snap = {}
  for k, v in pairs(a:state_dict()) do snap[k] = v:clone() end
  a.fc1.weight.value:fill_(7)
  lu.assertEquals(a:state_dict()["fc1.weight"]:tolist()[1][1], 7)
  a:load_state_dict(snap)
  H.assert_close(a.fc1.weight.value, snap["fc1.weight"], 0)
end

function TestStateDict:test_dtype_and_device_conversion()
  local a, b = Net(4), Net(4)
  local sd = {}
  for k, v in pairs(a:state_dict()) do
    sd[k] = v.dtype == "float32" and v:to("float64"):to(nc.device("cpu")) or v
  end
  b:load_state_dict(sd)
  lu.assertEquals(b.fc1.weight.dtype, "float32")
  lu.assertIs(b.fc1.weight.device, dev)
  H.assert_close(b.fc1.weight.value, a.fc1.weight.value, 0)
end

function TestStateDict:test_errors()
  local net = Net(4)
  local sd = net:state_dict()
  local before = net.fc1.weight.value:clone()
  local bad = {}
  for k, v in pairs(sd) do bad[k] = v end
  bad["fc1.bias"] = nil
  bad["fc9.weight"] = nc.zeros({1})
  bad["fc1.weight"] = nc.zeros({3, 4})
  local err = H.assert_error(function() net:load_state_dict(bad) end,
    "error(s) loading state_dict for Net",
    'size mismatch for "fc1.weight": the checkpoint has shape [3, 4], the model [4, 3]',
    'missing key(s) in state_dict: "fc1.bias"',
    'unexpected key(s) in state_dict: "fc9.weight"')
  lu.assertStrContains(err, "Net.load_state_dict")
  -- nothing was copied
  H.assert_close(net.fc1.weight.value, before, 0)
  -- strict=false reports missing and unexpected keys, but still refuses a shape mismatch
  bad["fc1.weight"] = sd["fc1.weight"]
  local r = net:load_state_dict(bad, {strict = false})
  lu.assertEquals(r.missing_keys, {"fc1.bias"})
  lu.assertEquals(r.unexpected_keys, {"fc9.weight"})
  bad["fc1.weight"] = nc.zeros({4})
  H.assert_error(function() net:load_state_dict(bad, {strict = false}) end, 'size mismatch for "fc1.weight"')
  bad["fc1.weight"] = "weights"
  H.assert_error(function() net:load_state_dict(bad, {strict = false}) end, '"fc1.weight" is a string')
  H.assert_error(function() net:load_state_dict(42) end, "expected a table of Tensors")
  H.assert_error(function() net:load_state_dict(sd, {strick = true}) end, "unknown option 'strick'")
end

-- ---- containers -----------------------------------------------------------------------------------
TestContainers = {}

function TestContainers:test_sequential()
  nc.manual_seed(3)
  local s = nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 2))
  lu.assertEquals(#s, 3)
  lu.assertEquals(getmetatable(s[2]).__name, "Tanh")
  lu.assertNil(s[4])
  local n = 0
  for i, m in ipairs(s) do n = i lu.assertTrue(nn.is_module(m)) end
  lu.assertEquals(n, 3)
  lu.assertEquals(names(s:named_parameters()), {"0.weight", "0.bias", "2.weight", "2.bias"})
  local x = nc.randn({2, 3})
  local manual = s[3](s[2](s[1](x)))
  H.assert_close(value(s(x)), value(manual), 1e-6)
  s:append(nn.Sigmoid())
  lu.assertEquals(#s, 4)
  s[4] = nn.Identity()
  lu.assertEquals(getmetatable(s[4]).__name, "Identity")
  local t = nn.Sequential{nn.ReLU(), nn.ReLU()}
  lu.assertEquals(#t, 2)
  H.assert_error(function() nn.Sequential(nn.ReLU(), 5) end, "argument 2 must be a Module")
  H.assert_error(function() s[9] = nn.ReLU() end, "needs an existing index")
end

function TestContainers:test_sequential_error_names_the_child()
  local s = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(5, 2))
  H.assert_error(function() s(nc.randn({2, 3})) end, "nn.Sequential: child 3 (Linear): ", "netcl.linear")
  -- nested: the path reads outside in
  local outer = nn.Sequential(nn.Identity(), s)
  H.assert_error(function() outer(nc.randn({2, 3})) end,
    "nn.Sequential: child 2 (Sequential): nn.Sequential: child 3 (Linear): ")
end

function TestContainers:test_module_list()
  local l = nn.ModuleList({nn.Linear(2, 2), nn.Linear(2, 3)})
  lu.assertEquals(#l, 2)
  l:append(nn.ReLU())
  l:extend({nn.Tanh(), nn.Identity()})
  lu.assertEquals(#l, 5)
  lu.assertEquals(names(l:named_parameters()), {"0.weight", "0.bias", "1.weight", "1.bias"})
  local holder = nn.Module()
  holder.layers = l
  lu.assertEquals(names(holder:named_parameters())[3], "layers.1.weight")
  H.assert_error(function() l(nc.zeros({1})) end, "nn.ModuleList: has no forward")
  H.assert_error(function() nn.ModuleList(nn.ReLU()) end, "expected an array of Modules")
  -- subclassing still works: the class-level extend makes a class
  local MyList = nn.ModuleList:extend("MyList")
  lu.assertEquals(#MyList({nn.ReLU()}), 1)
end

-- ---- layers ---------------------------------------------------------------------------------------
TestLayers = {}

function TestLayers:setUp() nc.manual_seed(4) end

function TestLayers:test_linear_init_and_forward()
  local l = nn.Linear(5, 3)
  lu.assertEquals(l.weight.shape, {3, 5})
  lu.assertEquals(l.bias.shape, {3})
  local bound = 1 / math.sqrt(5)
  for _, v in ipairs(H.flat(l.weight.value:tolist())) do lu.assertTrue(math.abs(v) <= bound) end
  -- the values are nc.rand's, scaled: the same seed reproduces them on every device
  nc.manual_seed(4)
  local u = nc.rand({3, 5})
  H.assert_close(l.weight.value, u * (2 * bound) - bound, 1e-6)
  local x = nc.randn({4, 5})
  H.assert_close(value(l(x)), x:matmul(l.weight.value:transpose(1, 2)) + l.bias.value, 1e-5)
  local nb = nn.Linear(5, 3, {bias = false})
  lu.assertNil(nb.bias)
  lu.assertEquals(#nb:parameters(), 1)
  H.assert_error(function() nn.Linear(5, 3, {biass = false}) end, "nn.Linear: unknown option 'biass'")
  H.assert_error(function() nn.Linear(5.5, 3) end, "nn.Linear: in_features must be an integer")
  H.assert_error(function() nn.Linear(5, 3, {bias = "no"}) end, "bias must be a boolean")
end

function TestLayers:test_conv2d()
  local c = nn.Conv2d(4, 6, 3, {padding = 1, stride = 2, groups = 2})
  lu.assertEquals(c.weight.shape, {6, 2, 3, 3})
  lu.assertEquals(c.bias.shape, {6})
  local bound = 1 / math.sqrt(2 * 9)
  for _, v in ipairs(H.flat(c.weight.value:tolist())) do lu.assertTrue(math.abs(v) <= bound) end
  local y = c(nc.randn({2, 4, 7, 7}))
  lu.assertEquals(y.shape, {2, 6, 4, 4})
  lu.assertEquals(nn.Conv2d(3, 8, {3, 5}, {bias = false}).weight.shape, {8, 3, 3, 5})
  local same = nn.Conv2d(2, 2, 5, {padding = "same", dilation = 2})
  lu.assertEquals(same.padding, {4, 4})
  lu.assertEquals(same(nc.randn({1, 2, 9, 9})).shape, {1, 2, 9, 9})
  -- a 1x1 convolution is a linear map over channels
  local one = nn.Conv2d(3, 2, 1)
  local x = nc.randn({1, 3, 2, 2})
  local flat = x:view({3, 4}):transpose(1, 2)
  local expect = flat:matmul(one.weight.value:view({2, 3}):transpose(1, 2)) + one.bias.value
  H.assert_close(value(one(x)):view({2, 4}):transpose(1, 2):contiguous(), expect, 1e-5)
  H.assert_error(function() nn.Conv2d(3, 4, 3, {groups = 2}) end, "must be divisible by groups")
  H.assert_error(function() nn.Conv2d(2, 2, 4, {padding = "same"}) end, "asymmetric padding")
  H.assert_error(function() nn.Conv2d(2, 2, 3, {padding = "full"}) end, "padding must be")
end

function TestLayers:test_batchnorm_train_and_eval()
  local bn = nn.BatchNorm1d(3)
  lu.assertEquals(bn.running_mean.shape, {3})
  lu.assertEquals(bn.num_batches_tracked.dtype, "int64")
  local rows = {{1, 2, 3}, {2, 0, 5}, {6, 4, 1}, {3, 2, 2}}
  local x = nc.tensor(rows)
  local y = value(bn(x))
  -- training: batch statistics; running stats move by momentum 0.1 with the unbiased variance
  local mean, var_b, var_u = {}, {}, {}
  for j = 1, 3 do
    local s, ss = 0, 0
    for i = 1, 4 do s = s + rows[i][j] end
    mean[j] = s / 4
    for i = 1, 4 do ss = ss + (rows[i][j] - mean[j]) ^ 2 end
    var_b[j], var_u[j] = ss / 4, ss / 3
  end
  local expect = {}
  for i = 1, 4 do
    expect[i] = {}
    for j = 1, 3 do expect[i][j] = (rows[i][j] - mean[j]) / math.sqrt(var_b[j] + 1e-5) end
  end
  H.assert_close(y, expect, 1e-5, "train output")
  local rm, rv = {}, {}
  for j = 1, 3 do rm[j] = 0.1 * mean[j] rv[j] = 0.9 + 0.1 * var_u[j] end
  H.assert_close(bn.running_mean, rm, 1e-6, "running_mean")
  H.assert_close(bn.running_var, rv, 1e-6, "running_var")
  lu.assertEquals(bn.num_batches_tracked:item(), 1)
  -- evaluation: running statistics, nothing updated
  bn:eval()
  local ye = value(bn(x))
  for i = 1, 4 do for j = 1, 3 do expect[i][j] = (rows[i][j] - rm[j]) / math.sqrt(rv[j] + 1e-5) end end
  H.assert_close(ye, expect, 1e-5, "eval output")
  lu.assertEquals(bn.num_batches_tracked:item(), 1)
  H.assert_close(bn.running_mean, rm, 1e-6)
  -- momentum=false: cumulative average, as PyTorch's momentum=None
  local cum = nn.BatchNorm1d(3, {momentum = false})
  cum(x)
  cum(x * 3)
  for j = 1, 3 do rm[j] = (mean[j] + 3 * mean[j]) / 2 end
  H.assert_close(cum.running_mean, rm, 1e-5, "cumulative mean")
  -- without running stats, evaluation still uses the batch
  local nts = nn.BatchNorm1d(3, {track_running_stats = false, affine = false})
  lu.assertEquals(#nts:parameters(), 0)
  lu.assertEquals(keys(nts:state_dict()), {})
  nts:eval()
  H.assert_close(value(nts(x)), y, 1e-5)
  H.assert_error(function() bn(nc.zeros({2, 4})) end, "nn.BatchNorm1d: expected 3 channels")
  H.assert_error(function() nn.BatchNorm2d(3)(nc.zeros({2, 3})) end, "nn.BatchNorm2d: expected a 4-D")
  H.assert_error(function() nn.BatchNorm2d(3, {momentum = 2}) end, "momentum must be in")
end

function TestLayers:test_batchnorm2d_channels()
  local bn = nn.BatchNorm2d(2, {eps = 1e-3})
  local x = nc.randn({3, 2, 4, 5}) * 2 + 1
  local y = value(bn(x))
  local per = y:transpose(1, 2):contiguous():view({2, -1})
  H.assert_close(per:mean(2), {0, 0}, 1e-5)
  local xm = x:transpose(1, 2):contiguous():view({2, -1})
  H.assert_close(bn.running_mean, xm:mean(2) * 0.1, 1e-5)
end

function TestLayers:test_dropout_train_and_eval()
  local d = nn.Dropout(0.25)
  local x = nc.ones({4000})
  nc.manual_seed(9)
  local y = value(d(x))
  local zeros, kept = 0, 0
  for _, v in ipairs(y:tolist()) do
    if v == 0 then zeros = zeros + 1 else kept = kept + 1 lu.assertAlmostEquals(v, 1 / 0.75, 1e-6) end
  end
  lu.assertTrue(math.abs(zeros / 4000 - 0.25) < 0.03, "dropped fraction " .. zeros / 4000)
  -- the same seed gives the same mask
  nc.manual_seed(9)
  H.assert_close(value(d(x)), y, 0)
  d:eval()
  lu.assertIs(d(x), x)
  lu.assertIs(nn.Dropout(0)(x), x)
  H.assert_error(function() nn.Dropout(1.5) end, "p must be in [0, 1]")
end

function TestLayers:test_layer_norm()
  local ln = nn.LayerNorm(4)
  lu.assertEquals(ln.weight.shape, {4})
  local rows = {{1, 2, 3, 4}, {2, 2, 0, 8}}
  local y = value(ln(nc.tensor(rows)))
  local expect = {}
  for i, r in ipairs(rows) do
    local m, v = 0, 0
    for _, a in ipairs(r) do m = m + a / 4 end
    for _, a in ipairs(r) do v = v + (a - m) ^ 2 / 4 end
    expect[i] = {}
    for j, a in ipairs(r) do expect[i][j] = (a - m) / math.sqrt(v + 1e-5) end
  end
  H.assert_close(y, expect, 1e-5)
  local ln2 = nn.LayerNorm({2, 3}, {elementwise_affine = false})
  lu.assertEquals(#ln2:parameters(), 0)
  lu.assertEquals(ln2(nc.randn({4, 2, 3})).shape, {4, 2, 3})
end

function TestLayers:test_embedding()
  local e = nn.Embedding(5, 3, {padding_idx = 1})
  lu.assertEquals(e.weight.shape, {5, 3})
  H.assert_close(e.weight.value[2], {0, 0, 0}, 0)
  local idx = nc.tensor({{0, 4}, {1, 0}}, {dtype = "int64"})
  local y = value(e(idx))
  lu.assertEquals(y.shape, {2, 2, 3})
  H.assert_close(y[1][2], e.weight.value[5], 0)
  H.assert_close(y[2][1], {0, 0, 0}, 0)
  -- the padding row gets no gradient
  local tape = ag.Tape()
  tape:backward(tape:record(function() return e(idx):sum() end))
  H.assert_close(e.weight.grad[2], {0, 0, 0}, 0)
  H.assert_close(e.weight.grad[1], {2, 2, 2}, 0)
  H.assert_close(e.weight.grad[5], {1, 1, 1}, 0)
  lu.assertEquals(nn.Embedding(5, 3, {padding_idx = -1}).padding_idx, 4)
  H.assert_error(function() nn.Embedding(5, 3, {padding_idx = 5}) end, "padding_idx 5 is out of range")
end

function TestLayers:test_activations()
  local x = nc.tensor({{-2, -0.5, 0, 0.5, 3}})
  local xs = x:tolist()[1]
  local function map(f) local out = {} for i, v in ipairs(xs) do out[i] = f(v) end return {out} end
  H.assert_close(value(nn.ReLU()(x)), map(function(v) return math.max(v, 0) end), 0)
  H.assert_close(value(nn.LeakyReLU(0.2)(x)), map(function(v) return v > 0 and v or 0.2 * v end), 1e-6)
  H.assert_close(value(nn.LeakyReLU()(x)), map(function(v) return v > 0 and v or 0.01 * v end), 1e-6)
  H.assert_close(value(nn.Sigmoid()(x)), map(function(v) return 1 / (1 + math.exp(-v)) end), 1e-6)
  H.assert_close(value(nn.Tanh()(x)), x:tanh(), 1e-6)
  H.assert_close(value(nn.SiLU()(x)), map(function(v) return v / (1 + math.exp(-v)) end), 1e-5)
  H.assert_close(value(nn.GELU()(x)), x:gelu(), 1e-6)
  local tanh_gelu = map(function(v) return 0.5 * v * (1 + math.tanh(math.sqrt(2 / math.pi) * (v + 0.044715 * v ^ 3))) end)
  H.assert_close(value(nn.GELU({approximate = "tanh"})(x)), tanh_gelu, 1e-5)
  local sm = value(nn.Softmax(-1)(x))
  H.assert_close(sm:sum(), 1, 1e-6)
  H.assert_close(value(nn.LogSoftmax(2)(x)), sm:log(), 1e-5)
  H.assert_error(function() nn.Softmax() end, "nn.Softmax: needs the dim")
  H.assert_error(function() nn.GELU({approximate = "fast"}) end, "approximate must be")
  H.assert_error(function() nn.ReLU(true) end, "nn.ReLU: takes no arguments")
end

-- ELU, Softplus, Mish and LeakyReLU run the C activation ops (nc.elu, ...); values against the
-- formulas, Tensors and Nodes, constructor checks.
function TestLayers:test_activation_ops()
  local xs = {-25, -2, -0.5, 0, 0.5, 3, 25}
  local x = nc.tensor({xs}, {dtype = "float64"})
  local function map(f) local out = {} for i, v in ipairs(xs) do out[i] = f(v) end return {out} end
  local function softplus(v, b, t) return v * b > t and v or math.log(1 + math.exp(v * b)) / b end
  local function tanh(v) local e = math.exp(-2 * math.abs(v)) return (v < 0 and -1 or 1) * (1 - e) / (1 + e) end
  H.assert_close(value(nn.ELU()(x)), map(function(v) return v > 0 and v or math.exp(v) - 1 end), 1e-12)
  H.assert_close(value(nn.ELU(0.5)(x)), map(function(v) return v > 0 and v or 0.5 * (math.exp(v) - 1) end), 1e-12)
  H.assert_close(value(nn.ELU({alpha = 2})(x)), map(function(v) return v > 0 and v or 2 * (math.exp(v) - 1) end), 1e-12)
  H.assert_close(value(nn.Softplus()(x)), map(function(v) return softplus(v, 1, 20) end), 1e-12)
  H.assert_close(value(nn.Softplus({beta = 2, threshold = 1})(x)), map(function(v) return softplus(v, 2, 1) end), 1e-12)
  H.assert_close(value(nn.Mish()(x)), map(function(v) return v * tanh(softplus(v, 1, 20)) end), 1e-12)
  H.assert_close(value(nn.LeakyReLU(-0.5)(x)), map(function(v) return v > 0 and v or -0.5 * v end), 0)
  -- on Nodes, with a gradient
  local p = ag.param(x:clone())
  local tape = ag.Tape()
  tape:backward(tape:record(function() return nn.Sequential(nn.ELU(), nn.Mish())(p):sum() end))
  lu.assertEquals(p.grad.shape, {1, 7})
  lu.assertEquals(tostring(nn.Sequential(nn.ELU(0.5), nn.Softplus({beta = 2}), nn.Mish(), nn.LeakyReLU(0.1))),
    "Sequential\n  (0): ELU(alpha=0.5)\n  (1): Softplus(beta=2, threshold=20)\n  (2): Mish\n  (3): LeakyReLU(negative_slope=0.1)")
  -- constructor checks, reported at the caller's line
  local err = H.assert_error(function() nn.ELU("big") end, "nn.ELU: alpha must be a finite number, got big")
  lu.assertStrContains(err, "test_nn.lua")
  H.assert_error(function() nn.ELU({alpah = 1}) end, "nn.ELU: unknown option 'alpah'")
  H.assert_error(function() nn.ELU(math.huge) end, "nn.ELU: alpha must be a finite number")
  H.assert_error(function() nn.Softplus({beta = 0}) end, "nn.Softplus: beta must not be 0")
  H.assert_error(function() nn.Softplus({threshold = 0 / 0}) end, "nn.Softplus: threshold must be a finite number")
  H.assert_error(function() nn.Softplus(2) end, "nn.Softplus: options must be a table")
  H.assert_error(function() nn.Softplus({bta = 2}) end, "nn.Softplus: unknown option 'bta'")
  H.assert_error(function() nn.Mish(1) end, "nn.Mish: takes no arguments")
  err = H.assert_error(function() nn.LeakyReLU("x") end, "nn.LeakyReLU: negative_slope must be a finite number")
  lu.assertStrContains(err, "test_nn.lua")
  -- the C ops refuse integer inputs, naming themselves
  H.assert_error(function() nn.ELU()(nc.tensor({1, 2}, {dtype = "int64"})) end, "netcl.elu", "float32, float64, bfloat16 or float16")
end

function TestLayers:test_pooling_flatten_identity()
  local x = nc.arange(0, 32):view({1, 2, 4, 4})
  local mp = value(nn.MaxPool2d(2)(x))
  H.assert_close(mp, {{{{5, 7}, {13, 15}}, {{21, 23}, {29, 31}}}}, 0)
  local ap = value(nn.AvgPool2d(2)(x))
  H.assert_close(ap, {{{{2.5, 4.5}, {10.5, 12.5}}, {{18.5, 20.5}, {26.5, 28.5}}}}, 1e-6)
  lu.assertEquals(nn.MaxPool2d(3, {stride = 2, padding = 1})(nc.zeros({1, 1, 8, 8})).shape, {1, 1, 4, 4})
  local gp = value(nn.AdaptiveAvgPool2d(1)(x))
  H.assert_close(gp:view({2}), {7.5, 23.5}, 1e-6)
  lu.assertEquals(nn.AdaptiveAvgPool2d({2, 1})(x).shape, {1, 2, 2, 1})
  lu.assertEquals(nn.Flatten()(x).shape, {1, 32})
  lu.assertEquals(nn.Flatten(3)(x).shape, {1, 2, 16})
  lu.assertIs(nn.Identity()(x), x)
end

function TestLayers:test_swiglu()
  local f = nn.SwiGLU(4, 6)
  lu.assertEquals(names(f:named_parameters()), {"w1.weight", "w2.weight", "w3.weight"})
  lu.assertEquals(f.w2.weight.shape, {4, 6})
  local x = nc.randn({3, 4})
  local w1, w2, w3 = f.w1.weight.value, f.w2.weight.value, f.w3.weight.value
  local a = x:matmul(w1:transpose(1, 2))
  local h = a:silu() * x:matmul(w3:transpose(1, 2))
  H.assert_close(value(f(x)), h:matmul(w2:transpose(1, 2)), 1e-5)
end

function TestLayers:test_losses()
  local logits = nc.tensor({{2, 0, -1}, {0.5, 0.5, 3}})
  local target = nc.tensor({0, 2}, {dtype = "int64"})
  local function ce_row(r, t)
    local m = 0
    for _, v in ipairs(r) do m = m + math.exp(v) end
    return math.log(m) - r[t + 1]
  end
  local l = logits:tolist()
  local expect = (ce_row(l[1], 0) + ce_row(l[2], 2)) / 2
  H.assert_close(value(nn.CrossEntropyLoss()(logits, target)), expect, 1e-6)
  H.assert_close(value(nn.CrossEntropyLoss({reduction = "sum"})(logits, target)), 2 * expect, 1e-6)
  lu.assertEquals(nn.CrossEntropyLoss({reduction = "none"})(logits, target).shape, {2})
  local a, b = nc.tensor({1, 2, 3}), nc.tensor({1.5, 2, 1})
  H.assert_close(value(nn.MSELoss()(a, b)), (0.25 + 0 + 4) / 3, 1e-6)
  H.assert_close(value(nn.L1Loss({reduction = "sum"})(a, b)), 2.5, 1e-6)
  local z, y = nc.tensor({0.3, -1.2}), nc.tensor({1, 0})
  local bce = (math.log(1 + math.exp(-0.3)) + math.log(1 + math.exp(-1.2))) / 2
  H.assert_close(value(nn.BCEWithLogitsLoss()(z, y)), bce, 1e-6)
  H.assert_error(function() nn.MSELoss({reduction = "avg"}) end, "reduction must be")
  H.assert_error(function() nn.BCEWithLogitsLoss({pos_weight = 2}) end, "unknown option 'pos_weight'")
end

-- ---- gradients through whole layers -----------------------------------------------------------------
-- float64 central differences: ag.gradcheck for the input, and the same by hand for a few
-- elements of every parameter (gradcheck copies its inputs, so a module's own parameters are
-- perturbed in place here).
TestLayerGradients = {}

local function check_layer(m, x, tol)
  m:to("float64")
  x = x:to("float64")
  ag.gradcheck(function(xx) return m(xx) end, {ag.param(x)}, {atol = 1e-6, rtol = 1e-4})
  local proj = nc.randn(value(m(x)).shape, {dtype = "float64"})
  local function objective() return (value(m(x)) * proj):sum():item() end
  local tape = ag.Tape()
  local out = tape:record(function() return (m(x) * proj):sum() end)
  m:zero_grad()
  tape:backward(out)
  for name, p in m:named_parameters() do
    lu.assertNotNil(p.grad, name)
    local flat, grad = p.value:view({-1}), p.grad:contiguous():view({-1}):tolist()
    local n = #grad
    for _, k in ipairs({1, (n + 1) // 2, n}) do
      local v = flat[k]:item()
      flat[k] = v + 1e-6
      local fp = objective()
      flat[k] = v - 1e-6
      local fm = objective()
      flat[k] = v
      local num = (fp - fm) / 2e-6
      lu.assertTrue(math.abs(num - grad[k]) <= tol * (1 + math.abs(num)),
        string.format("%s[%d]: tape %.8g, numeric %.8g", name, k, grad[k], num))
    end
  end
end

function TestLayerGradients:test_layers()
  nc.manual_seed(21)
  check_layer(nn.Linear(4, 3), nc.randn({5, 4}), 1e-5)
  check_layer(nn.Conv2d(2, 3, 3, {padding = 1, stride = 2}), nc.randn({2, 2, 5, 5}), 1e-5)
  check_layer(nn.BatchNorm2d(3), nc.randn({4, 3, 2, 2}), 1e-5)
  check_layer(nn.BatchNorm1d(3), nc.randn({6, 3}), 1e-5)
  check_layer(nn.LayerNorm(5), nc.randn({3, 5}), 1e-5)
  check_layer(nn.SwiGLU(4, 6), nc.randn({3, 4}), 1e-5)
  check_layer(nn.Sequential(nn.Linear(3, 5), nn.GELU({approximate = "tanh"}), nn.LeakyReLU(0.1), nn.Linear(5, 2)),
    nc.randn({4, 3}), 1e-5)
  check_layer(nn.Sequential(nn.Conv2d(1, 2, 3), nn.MaxPool2d(2), nn.Flatten(), nn.Linear(8, 2)),
    nc.randn({2, 1, 6, 6}), 1e-5)
end

os.exit(lu.LuaUnit.run())
