-- netcl.ssl.Trainer: the pretraining loop on two random views of each batch, with exact resume
-- from its checkpoint (docs/ssl.md).
local nc = require "netcl"
local ag = require "netcl.autograd"
local nio = require "netcl.io"
local progress = require "netcl.progress"
local class = require "netcl.class"
local views = require "netcl.ssl.views"
local read_opts = require("netcl.ssl.common").read_opts
local Method = require("netcl.ssl.methods").Method

local M = {}

-- ---- the trainer ------------------------------------------------------------------------------------------
local Trainer = class("ssl.Trainer")
M.Trainer = Trainer

--- ssl.Trainer{method=, loader=, optimizer=, augment=ssl.views.default(), epochs=,
-- checkpoint=, resume=false, seed=1, scheduler=, progress=true, stop_after=, log=}:
-- trainer:fit() -> history {loss = {per epoch}, seconds = {...}}. Each batch (the loader's first
-- value; labels are ignored) gives two views, augment(x) twice; the loss is recorded, the
-- optimizer steps (and the scheduler, per step), then method:after_step() (momentum updates,
-- queue, center). Each epoch reseeds the generator from (seed, epoch) and sets the loader's
-- epoch, so with `checkpoint` (written after every epoch: method, optimizer, scheduler,
-- history) a run resumed with resume=true continues exactly as an uninterrupted one.
function Trainer:init(opts)
  local fname = "ssl.Trainer"
  local o = read_opts(fname, opts, {method = {"module"}, loader = {"any"}, optimizer = {"any"},
    augment = {"any", optional = true}, epochs = {"integer"}, checkpoint = {"string", optional = true},
    resume = {"boolean", false}, seed = {"integer", 1}, scheduler = {"any", optional = true},
    progress = {"boolean", true}, stop_after = {"integer", optional = true}, log = {"any", optional = true}}, 3)
  if not class.is_instance(o.method, Method) then error(fname .. ": method must be an ssl method (ssl.SimCLR, ...)", 3) end
  if not class.field(o.loader, "iter") then error(fname .. ": loader must have iter() (a data.DataLoader)", 3) end
  if not class.field(o.optimizer, "step") then error(fname .. ": optimizer must be an optimizer (optim.Adam, ...)", 3) end
  local aug = o.augment or views.default()
  if type(aug) ~= "function" and not (getmetatable(aug) or {}).__call then
    error(fname .. ": augment must be callable (a view maker: augment(x) -> a view of x)", 3)
  end
  if o.resume and not o.checkpoint then error(fname .. ": resume=true needs checkpoint=", 3) end
  for k, v in pairs(o) do self[k] = v end
  self.augment = aug
  self.history = {loss = {}, seconds = {}}
end

local function file_exists(path)
  local f = io.open(path, "rb")
  if f then f:close() end
  return f ~= nil
end

function Trainer:fit()
  local method, opt, loader = self.method, self.optimizer, self.loader
  local done = 0
  if self.resume and file_exists(self.checkpoint) then
    local extra = nio.load_model(method, self.checkpoint, {optimizer = opt})
    if type(extra) ~= "table" or type(extra.history) ~= "table" then
      error("ssl.Trainer.fit: " .. self.checkpoint .. " was not written by ssl.Trainer", 2)
    end
    self.history = extra.history
    done = #self.history.loss
    if self.scheduler and extra.scheduler then self.scheduler:load_state_dict(extra.scheduler) end
    if self.log then self.log(string.format("resumed from %s after epoch %d", self.checkpoint, done)) end
  end
  local last = math.min(self.epochs, self.stop_after or self.epochs)
  method:train()
  for epoch = done + 1, last do
    nc.manual_seed(self.seed * 1000 + epoch)
    if class.field(loader, "epoch") ~= nil then loader.epoch = epoch - 1 end
    local start = nc.clock()
    local total = class.field(loader, "len") and loader:len() or nil
    local bar <close> = progress.bar{total = total, desc = string.format("epoch %d/%d", epoch, self.epochs),
      out = not self.progress and {write = function() end, flush = function() end} or nil}
    -- the bar's loss: every 10 steps the window's sum is read back without waiting, and shown
    -- once it has landed (the host never waits for the device to queue the next step)
    local sum, window, steps, shown, reading = nil, nil, 0, nil, nil
    for x in loader:iter() do
      local v1, v2 = self.augment(x), self.augment(x)
      local tape = ag.Tape()
      local loss = tape:record(function() return method:loss(v1, v2) end)
      opt:zero_grad()
      tape:backward(loss)
      opt:step()
      if self.scheduler then self.scheduler:step() end
      method:after_step()
      local l = loss.value
      sum = sum and sum + l or l
      window = window and window + l or l
      steps = steps + 1
      if reading and (reading:is_ready() or steps % 10 == 0) then
        shown = reading:item() / 10
        reading = nil
      end
      if steps % 10 == 0 then
        reading = window:to("cpu", {non_blocking = true})
        window = nil
      end
      bar:update(1, shown and {loss = string.format("%.4f", shown)} or nil)
    end
    bar:close()
    if steps == 0 then error("ssl.Trainer.fit: the loader gave no batches", 2) end
    local mean = sum:item() / steps
    if mean ~= mean then error(string.format("ssl.Trainer.fit: the loss is nan in epoch %d", epoch), 2) end
    self.history.loss[epoch] = mean
    self.history.seconds[epoch] = nc.clock() - start
    if self.log then
      self.log(string.format("epoch %d: loss %.4f (%.1fs)", epoch, mean, self.history.seconds[epoch]))
    end
    if self.checkpoint then
      nio.save_model(method, self.checkpoint, {optimizer = opt, extra = {history = self.history, epoch = epoch,
        scheduler = self.scheduler and self.scheduler:state_dict() or nil}})
    end
  end
  return self.history
end

return M
