-- DataLoader: batches of a dataset on a target device, optionally shuffled with a seeded,
-- per-epoch permutation. With num_workers = 0 batches are assembled when the iterator asks for
-- them (host-to-device copies are asynchronous, so they overlap with the work queued before);
-- with num_workers > 0, forked worker processes run the dataset's get and collate batches into
-- a shared-memory ring (netcl/workers.h), and this process copies them to the device.
local nc = require "netcl"
local class = require "netcl.class"
local TensorDataset = require "netcl.data.dataset"

local DataLoader = class("netcl.data.DataLoader")

local FNAME = "netcl.data.DataLoader"
local OPTIONS = {batch_size = true, shuffle = true, drop_last = true, num_workers = true, prefetch = true,
                 transform = true, device = true, seed = true}

local function callable(f)
  return type(f) == "function" or (getmetatable(f) or {}).__call ~= nil
end

-- The checks below run in init (netcl.class calls it from the user's line: level 4 from here).
local function check_int(name, v, min)
  if math.type(v) ~= "integer" or v < min then
    error(string.format("%s: %s must be an integer >= %d, got %s", FNAME, name, min, tostring(v)), 4)
  end
  return v
end

local function check_bool(name, v)
  if v ~= nil and type(v) ~= "boolean" then
    error(string.format("%s: %s must be a boolean, got %s", FNAME, name, type(v)), 4)
  end
  return v == true
end

-- level: where errors are raised, as seen from here (3: the caller of a method).
local function dataset_len(ds, level)
  local n = ds:len()
  if math.type(n) ~= "integer" or n < 0 then
    error(string.format("%s: the dataset's len() returned %s, expected an integer >= 0", FNAME, tostring(n)),
      level or 3)
  end
  return n
end

--- data.DataLoader(ds, opts). Errors at level 3 are the caller's line (netcl.class calls init).
function DataLoader:init(ds, opts)
  if not (callable(class.field(ds, "len")) and callable(class.field(ds, "get"))) then
    error(FNAME .. ": argument 1 must be a dataset (an object with len(self) and get(self, i))", 3)
  end
  if opts ~= nil and type(opts) ~= "table" then error(FNAME .. ": options must be a table, got " .. type(opts), 3) end
  opts = opts or {}
  for k in pairs(opts) do
    if not OPTIONS[k] then error(string.format("%s: unknown option '%s'", FNAME, tostring(k)), 3) end
  end
  self.dataset, self.epoch = ds, 0
  self.batch_size = check_int("batch_size", opts.batch_size or 1, 1)
  self.shuffle = check_bool("shuffle", opts.shuffle)
  self.drop_last = check_bool("drop_last", opts.drop_last)
  self.num_workers = check_int("num_workers", opts.num_workers or 0, 0)
  if self.num_workers > 256 then error(FNAME .. ": num_workers must be at most 256, got " .. self.num_workers, 3) end
  -- prefetch: ring slots per worker (batches a worker may have ready ahead of the loop). With
  -- no workers it has nothing to size; it is still checked, so a script written for workers
  -- fails early on a bad value.
  self.prefetch = check_int("prefetch", opts.prefetch or 2, 1)
  if self.prefetch > 64 then error(FNAME .. ": prefetch must be at most 64, got " .. self.prefetch, 3) end
  if opts.transform ~= nil and not callable(opts.transform) then
    error(FNAME .. ": transform must be a function (or callable), got " .. type(opts.transform), 3)
  end
  self.transform = opts.transform
  if opts.device == nil then
    self.device = nc.default_device()
  elseif type(opts.device) == "string" then
    self.device = nc.device(opts.device)
  elseif (getmetatable(opts.device) or {}).__name == "netcl.Device" then
    self.device = opts.device
  else
    error(FNAME .. ": device must be a Device or a device spec, got " .. type(opts.device), 3)
  end
  if opts.seed ~= nil then
    self.seed = check_int("seed", opts.seed, math.mininteger)
  else
    -- Drawn from the netcl generator, so nc.manual_seed fixes the shuffles too.
    self.seed = nc._data.next_seed()
  end
  dataset_len(ds, 4)
end

--- loader:len() -> batches per epoch
function DataLoader:len()
  local n, b = dataset_len(self.dataset), self.batch_size
  return self.drop_last and n // b or (n + b - 1) // b
end

-- A TensorDataset's rows, gathered straight into batch tensors on the device.
local function gather(tensors, order, start, count, device)
  local out = {n = #tensors}
  for k, src in ipairs(tensors) do
    local shape = src.shape
    shape[1] = count
    local dst = nc.empty(shape, {dtype = src.dtype, device = device})
    if order then
      nc._data.gather(dst, src, order, start)
    else
      dst:copy_(src:narrow(1, start, count))
    end
    out[k] = dst
  end
  return out
end

local function same_shape(a, b)
  if #a ~= #b then return false end
  for i = 1, #a do if a[i] ~= b[i] then return false end end
  return true
end

-- Any other dataset: get() per sample; tensors are stacked on the samples' device, numbers and
-- booleans become one tensor per field (int64 when every value is an integer, else float32).
local function collate(ds, indices, start, count, device)
  local fields, n
  for j = 1, count do
    local i = indices and indices[start + j - 1] + 1 or start + j - 1
    local sample = table.pack(ds:get(i))
    if j == 1 then
      n = sample.n
      if n == 0 then error(string.format("%s: the dataset's get(%d) returned nothing", FNAME, i), 3) end
      fields = {}
    elseif sample.n ~= n then
      error(string.format("%s: get(%d) returned %d values, the first sample of the batch %d", FNAME, i, sample.n, n), 3)
    end
    for f = 1, n do
      local v = sample[f]
      if nc.is_tensor(v) then
        local acc = fields[f]
        if j == 1 then
          local shape = v.shape
          table.insert(shape, 1, count)
          acc = {tensor = nc.empty(shape, {dtype = v.dtype, device = v.device}), shape = v.shape}
          fields[f] = acc
        elseif not acc.tensor or not same_shape(v.shape, acc.shape) then
          error(string.format("%s: get(%d) field %d does not match the first sample of the batch (a %s [%s])",
            FNAME, i, f, acc.tensor and "tensor" or "number", acc.tensor and table.concat(acc.shape, ",") or ""), 3)
        end
        acc.tensor[j] = v
      elseif type(v) == "number" or type(v) == "boolean" then
        local acc = fields[f]
        if j == 1 then
          acc = {values = {}, ints = true, bools = type(v) == "boolean"}
          fields[f] = acc
        elseif not acc.values or acc.bools ~= (type(v) == "boolean") then
          error(string.format("%s: get(%d) field %d is a %s, unlike the first sample of the batch", FNAME, i, f,
            type(v)), 3)
        end
        acc.values[j] = v
        acc.ints = acc.ints and math.type(v) == "integer"
      else
        error(string.format("%s: get(%d) field %d is a %s; samples hold tensors, numbers or booleans", FNAME, i,
          f, type(v)), 3)
      end
    end
  end
  local out = {n = n}
  for f = 1, n do
    local acc = fields[f]
    if acc.tensor then
      out[f] = acc.tensor:to(device)
    else
      local dtype = acc.bools and "bool" or acc.ints and "int64" or "float32"
      out[f] = nc.tensor(acc.values, {dtype = dtype, device = device})
    end
  end
  return out
end

-- Bytes of one sample's fields in a packed batch (numbers as 8 bytes, booleans as 1).
local function sample_bytes(sample)
  local total = 0
  for f = 1, sample.n do
    local v = sample[f]
    if nc.is_tensor(v) then
      total = total + #v:contiguous():bytes()
    else
      total = total + 8
    end
  end
  return total
end

-- The worker's loop: its batches (b = w, w + W, ...), each collated on the CPU and written into
-- its slot; a Lua error goes to the main process with its traceback instead of a batch. It never
-- returns: the process ends here, without running finalizers on the copy of the parent's state.
-- Batches before `first` (a resumed epoch) are not made; slot r holds batch first + r.
local function worker_main(ring, w, workers, ds, indices, bs, n, batches, first)
  local ok, err = pcall(function()
    local cpu = nc.device("cpu")
    nc.set_default_device(cpu) -- tensors a worker's get makes are CPU tensors
    for r = w, batches - first - 1, workers do
      local b = first + r
      local start = b * bs + 1
      local count = math.min(bs, n - start + 1)
      local ok2, out = xpcall(collate, debug.traceback, ds, indices, start, count, cpu)
      if not ok2 then
        -- The worker's traceback, cut where it enters the worker loop (what lies below is this
        -- process's stack at the fork).
        local msg = tostring(out)
        local cut = msg:find("\n\t%[C%]: in function 'xpcall'")
        ring:put_error(r, cut and msg:sub(1, cut - 1) or msg)
        return
      end
      if not ring:put(r, table.unpack(out, 1, out.n)) then return end -- the main process has gone
    end
  end)
  if not ok then
    io.stderr:write(string.format("%s: worker %d: %s\n", FNAME, w + 1, tostring(err)))
    nc._data.worker_exit(1)
  end
  nc._data.worker_exit(0)
end

-- An epoch with worker processes. The order (indices) is fixed before the workers fork, and
-- batch b always comes from worker b % W's slot, so batches arrive in the same order, with the
-- same contents, whatever the number of workers.
local function iter_workers(self, ds, n, indices, batches, device, transform, first)
  local todo = batches - first
  local bs, workers = self.batch_size, math.min(self.num_workers, math.max(todo, 1))
  local r = 0
  if todo <= 0 then return function() return nil end end
  -- One sample read here sizes the slots (every sample must have the same shapes).
  local probe = table.pack(ds:get(indices and indices[1] + 1 or 1))
  if probe.n == 0 then error(string.format("%s: the dataset's get returned nothing", FNAME), 3) end
  local slot = math.max(65536, 4096 + probe.n * 256 + bs * sample_bytes(probe) + probe.n * 64)
  local ring = nc._data.ring(workers, self.prefetch, slot)
  local pids = {}
  for w = 0, workers - 1 do
    local pid = ring:fork(w)
    if pid == 0 then worker_main(ring, w, workers, ds, indices, bs, n, batches, first) end
    pids[w + 1] = pid
  end
  self._worker_pids = pids -- for tests (that no zombie is left)
  local function step()
    if r >= todo then
      ring:close()
      return nil
    end
    local out = table.pack(pcall(ring.take, ring, r, device))
    if not out[1] then
      ring:close()
      error(out[2], 2)
    end
    local b = first + r
    if not out[2] then
      local w = r % workers
      ring:close()
      error(string.format("%s: worker %d failed on batch %d (samples %d..%d of the epoch's order): %s", FNAME,
        w + 1, b + 1, b * bs + 1, math.min(n, (b + 1) * bs), out[3]), 2)
    end
    r = r + 1
    self.batch = first + r
    if r >= todo then ring:close() end
    local first = out[3]
    if transform then
      first = transform(first)
      if first == nil then
        ring:close()
        error(FNAME .. ": transform returned nil", 2)
      end
    end
    return first, table.unpack(out, 4, out.n)
  end
  -- The ring is also the loop's closing value: leaving the loop early (break, error) ends the
  -- workers at once.
  return step, nil, nil, ring
end

--- loader:state_dict() -> {epoch=, batch=, seed=}: where the loader is (batch: how many batches
-- of epoch `epoch` it has handed out), so that a run stopped in the middle of an epoch can
-- resume there (JSON-able).
function DataLoader:state_dict()
  return {epoch = self.epoch, batch = self.batch or 0, seed = self.seed}
end

--- loader:load_state_dict(sd): the next iter() continues epoch sd.epoch after its first sd.batch
-- batches (the same batches an uninterrupted run would give: the order is a function of seed
-- and epoch), or starts epoch sd.epoch + 1 when that epoch was complete.
function DataLoader:load_state_dict(sd)
  local fname = FNAME .. ":load_state_dict"
  if type(sd) ~= "table" then error(fname .. ": expected {epoch=, batch=, seed=}, got " .. type(sd), 2) end
  for k in pairs(sd) do
    if k ~= "epoch" and k ~= "batch" and k ~= "seed" then
      error(string.format("%s: unknown entry '%s' (accepted: {batch=, epoch=, seed=})", fname, tostring(k)), 2)
    end
  end
  local epoch, batch, seed = math.tointeger(sd.epoch), math.tointeger(sd.batch), math.tointeger(sd.seed)
  if not epoch or epoch < 0 then error(fname .. ": epoch must be an integer >= 0, got " .. tostring(sd.epoch), 2) end
  if not batch or batch < 0 then error(fname .. ": batch must be an integer >= 0, got " .. tostring(sd.batch), 2) end
  if sd.seed ~= nil and not seed then error(fname .. ": seed must be an integer, got " .. tostring(sd.seed), 2) end
  if batch > self:len() then
    error(string.format("%s: batch %d is past the %d batches of an epoch", fname, batch, self:len()), 2)
  end
  self.seed = seed or self.seed
  if epoch > 0 and batch < self:len() then
    self.epoch, self._resume_batch = epoch - 1, batch
  else
    self.epoch, self._resume_batch = epoch, nil
  end
  self.batch = nil
end

--- for x, y in loader:iter() do ... end: one epoch. Each call starts the next epoch, whose
-- shuffle is the permutation for (seed, epoch).
function DataLoader:iter()
  self.epoch = self.epoch + 1
  local first = self._resume_batch or 0
  self._resume_batch = nil
  self.batch = first
  local ds, bs, device, transform = self.dataset, self.batch_size, self.device, self.transform
  local n = dataset_len(ds)
  local order = self.shuffle and nc._data.permutation(n, self.seed, self.epoch) or nil
  local fast = getmetatable(ds) == TensorDataset and ds.size == n
  local indices = not fast and order and order:tolist() or nil
  local batches = self.drop_last and n // bs or (n + bs - 1) // bs
  -- A TensorDataset is gathered in C in this process whatever num_workers: workers would only
  -- add copies.
  if self.num_workers > 0 and not fast then
    return iter_workers(self, ds, n, indices, batches, device, transform, first)
  end
  local b = first
  return function()
    if b >= batches then return nil end
    local start = b * bs + 1
    local count = math.min(bs, n - start + 1)
    b = b + 1
    self.batch = b
    local out
    if fast then
      out = gather(ds.tensors, order, start, count, device)
    else
      out = collate(ds, indices, start, count, device)
    end
    if transform then
      out[1] = transform(out[1])
      if out[1] == nil then error(FNAME .. ": transform returned nil", 2) end
    end
    return table.unpack(out, 1, out.n)
  end
end

function DataLoader:__tostring()
  return string.format("DataLoader(%d batches of %d%s%s, device=%s)", self:len(), self.batch_size,
    self.shuffle and ", shuffled" or "", self.drop_last and ", drop_last" or "", self.device.spec)
end

return DataLoader
