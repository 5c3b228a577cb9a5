-- The CPU backend against PyTorch CPU with the same thread count, interleaved: in each of ROUNDS
-- rounds (NETCL_BENCH_ROUNDS, default 5) every workload runs in netcl, then in PyTorch (a python3
-- process per workload and round), so a busy machine hits both alike. Prints one JSON line per
-- workload and round, then the median over rounds of each side and the ratio of medians
-- (PyTorch's time over netcl's: above 1, netcl is faster). Without python3-torch the PyTorch
-- side is skipped with a message.
--   loop     300 x (matmul 256x512 @ 512x256, relu, * 2, sum): threading between BLAS and ops
--   softmax  softmax over the rows of 4096 x 1024, best of 5
--   sum      full sum of 16M floats, best of 5
--   sgemm N  N x N @ N x N for N = 512, 1024, 2048, best of 3
--   conv3x3  conv2d 64->64 3x3 pad 1 (no bias) on 32x64x32x32 (ResNet18-cifar's layer1), forward
--            and backward (input and weight gradients) of the sum of the output, best of 3
--   resnet18_train  ResNet18 (cifar stem, 10 classes) SGD steps (momentum 0.9) on batches of 32
--            3x32x32 images with cross-entropy: 3 steps, best of them after one warm-up step
--   resnet18_infer  the same model in eval mode, forward only, batch 32, best of 3
--   small_cnn  the CNN of issue 13 (conv 1->32 3x3 pad 1, ReLU, maxpool 2, conv 32->64 3x3 pad 1,
--            ReLU, maxpool 2, linear 3136->128, ReLU, linear 128->10), Adam lr 1e-3, batch 64,
--            3 epochs over 8,000 random 1x28x28 images (timing only: the content does not matter)
--   demo     `make demo`'s training, only when named (NETCL_BENCH_CASES=demo: minutes per round):
--            samples/fashion_mnist.lua with its defaults runs as a child process (a temporary
--            checkpoint, OMP_NUM_THREADS, NETCL_NUM_THREADS and OMP_WAIT_POLICY removed from its
--            environment) and its final line gives the seconds of training and the test accuracy;
--            tests/bench/fashion_mnist_torch.py does the same training in PyTorch (same data
--            directory, data.fashion_mnist_dir(); same clean environment) with the thread count
--            the child netcl has. Both accuracies are printed beside the times.
--   Run the demo case with
--     NETCL_BENCH_CASES=demo build/bin/netcl-lua tests/bench/bench_cpu.lua
local nc = require "netcl"
local data = require "netcl.data"
local ag = require "netcl.autograd"
local nn = require "netcl.nn"
local optim = require "netcl.optim"
local models = require "netcl.models"
-- The Python that has the reference (tests/lua/helpers.lua: NETCL_PYTHON, python3, /usr/bin/python3).
local HERE = debug.getinfo(1, "S").source:match("^@(.*)/[^/]*$") or "."
local H = dofile(HERE .. "/../lua/helpers.lua")
local PY = H.python("torch") or "python3"
local EXE = arg and arg[-1] or "netcl-lua"

local ROUNDS = tonumber(os.getenv("NETCL_BENCH_ROUNDS") or "") or 5
local THREADS = nc.get_num_threads()
local cpu = nc.device("cpu")

local function best_of(reps, fn)
  fn()
  local best = math.huge
  for _ = 1, reps do
    local t0 = nc.clock()
    fn()
    best = math.min(best, nc.clock() - t0)
  end
  return best
end

local function randn(shape) return nc.randn(shape, {device = cpu}) end

local workloads = {
  {name = "loop", netcl = function()
    local a, b = randn({256, 512}), randn({512, 256})
    return best_of(1, function()
      for _ = 1, 300 do local c = a:matmul(b):relu(); c = (c * 2):sum() end
    end)
  end, torch = [[
a, b = torch.randn(256, 512), torch.randn(512, 256)
def f():
    for _ in range(300):
        c = torch.relu(a @ b); c = (c * 2).sum()
print(best_of(1, f))]]},
  {name = "softmax", netcl = function()
    local x = randn({4096, 1024})
    return best_of(5, function() return x:softmax(2) end)
  end, torch = [[
x = torch.randn(4096, 1024)
print(best_of(5, lambda: torch.softmax(x, 1)))]]},
  {name = "sum", netcl = function()
    local x = randn({16 * 1024 * 1024})
    return best_of(5, function() return x:sum() end)
  end, torch = [[
x = torch.randn(16 * 1024 * 1024)
print(best_of(5, lambda: x.sum()))]]},
}
for _, n in ipairs({512, 1024, 2048}) do
  workloads[#workloads + 1] = {name = "sgemm" .. n, netcl = function()
    local a, b = randn({n, n}), randn({n, n})
    return best_of(3, function() return a:matmul(b) end)
  end, torch = ([[
a, b = torch.randn(%d, %d), torch.randn(%d, %d)
print(best_of(3, lambda: a @ b))]]):format(n, n, n, n)}
end

local function step_of(model, opt, x, y)
  local criterion = nn.CrossEntropyLoss()
  return function()
    local tape = ag.Tape()
    local loss = tape:record(function() return criterion(model(x), y) end)
    opt:zero_grad()
    tape:backward(loss)
    opt:step()
    loss.value:item()
  end
end

local TORCH_RESNET = [[
import torchvision
def resnet():
    m = torchvision.models.resnet18(num_classes=10)
    m.conv1 = torch.nn.Conv2d(3, 64, 3, 1, 1, bias=False)
    m.maxpool = torch.nn.Identity()
    return m
x, y = torch.randn(32, 3, 32, 32), torch.randint(0, 10, (32,))
]]

workloads[#workloads + 1] = {name = "conv3x3", netcl = function()
  local conv = nn.Conv2d(64, 64, 3, {padding = 1, bias = false, device = cpu})
  local x = ag.tensor(randn({32, 64, 32, 32}), {requires_grad = true})
  return best_of(3, function()
    local tape = ag.Tape()
    local loss = tape:record(function() return conv(x):sum() end)
    tape:backward(loss)
    loss.value:item()
  end)
end, torch = [[
conv = torch.nn.Conv2d(64, 64, 3, padding=1, bias=False)
x = torch.randn(32, 64, 32, 32, requires_grad=True)
def f():
    conv(x).sum().backward()
print(best_of(3, f))]]}

workloads[#workloads + 1] = {name = "resnet18_train", netcl = function()
  local model = models.ResNet18{num_classes = 10, stem = "cifar", device = cpu}
  local opt = optim.SGD(model:parameters(), {lr = 0.01, momentum = 0.9})
  local x, y = randn({32, 3, 32, 32}), nc.randint(0, 10, {32}, {device = cpu})
  return best_of(3, step_of(model, opt, x, y))
end, torch = TORCH_RESNET .. [[
m = resnet()
opt = torch.optim.SGD(m.parameters(), lr=0.01, momentum=0.9)
def f():
    loss = torch.nn.functional.cross_entropy(m(x), y)
    opt.zero_grad(); loss.backward(); opt.step(); loss.item()
print(best_of(3, f))]]}

workloads[#workloads + 1] = {name = "resnet18_infer", netcl = function()
  local model = models.ResNet18{num_classes = 10, stem = "cifar", device = cpu}
  model:eval()
  local x = randn({32, 3, 32, 32})
  return best_of(3, function() model(x):sum():item() end)
end, torch = TORCH_RESNET .. [[
m = resnet().eval()
def f():
    with torch.no_grad(): m(x).sum().item()
print(best_of(3, f))]]}

workloads[#workloads + 1] = {name = "small_cnn", netcl = function()
  local model = nn.Sequential(nn.Conv2d(1, 32, 3, {padding = 1, device = cpu}), nn.ReLU(), nn.MaxPool2d(2),
    nn.Conv2d(32, 64, 3, {padding = 1, device = cpu}), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
    nn.Linear(3136, 128, {device = cpu}), nn.ReLU(), nn.Linear(128, 10, {device = cpu}))
  local opt = optim.Adam(model:parameters(), {lr = 1e-3})
  local xs, ys = randn({8000, 1, 28, 28}), nc.randint(0, 10, {8000}, {device = cpu})
  local batches = {}
  for i = 0, 8000 - 1, 64 do
    local n = math.min(64, 8000 - i)
    batches[#batches + 1] = {xs:narrow(1, i + 1, n):contiguous(), ys:narrow(1, i + 1, n):contiguous()}
  end
  local t0 = nc.clock()
  for _ = 1, 3 do
    for _, b in ipairs(batches) do step_of(model, opt, b[1], b[2])() end
  end
  return nc.clock() - t0
end, torch = [[
m = torch.nn.Sequential(torch.nn.Conv2d(1, 32, 3, padding=1), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
    torch.nn.Conv2d(32, 64, 3, padding=1), torch.nn.ReLU(), torch.nn.MaxPool2d(2), torch.nn.Flatten(),
    torch.nn.Linear(3136, 128), torch.nn.ReLU(), torch.nn.Linear(128, 10))
opt = torch.optim.Adam(m.parameters(), lr=1e-3)
xs, ys = torch.randn(8000, 1, 28, 28), torch.randint(0, 10, (8000,))
t0 = time.perf_counter()
for _ in range(3):
    for i in range(0, 8000, 64):
        loss = torch.nn.functional.cross_entropy(m(xs[i:i + 64]), ys[i:i + 64])
        opt.zero_grad(); loss.backward(); opt.step(); loss.item()
print(time.perf_counter() - t0)]]}

-- `make demo`: the sample in a child process with no thread variables, against the same
-- training in PyTorch (fashion_mnist_torch.py) with the thread count that child has.
local function shell_quote(s) return "'" .. s:gsub("'", "'\\''") .. "'" end
local CLEAN_ENV = "env -u OMP_NUM_THREADS -u NETCL_NUM_THREADS -u OMP_WAIT_POLICY "

-- -> whether cmd exited with 0, the last line of its output that `want` matches (or nil), the
-- output (stdout and stderr)
local function run_child(cmd, want)
  local p = assert(io.popen(cmd .. " 2>&1"))
  local out = p:read("a")
  local ok = p:close()
  local last
  for line in out:gmatch("[^\n]+") do if line:match(want) then last = line end end
  return ok, last, out
end

local demo_dir, demo_threads
local function demo_setup()
  if demo_dir then return end
  demo_dir = data.fashion_mnist_dir()
  if not demo_dir then
    error("bench_cpu: demo: Fashion-MNIST not found: install Debian's dataset-fashion-mnist (make deps) or set " ..
      "NETCL_FASHION_MNIST", 0)
  end
  local ok, last, out = run_child(CLEAN_ENV .. shell_quote(EXE) ..
    " -e 'print(require(\"netcl\").get_num_threads())'", "^%d+$")
  demo_threads = ok and last and math.tointeger(tonumber(last))
  if not demo_threads then error("bench_cpu: demo: cannot read netcl's default thread count:\n" .. out, 0) end
end

workloads[#workloads + 1] = {name = "demo", opt_in = true, threads = function()
  demo_setup()
  return demo_threads
end, netcl = function()
  demo_setup()
  local tmp = os.tmpname()
  local ckpt = tmp .. ".netcl"
  local sample = HERE .. "/../../samples/fashion_mnist.lua"
  local ok, last, out = run_child(CLEAN_ENV .. shell_quote(EXE) .. " " .. shell_quote(sample) .. " --data " ..
    shell_quote(demo_dir) .. " --checkpoint " .. shell_quote(ckpt), "^final test accuracy ")
  for _, f in ipairs({tmp, ckpt, tmp .. ".svg"}) do os.remove(f) end
  local acc, secs
  if last then acc, secs = last:match("^final test accuracy ([%d.]+)%% after %d+ epochs %(([%d.]+)s of training%)") end
  if not (ok and acc) then error("bench_cpu: demo: samples/fashion_mnist.lua failed:\n" .. out:sub(-3000), 0) end
  return tonumber(secs), tonumber(acc) / 100
end, torch = function()
  demo_setup()
  local script = HERE .. "/fashion_mnist_torch.py"
  local ok, last, out = run_child(CLEAN_ENV .. shell_quote(PY) .. " " .. shell_quote(script) .. " " ..
    shell_quote(demo_dir) .. " --threads " .. demo_threads, '^{"train_s"')
  local secs = last and last:match('"train_s": *([%d.eE+-]+)')
  local acc = last and last:match('"test_accuracy": *([%d.eE+-]+)')
  if not (ok and secs and acc) then
    io.stderr:write("bench_cpu: demo: fashion_mnist_torch.py failed:\n", out:sub(-3000), "\n")
    return nil
  end
  return tonumber(secs), tonumber(acc)
end}

-- NETCL_BENCH_CASES=conv3x3,small_cnn: only those workloads. Without it, all but the opt_in ones.
local only = os.getenv("NETCL_BENCH_CASES")
local keep
if only and only ~= "" then
  keep = {}
  for name in only:gmatch("[^,]+") do keep[name] = true end
end
do
  local picked = {}
  for _, w in ipairs(workloads) do
    if (keep and keep[w.name]) or (not keep and not w.opt_in) then picked[#picked + 1] = w end
  end
  workloads = picked
end

local PRELUDE = ([[
import time, torch
torch.set_num_threads(%d)
def best_of(reps, fn):
    fn()
    r = float("inf")
    for _ in range(reps):
        t0 = time.perf_counter(); fn(); r = min(r, time.perf_counter() - t0)
    return r
]]):format(THREADS)

local have_torch = os.execute(PY .. " -c 'import torch' >/dev/null 2>&1")
if not have_torch then io.stderr:write("bench_cpu: python3-torch not found; the PyTorch side is skipped\n") end

local function torch_time(body)
  return tonumber(H.python_output(PY, PRELUDE .. body .. "\n"):match("^[^\n]*"))
end

local function median(t)
  local s = {}
  for i, v in ipairs(t) do s[i] = v end
  table.sort(s)
  local n = #s
  if n == 0 then return nil end
  return n % 2 == 1 and s[(n + 1) // 2] or (s[n // 2] + s[n // 2 + 1]) / 2
end

-- A workload's torch is a body for the prelude above or a function; netcl and a torch function
-- return seconds and, where the workload trains to a result, the test accuracy.
local function torch_run(w)
  if type(w.torch) == "function" then return w.torch() end
  return torch_time(w.torch)
end

local function accuracy(key, a) return a and string.format(',"%s":%.4f', key, a) or "" end

local times = {}
for _, w in ipairs(workloads) do times[w.name] = {netcl = {}, torch = {}, netcl_acc = {}, torch_acc = {}} end
for round = 1, ROUNDS do
  for _, w in ipairs(workloads) do
    local threads = w.threads and w.threads() or THREADS
    local tn, an = w.netcl()
    collectgarbage()
    local tt, at
    if have_torch then tt, at = torch_run(w) end
    local r = times[w.name]
    table.insert(r.netcl, tn)
    if tt then table.insert(r.torch, tt) end
    if an then table.insert(r.netcl_acc, an) end
    if at then table.insert(r.torch_acc, at) end
    print(string.format('{"bench":"cpu","case":"%s","round":%d,"threads":%d,"netcl_s":%.5f%s%s%s}', w.name, round,
      threads, tn, accuracy("netcl_accuracy", an),
      tt and string.format(',"torch_s":%.5f,"ratio":%.3f', tt, tt / tn) or "", accuracy("torch_accuracy", at)))
    io.stdout:flush()
  end
end
local function lowest(t)
  local m
  for _, v in ipairs(t) do m = m and math.min(m, v) or v end
  return m
end
-- the median line gives the lowest accuracy over the rounds
for _, w in ipairs(workloads) do
  local r = times[w.name]
  local mn, mt = median(r.netcl), median(r.torch)
  print(string.format('{"bench":"cpu","case":"%s","median_of":%d,"netcl_s":%.5f%s%s%s}', w.name, ROUNDS, mn,
    accuracy("netcl_min_accuracy", lowest(r.netcl_acc)),
    mt and string.format(',"torch_s":%.5f,"ratio":%.3f', mt, mt / mn) or "",
    accuracy("torch_min_accuracy", lowest(r.torch_acc))))
end
