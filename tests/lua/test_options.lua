-- Options tables and errors of the bindings (docs/architecture.md, "Errors in the bindings"):
-- every binding that takes an options table rejects a non-table and unknown keys, naming the key
-- and listing the accepted ones; argument errors read "netcl.<fn>: argument N: ...".
local lu = require "luaunit"
local nc = require "netcl"
local H = require "helpers"
local text = require "netcl.text"
local optim = require "netcl.optim"
local ag = require "netcl.autograd"

local dev = H.device()

-- Asserts fn raises, that the message holds every needle, and that it does not use Lua's
-- "bad argument #n to 'f'" format.
local function raises(fn, ...)
  local err = H.assert_error(fn, ...)
  lu.assertNil(err:find("bad argument", 1, true), err)
  return err
end

local function sgd_group(extra)
  local g = {lr = 0.5, momentum = 0, dampening = 0, weight_decay = 0, nesterov = false}
  for k, v in pairs(extra or {}) do g[k] = v end
  return g
end

local tok = text.BPETokenizer.train({"hello world, hello there"}, {vocab_size = 262})

-- Each binding that takes options: its name in messages, the keys it accepts, and a call with
-- the given options table (in the binding's options position).
local BINDINGS = {
  {"netcl.tensor", "dtype device shape", function(o) return nc.tensor({1, 2}, o) end},
  {"netcl.zeros", "dtype device", function(o) return nc.zeros({2}, o) end},
  {"netcl.ones", "dtype device", function(o) return nc.ones({2}, o) end},
  {"netcl.empty", "dtype device", function(o) return nc.empty({2}, o) end},
  {"netcl.full", "dtype device", function(o) return nc.full({2}, 3, o) end},
  {"netcl.rand", "dtype device", function(o) return nc.rand({2}, o) end},
  {"netcl.randn", "dtype device", function(o) return nc.randn({2}, o) end},
  {"netcl.arange", "dtype device", function(o) return nc.arange(4, o) end},
  {"netcl.arange", "dtype device", function(o) return nc.arange(1, 4, o) end},
  {"netcl.arange", "dtype device", function(o) return nc.arange(1, 4, 2, o) end},
  {"netcl.linspace", "dtype device", function(o) return nc.linspace(0, 1, 3, o) end},
  {"netcl.eye", "dtype device", function(o) return nc.eye(2, o) end},
  {"netcl.eye", "dtype device", function(o) return nc.eye(2, 3, o) end},
  {"netcl.from_bytes", "device", function(o) return nc.from_bytes(string.pack("<ff", 1, 2), {2}, "float32", o) end},
  {"netcl.text.train", "vocab_size min_frequency pattern special_tokens",
   function(o) return text.BPETokenizer.train({"abc"}, o) end, {vocab_size = 258}},
  {"netcl.text.train_file", "vocab_size min_frequency pattern special_tokens",
   function(o) return text.BPETokenizer.train_file({}, o) end, {vocab_size = 256}},
  {"netcl.text.from_tiktoken", "pattern special_tokens",
   function(o) return text.BPETokenizer.from_tiktoken("/nonexistent/ranks", o) end, false},
  {"netcl.text.encode", "allowed_special strict as_tensor", function(o) return tok:encode("hello", o) end},
  {"netcl.optim", "params lr momentum dampening weight_decay nesterov",
   function(o) return nc._optim.sgd_step(nc.zeros({2}), nc.ones({2}), nil, false, o) end, sgd_group()},
  {"netcl.optim", "params lr alpha eps weight_decay momentum centered",
   function(o) return nc._optim.rmsprop_step(nc.zeros({2}), nc.ones({2}), nc.zeros({2}), nil, nil, o) end,
   {lr = 0.1, alpha = 0.9, eps = 1e-8, weight_decay = 0, momentum = 0, centered = false}},
  {"netcl.optim", "params lr betas eps weight_decay amsgrad",
   function(o) return nc._optim.adam_step(nc.zeros({2}), nc.ones({2}), nc.zeros({2}), nc.zeros({2}), nil, 1, false, o) end,
   {lr = 0.1, betas = {0.9, 0.999}, eps = 1e-8, weight_decay = 0, amsgrad = false}},
}

TestOptions = {}

function TestOptions:test_misspelt_dtype()
  local err = raises(function() return nc.zeros({2}, {dtyp = "float64"}) end, "netcl.zeros", "'dtyp'", "dtype=",
    "device=")
  lu.assertStrContains(err, "unknown option 'dtyp' (accepted: {dtype=, device=})")
end

function TestOptions:test_options_must_be_a_table()
  raises(function() return nc.zeros({2}, "float64") end, "netcl.zeros: argument 2: options must be a table",
    "{dtype=, device=}", "got string")
  raises(function() return nc.full({2}, 1, 7) end, "netcl.full: argument 3: options must be a table", "got number")
  raises(function() return nc.zeros({2}, {"float64"}) end, "netcl.zeros", "options have a number key", "dtype=")
end

function TestOptions:test_every_binding_rejects_unknown_keys()
  for _, b in ipairs(BINDINGS) do
    local fname, keys, call = b[1], b[2], b[3]
    local accepted = {}
    for k in keys:gmatch("%S+") do accepted[#accepted + 1] = k .. "=" end
    local bad = {bogus_key = 1}
    for k, v in pairs(b[4] or {}) do bad[k] = v end
    local err = raises(function() return call(bad) end, fname, "unknown option 'bogus_key'",
      "{" .. table.concat(accepted, ", ") .. "}")
    lu.assertNil(err:find("accepted:.*bogus_key"), err)
    raises(function() return call("dtype") end, fname, "options must be a table")
  end
end

function TestOptions:test_valid_options_still_work()
  for _, b in ipairs(BINDINGS) do
    if b[4] ~= false then
      local ok, err = pcall(b[3], b[4] or nil)
      lu.assertTrue(ok, b[1] .. ": " .. tostring(err))
      if b[4] == nil then
        ok, err = pcall(b[3], {})
        lu.assertTrue(ok, b[1] .. " with {}: " .. tostring(err))
      end
    end
  end
  lu.assertEquals(nc.zeros({2}, {dtype = "int64"}).dtype, "int64")
  lu.assertEquals(nc.ones({2}, {dtype = "int32", device = dev}).device, dev)
  lu.assertEquals(nc.tensor({1, 2, 3, 4}, {shape = {2, 2}, dtype = "int64"}).shape, {2, 2})
  lu.assertEquals(nc.arange(1, 7, 2, {dtype = "int64"}):tolist(), {1, 3, 5})
  lu.assertEquals(nc.eye(2, 3, {dtype = "uint8", device = "cpu"}).device, nc.device("cpu"))
  lu.assertEquals(nc.from_bytes(string.pack("<i4", 7), {1}, "int32", {device = "cpu"}):tolist(), {7})
  lu.assertEquals(nc.zeros({2}, nil).dtype, "float32")
  local t = tok:encode("hello", {as_tensor = true, strict = false})
  lu.assertEquals(t.dtype, "int64")
  lu.assertEquals(t.device, dev)
  lu.assertEquals(t:tolist(), tok:encode("hello"))
end

function TestOptions:test_option_values_are_checked()
  raises(function() return nc.zeros({2}, {dtype = 5}) end, "netcl.zeros: argument 2: opts.dtype must be a string, got number")
  raises(function() return nc.zeros({2}, {device = 5}) end,
    "netcl.zeros: argument 2: opts.device: expected a Device or a device spec string, got number")
  raises(function() return nc.tensor({1}, {shape = "x"}) end, "netcl.tensor: argument 2: option 'shape'")
  raises(function() return tok:encode("x", {as_tensor = 1}) end, "netcl.text.encode", "option 'as_tensor' must be a boolean")
end

function TestOptions:test_optimizer_group_edited_after_construction()
  local p = ag.param(nc.zeros({2}))
  local opt = optim.SGD({p}, {lr = 0.1})
  p.grad = nc.ones({2})
  opt.param_groups[1].momentun = 0.9
  raises(function() opt:step() end, "netcl.optim.SGD:step", "unknown option 'momentun'", "momentum=")
  opt.param_groups[1].momentun = nil
  opt:step()
  H.assert_close(p.value, {-0.1, -0.1}, 1e-6)
end

TestErrorFormat = {}

-- Argument errors of the converted bindings name the function, the argument and the problem;
-- only the caller's position (as luaL_error gives it) comes before the function's name.
local function unplaced(err) return (tostring(err):gsub("^[^\n]-:%d+: ", "", 1)) end

function TestErrorFormat:test_argument_errors_name_the_function()
  local cases = {
    {function() return nc.manual_seed("x") end, "netcl.manual_seed: argument 1: expected an integer, got string"},
    {function() return nc.linspace(0, 1, 2.5) end, "netcl.linspace: argument 3: expected an integer, got 2.5"},
    {function() return nc.linspace(0, {}, 2) end, "netcl.linspace: argument 2: expected a number, got table"},
    {function() return nc.full({2}, "x") end, "netcl.full: argument 2: expected a number, got string"},
    {function() return nc.arange("x") end, "netcl.arange: argument 1: expected a number, got string"},
    {function() return nc.eye("x") end, "netcl.eye: argument 1: expected an integer, got string"},
    {function() return nc.from_bytes({}, {1}, "int32") end, "netcl.from_bytes: argument 1: expected a string, got table"},
    {function() return dev[1] end, "netcl.Device: fields are named by strings, got a number key"},
    {function() return nc._json.decode() end, "netcl.json.decode: argument 1: expected a string, got no value"},
    {function() return nc._json.encode() end, "netcl.json.encode: argument 1: expected a value"},
    {function() return nc._json.encode({f = print}) end, "netcl.json.encode: cannot encode a function (at .f)"},
    {function() return nc._term.isatty("x") end, "netcl._term.isatty: argument 1: expected an integer, got string"},
    {function() return nc._term.columns(-1) end, "netcl._term.columns: argument 1: -1 is not a file descriptor"},
    {function() return nc._data.permutation("x", 1, 1) end, "netcl.data.permutation: argument 1: expected an integer"},
    {function() return nc._io.load_npy(5) end, "netcl.io.load_npy: argument 1: expected a path string, got number"},
    {function() return nc._io.load_idx(nil, nil, "netcl.data.mnist") end, "netcl.data.mnist: argument 1: expected a path"},
    {function() return nc._io.load_npy("x", nil, 5) end, "netcl.io.load_npy: argument 3: expected the name"},
    {function() return nc._optim.clip_grad_norm({}, "x") end, "netcl.optim: argument 2: expected a number, got string"},
    {function() return nc._optim.adam_step(nc.zeros({1}), nc.zeros({1}), nc.zeros({1}), nc.zeros({1}), nil, "x") end,
     "netcl.optim: argument 6: expected an integer, got string"},
    {function() return nc._optim.sgd_step(nc.zeros({1}), nc.zeros({1}), nil, false) end,
     "netcl.optim: argument 5: expected the parameter group's options table, got no value"},
    {function() return tok._h:is_special("x") end, "netcl.text.is_special: argument 2: expected an integer"},
    {function() return tok._h.free(5) end, "netcl.text.free: argument 1: expected Tokenizer, got number"},
    {function() return getmetatable(dev).__tostring(5) end,
     "netcl.Device:__tostring: argument 1: expected Device, got number"},
  }
  for _, c in ipairs(cases) do
    local ok, err = pcall(c[1])
    lu.assertFalse(ok, c[2])
    lu.assertEquals(unplaced(err):sub(1, #c[2]), c[2])
  end
end

-- Library errors get the function's name in front; messages are not cut short, whatever their
-- length (an OpenCL build log can be long).
function TestErrorFormat:test_library_errors_are_prefixed()
  local err = raises(function() return nc.zeros({2}, {dtype = "float65"}) end, "float65")
  lu.assertEquals(unplaced(err):sub(1, 13), "netcl.zeros: ")
  err = raises(function() return nc.zeros({2}, {device = "nodevice:9"}) end, "nodevice")
  lu.assertEquals(unplaced(err):sub(1, 13), "netcl.zeros: ")
  local long = string.rep("x", 5000)
  err = raises(function() return nc.zeros({2}, {[long] = 1}) end, "'" .. long .. "' (accepted: {dtype=, device=})")
  lu.assertEquals(unplaced(err):sub(1, 13), "netcl.zeros: ")
end

os.exit(lu.LuaUnit.run("-o", "text", table.unpack(arg)))
