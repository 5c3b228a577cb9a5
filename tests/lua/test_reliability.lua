-- Reliability of the Lua API (docs/reliability.md, "Lua API and files"): misspelt options raise
-- and list the accepted keys; calls that used to give silent wrong answers raise; errors name
-- the user's line; loads are all-or-nothing; saves clean up after killed saves; truncated files
-- say so.
local lu = require "luaunit"
local nc = require "netcl"
local ag = require "netcl.autograd"
local nn = require "netcl.nn"
local nio = require "netcl.io"
local H = require "helpers"

local THIS = "test_reliability.lua:"

-- Asserts fn raises, with every needle in the message, at a position in this file (fn must not
-- end in a tail call, which would leave no frame of this file to name).
local function raises_here(fn, ...)
  local err = H.assert_error(fn, ...)
  lu.assertStrContains(err, THIS)
  return err
end

TestStrictOptions = {}

-- One call of each family that takes an options table: creation, conversion, reductions,
-- elementwise, layers, losses, sorting, autograd, io.
function TestStrictOptions:test_every_family_rejects_unknown_keys()
  local t, x4 = nc.ones({2, 3}), nc.ones({1, 1, 4, 4})
  local path = H.tmpdir() .. "/a.safetensors"
  nio.save({a = t}, path)
  local cases = {
    {"netcl.zeros", "{dtype=, device=}", function(o) return nc.zeros({2}, o) end},
    {"netcl.to", "{device=, dtype=, non_blocking=}", function(o) return t:to(o) end},
    {"netcl.sum", "{keepdim=, out=}", function(o) return t:sum(1, o) end},
    {"netcl.mean", "keepdim=", function(o) return t:mean(1, o) end},
    {"netcl.max", "keepdim=", function(o) return t:max(1, o) end},
    {"netcl.var", "correction=", function(o) return t:var(1, o) end},
    {"netcl.add", "{out=}", function(o) return nc.add(t, t, o) end},
    {"netcl.gelu", "approximate=", function(o) return nc.gelu(t, o) end},
    {"netcl.conv2d", "padding=", function(o) return nc.conv2d(x4, nc.ones({1, 1, 3, 3}), nil, o) end},
    {"netcl.mse_loss", "{reduction=}", function(o) return nc.mse_loss(t, t, o) end},
    {"netcl.cross_entropy", "label_smoothing=",
     function(o) return nc.cross_entropy(t, nc.tensor({1, 2}, {dtype = "int64"}), o) end},
    {"netcl.sort", "{descending=}", function(o) return t:sort(1, o) end},
    {"netcl.topk", "{largest=}", function(o) return t:topk(1, 1, o) end},
    {"netcl.autograd.tensor", "{requires_grad=}", function(o) return ag.tensor(t, o) end},
    {"netcl.io.save", "{metadata=}", function(o) return nio.save({a = t}, path, o) end},
    {"netcl.io.load", "{device=}", function(o) return nio.load(path, o) end},
  }
  for _, c in ipairs(cases) do
    raises_here(function() local r = c[3]({bogus_key = true}); return r end, c[1], "unknown option 'bogus_key'", c[2])
  end
  -- the misspelling of the issue: keepdims for keepdim
  raises_here(function() return t:sum(1, {keepdims = true}) end, "unknown option 'keepdims'", "keepdim=")
  lu.assertEquals(t:sum(1, {keepdim = true}).shape, {1, 3})
  lu.assertTrue(ag.tensor(t, {requires_grad = true}).requires_grad)
end

TestSilentAnswers = {}

-- PyTorch raises for bce_with_logits and warns for mse/l1 when the target's shape differs;
-- netcl raises for all three, as a module and as a function, on Tensors and on Nodes.
function TestSilentAnswers:test_pair_losses_need_equal_shapes()
  local x, y = nc.ones({4}), nc.ones({4, 1})
  for _, c in ipairs({{"BCEWithLogitsLoss", "bce_with_logits"}, {"MSELoss", "mse_loss"}, {"L1Loss", "l1_loss"}}) do
    local loss = nn[c[1]]()
    raises_here(function() local r = loss(x, y); return r end, "netcl." .. c[2], "target shape [4, 1] differs from input shape [4]")
    raises_here(function() return nc[c[2]](ag.param(x), y) end, "target shape [4, 1]")
    raises_here(function() return nc[c[2]](nc.ones({2, 3}), nc.ones({3})) end, "[3] differs from input shape [2, 3]")
    lu.assertEquals(loss(x, x:clone()).shape, {})
    lu.assertEquals(loss(nc.ones({2, 3}), nc.zeros({2, 3}), {}).shape, {})
  end
  -- the values the shapes now guard, against the formulas
  H.assert_close(nn.MSELoss()(nc.tensor({1, 2}), nc.tensor({3, 5})), {(4 + 9) / 2}, 1e-6)
  H.assert_close(nn.L1Loss()(nc.tensor({1, 2}), nc.tensor({3, 5})), {(2 + 3) / 2}, 1e-6)
  local bce = math.log(1 + math.exp(-2)) -- x = 2, y = 1
  H.assert_close(nn.BCEWithLogitsLoss()(nc.tensor({2}), nc.tensor({1})), {bce}, 1e-6)
end

function TestSilentAnswers:test_unknown_keys_raise()
  local t = nc.ones({2, 3})
  raises_here(function() return t[{1, 2}] end, "netcl.index", "got a table key", "t[i][j]")
  raises_here(function() return t["foo"] end, "netcl.index", "no field or method 'foo'", "shape")
  raises_here(function() return t.shpae end, "'shpae'")
  raises_here(function() return t[true] end, "got a boolean key")
  local n = ag.param(nc.ones({2}))
  raises_here(function() return n.grda end, "netcl.autograd.index", "no field or method 'grda'", "grad")
  raises_here(function() return n[{1}] end, "got a table key")
  -- fields, methods and integer keys still work; an absent gradient is still nil
  lu.assertEquals(t.shape, {2, 3})
  lu.assertEquals(t.dtype, "float32")
  lu.assertEquals(t[2]:tolist(), {1, 1, 1})
  lu.assertEquals(type(t.view), "function")
  lu.assertNil(n.grad)
  lu.assertEquals(n[1]:item(), 1)
  lu.assertTrue(n.requires_grad)
end

-- A Node owns its value and gradient: freeing the handle n.value or n.grad would free nothing,
-- so it raises and says what does.
function TestSilentAnswers:test_freeing_a_nodes_tensors_raises()
  local p = ag.param(nc.ones({2}))
  p.grad = nc.ones({2})
  raises_here(function() p.value:free() end, "netcl.free", "Node's value (n.value)", "freed with the Node")
  raises_here(function() p.grad:free() end, "netcl.free", "Node's gradient (n.grad)", "n.grad = nil")
  lu.assertEquals(p.value:tolist(), {1, 1})
  lu.assertEquals(p.grad:tolist(), {1, 1})
  p.grad = nil
  lu.assertNil(p.grad)
  -- a plain Tensor still frees, and a copy of a Node's value is a plain Tensor
  local t, c = nc.ones({2}), p.value:clone()
  t:free()
  c:free()
  raises_here(function() return t:tolist() end, "was freed")
  do local v <close> = p.value end -- closing a handle only drops the handle
  lu.assertEquals(p.value:tolist(), {1, 1})
end

function TestSilentAnswers:test_view_takes_sizes_as_arguments()
  local x = nc.arange(6)
  lu.assertEquals(x:view(3, 2).shape, {3, 2})
  lu.assertEquals(x:view(3, 2):tolist(), {{0, 1}, {2, 3}, {4, 5}})
  lu.assertEquals(x:view(-1, 3).shape, {2, 3})
  lu.assertEquals(x:view(6).shape, {6})
  lu.assertEquals(x:reshape(2, 3).shape, {2, 3})
  lu.assertEquals(nc.ones({1, 3}):expand(2, 3).shape, {2, 3})
  lu.assertEquals(ag.param(x:to("float32")):view(2, 3).shape, {2, 3})
  raises_here(function() return x:view({3, 2}, 1) end, "netcl.view: argument 3", "no further arguments")
  raises_here(function() return x:view(3, 2.5) end, "netcl.view: argument 3", "expected an integer")
  raises_here(function() return x:view(4, 2) end, "netcl.view")
end

function TestSilentAnswers:test_to_names_neither_a_dtype_nor_a_device()
  local t = nc.ones({2})
  raises_here(function() return t:to("flaot32") end, "netcl.to", "neither a dtype nor a device is called 'flaot32'",
    "float32", "cpu")
  lu.assertEquals(t:to("float64").dtype, "float64")
  lu.assertEquals(t:to("cpu").device, nc.device("cpu"))
end

TestAllOrNothing = {}

local optim = require "netcl.optim"

-- A Linear layer, an optimizer (SGD with momentum, or Adam) and a cosine schedule, after one step.
local function trained(kind, seed)
  nc.manual_seed(seed)
  local m = nn.Linear(3, 2)
  local opt = kind == "sgd" and optim.SGD(m:parameters(), {lr = 0.1, momentum = 0.9})
    or optim.Adam(m:parameters(), {lr = 0.01})
  local sched = optim.CosineAnnealingLR(opt, {T_max = 10})
  local tape = ag.Tape()
  local loss = tape:record(function() return m(nc.randn({4, 3})):sum() end)
  tape:backward(loss)
  opt:step()
  sched:step()
  return m, opt, sched
end

-- Everything that load_model may change, as plain values.
local function snapshot(m, opt, sched)
  local s = {w = m.weight.value:tolist(), b = m.bias.value:tolist(), lr = opt.param_groups[1].lr,
             last_epoch = sched and sched.last_epoch}
  local osd = opt:state_dict()
  for i, st in pairs(osd.state) do
    for k, v in pairs(st) do s["state." .. i .. "." .. k] = nc.is_tensor(v) and v:tolist() or v end
  end
  return s
end

function TestAllOrNothing:test_sgd_state_into_adam_leaves_the_model_untouched()
  local path = H.tmpdir() .. "/sgd.netcl"
  local m, sgd, sched = trained("sgd", 1)
  nio.save_model(m, path, {optimizer = sgd, scheduler = sched})
  local m2, adam, sched2 = trained("adam", 2)
  local before = snapshot(m2, adam, sched2)
  local err = raises_here(function() local r = nio.load_model(m2, path, {optimizer = adam, scheduler = sched2}); return r end,
    "netcl.io.load_model", "nothing was loaded", "SGD optimizer, not Adam")
  lu.assertNil(err:find("[netcl]", 1, true), err)
  lu.assertEquals(snapshot(m2, adam, sched2), before)
end

function TestAllOrNothing:test_a_bad_model_entry_puts_optimizer_and_scheduler_back()
  local path = H.tmpdir() .. "/m.netcl"
  local m, opt, sched = trained("adam", 1)
  nio.save_model(m, path, {optimizer = opt, scheduler = sched})
  -- same optimizer and parameter shapes, but the model has a different bias name
  local m2, opt2, sched2 = trained("adam", 2)
  opt2:step()
  sched2:step()
  local before = snapshot(m2, opt2, sched2)
  local bad = nn.Sequential(m2) -- entries "1.weight", "1.bias": the file's "weight" is unexpected
  raises_here(function() local r = nio.load_model(bad, path, {optimizer = opt2, scheduler = sched2}); return r end,
    "the model state does not fit, so nothing was loaded", "missing key")
  lu.assertEquals(snapshot(m2, opt2, sched2), before)
  -- a bad scheduler state puts the optimizer back
  local p2 = H.tmpdir() .. "/s.netcl"
  nio.save_model(m, p2, {optimizer = opt, metadata = {[nio.SCHED_KEY] = '{"last_epoch": "x"}'}})
  raises_here(function() local r = nio.load_model(m2, p2, {optimizer = opt2, scheduler = sched2}); return r end,
    "the scheduler state does not fit", "last_epoch")
  lu.assertEquals(snapshot(m2, opt2, sched2), before)
  -- a good load still restores all three
  nio.load_model(m2, path, {optimizer = opt2, scheduler = sched2})
  lu.assertEquals(snapshot(m2, opt2, sched2), snapshot(m, opt, sched))
end

TestStaleTemporaries = {}

local function exists(path)
  local f = io.open(path, "rb")
  if f then f:close() end
  return f ~= nil
end

-- A save removes the temporaries that killed saves of the same target left (writer pid gone,
-- lock free), and nothing else: not a live writer's, not another target's, not a look-alike.
function TestStaleTemporaries:test_a_save_removes_its_targets_stale_temporaries()
  local dir = H.tmpdir()
  local dead = assert(math.tointeger(tonumber((H.sh("sh -c 'echo $$'"):match("%d+")))))
  local function touch(name)
    local f = assert(io.open(dir .. "/" .. name, "wb"))
    f:write("half a checkpoint")
    f:close()
    return dir .. "/" .. name
  end
  local stale = {touch("ck.safetensors.tmp." .. dead .. ".0.123"), touch("ck.safetensors.tmp." .. dead .. ".7.99")}
  local kept = {
    touch("ck.safetensors.tmp.1.0.5"),                  -- pid 1 lives
    touch("other.safetensors.tmp." .. dead .. ".0.1"),   -- another target's
    touch("ck.safetensors.tmp." .. dead .. ".0.1.bak"),  -- not a name the writer makes
    touch("ck.safetensors.tmp." .. dead),                -- nor this
    touch("xck.safetensors.tmp." .. dead .. ".0.1"),     -- another target's, with ours as a suffix
  }
  nio.save({a = nc.ones({2})}, dir .. "/ck.safetensors")
  for _, p in ipairs(stale) do lu.assertFalse(exists(p), p) end
  for _, p in ipairs(kept) do lu.assertTrue(exists(p), p) end
  lu.assertEquals(nio.load(dir .. "/ck.safetensors").a:tolist(), {1, 1})
  -- a temporary whose lock is held (its writer's pid seen from another PID namespace) stays
  local held = touch("ck.safetensors.tmp." .. dead .. ".1.1")
  if H.sh("command -v flock") ~= "" then
    os.execute("flock " .. held .. " sleep 2 </dev/null >/dev/null 2>&1 & sleep 0.5")
    nio.save({a = nc.ones({2})}, dir .. "/ck.safetensors")
    lu.assertTrue(exists(held), held)
  else
    print("flock(1) not installed: the held-lock case is not checked")
  end
end

TestTruncatedFiles = {}

-- Every prefix of a tokenizer file that ends before its 'end' line, cut at a line's end or in
-- the middle of one, is reported as truncated (a cut id such as "13" -> "1" must not read as
-- another, valid line).
function TestTruncatedFiles:test_a_cut_tokenizer_file_says_it_is_truncated()
  local text = require "netcl.text"
  local tok = text.BPETokenizer.train({"hello world, hello there, low lower lowest"}, {vocab_size = 270})
  local dir = H.tmpdir()
  tok:save(dir .. "/tok.bpe")
  local f = assert(io.open(dir .. "/tok.bpe", "rb"))
  local whole = f:read("a")
  f:close()
  local stop = assert(whole:find("\nend\n", 1, true))
  local cut = dir .. "/cut.bpe"
  local wrong = {}
  -- every 11th length, and every length over the lines around the first token with a
  -- two-digit id (cut there, its id reads as a one-digit id that is already taken)
  local lens, at = {}, assert(whole:find(" %d%d\n"))
  for len = #"netcl-bpe 1\n", stop, 11 do lens[#lens + 1] = len end
  for len = at - 30, at + 40 do lens[#lens + 1] = len end
  for _, len in ipairs(lens) do
    local g = assert(io.open(cut, "wb"))
    g:write(whole:sub(1, len))
    g:close()
    local ok, err = pcall(text.BPETokenizer.load, cut)
    if ok or not tostring(err):find("truncated", 1, true) then wrong[#wrong + 1] = len .. ": " .. tostring(err) end
  end
  lu.assertEquals(#wrong, 0, table.concat(wrong, "\n", 1, math.min(#wrong, 5)))
  -- the whole file, and one whose last line lacks its newline, still load
  lu.assertEquals(text.BPETokenizer.load(dir .. "/tok.bpe"):encode("hello"), tok:encode("hello"))
  local g = assert(io.open(cut, "wb"))
  g:write(whole:sub(1, -2))
  g:close()
  lu.assertEquals(text.BPETokenizer.load(cut):encode("lowest"), tok:encode("lowest"))
end

TestResumePoints = {}

-- loader:state_dict() in the middle of an epoch, loaded into a fresh loader (even one made with
-- another seed): the rest of the epoch and the next one are the batches an uninterrupted loader
-- gives; with worker processes too.
function TestResumePoints:test_a_loader_resumes_in_mid_epoch()
  local data = require "netcl.data"
  local ds = {len = function() return 50 end, get = function(_, i) return nc.tensor({i}), i end}
  local function key(x) return table.concat(x:view({-1}):tolist(), ",") end
  for _, workers in ipairs({0, 2}) do
    local function loader(seed) return data.DataLoader(ds, {batch_size = 4, shuffle = true, seed = seed, num_workers = workers}) end
    local straight, resumed = {}, {}
    local a = loader(7)
    for _ = 1, 2 do for x in a:iter() do straight[#straight + 1] = key(x) end end
    local b = loader(7)
    for x in b:iter() do resumed[#resumed + 1] = key(x) end
    for x in b:iter() do
      resumed[#resumed + 1] = key(x)
      if #resumed == 18 then break end
    end
    local sd = b:state_dict()
    lu.assertEquals(sd, {epoch = 2, batch = 5, seed = 7})
    local c = loader(99)
    c:load_state_dict(nc._json.decode(nc._json.encode(sd)))
    for x in c:iter() do resumed[#resumed + 1] = key(x) end
    lu.assertEquals(resumed, straight)
    lu.assertEquals(c:state_dict(), {epoch = 2, batch = 13, seed = 7})
    -- a complete epoch: the next iter() starts the one after it
    local d = loader(7)
    d:load_state_dict({epoch = 1, batch = 13, seed = 7})
    local rest = {}
    for x in d:iter() do rest[#rest + 1] = key(x) end
    lu.assertEquals(rest, {table.unpack(straight, 14, 26)})
  end
  local l = data.DataLoader(ds, {batch_size = 4})
  raises_here(function() l:load_state_dict({epoch = 1, batch = 99}) end, "past the 13 batches")
  raises_here(function() l:load_state_dict({epoch = 1, batch = 2, position = 3}) end, "unknown entry 'position'")
end

-- nc.defer_interrupts(): SIGINT sets a flag instead of stopping the script.
function TestResumePoints:test_deferred_interrupts()
  local exe = H.netcl_lua()
  local script = [[local nc = require "netcl"; nc.defer_interrupts(); io.stdout:write("ready\n"); io.stdout:flush();
    local t = nc.clock(); while not nc.interrupted() and nc.clock() - t < 20 do end;
    print("flag", nc.interrupted()); nc.defer_interrupts(false)]]
  local dir = H.tmpdir()
  local f = assert(io.open(dir .. "/s.lua", "w"))
  f:write(script)
  f:close()
  local out = H.sh(string.format("%s %s/s.lua > %s/log 2>&1 & p=$!; n=0; until grep -q ready %s/log || [ $n -ge 400 ]; do " ..
    "sleep 0.05; n=$((n+1)); done; kill -INT $p; wait $p; echo \"exit $?\"; cat %s/log", exe, dir, dir, dir, dir))
  lu.assertStrContains(out, "exit 0")
  lu.assertStrContains(out, "flag\ttrue")
  lu.assertFalse(nc.interrupted())
  raises_here(function() nc.defer_interrupts("yes") end, "netcl.defer_interrupts: argument 1: expected a boolean")
end

TestErrorPositions = {}

-- Errors from operators and methods, on Tensors and Nodes, name the line that made the call,
-- never a wrapper inside netcl.
function TestErrorPositions:test_operators_and_methods_name_the_callers_line()
  local a, b = nc.ones({2}), nc.ones({3})
  local na, nb = ag.param(nc.ones({2})), ag.param(nc.ones({3}))
  local pairs_ = {{a, b}, {na, nb}, {na, b}, {a, nb}}
  for _, p in ipairs(pairs_) do
    local x, y = p[1], p[2]
    local calls = {
      function() local r = x + y; return r end,
      function() local r = x - y; return r end,
      function() local r = x * y; return r end,
      function() local r = x / y; return r end,
      function() local r = x ^ y; return r end,
      function() local r = x < y; return r end,
      function() local r = "s" + x; return r end,
      function() local r = x + {}; return r end,
      function() local r = x:matmul(y); return r end,
      function() local r = x:add_(y); return r end,
      function() local r = x:mul_(y); return r end,
      function() local r = x:copy_(y); return r end,
      function() local r = x:fill_("z"); return r end,
      function() local r = x:item(); return r end,
      function() local r = x:size(7); return r end,
      function() local r = x[7]; return r end,
      function() local r = x:sum(5); return r end,
      function() local r = x:view({5}); return r end,
      function() local r = x.numel(5); return r end,
    }
    for i, f in ipairs(calls) do
      local ok, err = pcall(f)
      lu.assertFalse(ok, "call " .. i)
      lu.assertStrContains(tostring(err), THIS, false, "call " .. i .. ": " .. tostring(err))
      lu.assertNil(tostring(err):find("[netcl]", 1, true), "call " .. i .. ": " .. tostring(err))
    end
  end
end

os.exit(lu.LuaUnit.run("-o", "text", table.unpack(arg)))
