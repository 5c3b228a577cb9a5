-- netcl.progress: progress of a loop. On a terminal, one line redrawn in place with a bar,
-- rate, ETA and the latest values (loss, ...); otherwise (a log file, a pipe) plain lines,
-- at most one per `interval` seconds, and a last one when the bar closes. docs/data.md has the
-- formats.
local nc = require "netcl"
local class = require "netcl.class"

local M = {}

local Bar = class("netcl.progress.Bar")

local OPTIONS = {total = true, desc = true, out = true, tty = true, interval = true, width = true, clock = true}

local function stdout_is_terminal()
  local term = os.getenv("TERM")
  return nc._term.isatty(1) and term ~= "dumb"
end

--- progress.bar{total=, desc=, out=io.stdout, tty=, interval=, width=, clock=}
-- total: steps expected (nil: unknown, no percentage or ETA); desc: a label; out: anything with
-- :write(); tty: draw in place (default: whether out is io.stdout and stdout is a terminal);
-- interval: seconds between redraws (default 0.1 on a terminal, 10 for plain lines);
-- width: columns (default: the terminal's, else 80); clock: a seconds function (default
-- nc.clock).
function M.bar(opts)
  local fname = "netcl.progress.bar"
  opts = opts or {}
  if type(opts) ~= "table" then error(fname .. ": options must be a table, got " .. type(opts), 2) end
  for k in pairs(opts) do
    if not OPTIONS[k] then error(string.format("%s: unknown option '%s'", fname, tostring(k)), 2) end
  end
  if opts.total ~= nil and (type(opts.total) ~= "number" or opts.total < 0) then
    error(fname .. ": total must be a number >= 0, got " .. tostring(opts.total), 2)
  end
  local out = opts.out or io.stdout
  local tty = opts.tty
  if tty == nil then tty = out == io.stdout and stdout_is_terminal() end
  local clock = opts.clock or nc.clock
  local self = Bar()
  self.total, self.desc, self.out, self.tty, self.clock = opts.total, opts.desc, out, tty, clock
  self.n, self.info, self.closed = 0, {}, false
  self.interval = opts.interval or (tty and 0.1 or 10)
  self.width = opts.width or (tty and out == io.stdout and nc._term.columns(1)) or tonumber(os.getenv("COLUMNS")) or 80
  -- Block characters only where the locale says the terminal takes UTF-8.
  local locale = os.getenv("LC_ALL") or os.getenv("LC_CTYPE") or os.getenv("LANG") or ""
  self.fill = locale:upper():find("UTF%-?8") and "\u{2588}" or "#"
  self.start = clock()
  self.last = nil
  return self
end

-- "1:05", "12:00:07"
local function hms(s)
  s = math.floor(s + 0.5)
  local h, m = s // 3600, s % 3600 // 60
  if h > 0 then return string.format("%d:%02d:%02d", h, m, s % 60) end
  return string.format("%d:%02d", m, s % 60)
end

local function value(v)
  if math.type(v) == "float" then return string.format("%.4g", v) end
  return tostring(v)
end

-- "loss=0.4321 acc=0.91": the update's values, sorted by name.
local function postfix(info)
  local keys = {}
  for k in pairs(info) do keys[#keys + 1] = k end
  table.sort(keys)
  for i, k in ipairs(keys) do keys[i] = k .. "=" .. value(info[k]) end
  return table.concat(keys, " ")
end

local function rate_text(n, elapsed)
  if n == 0 or elapsed <= 0 then return "? it/s" end
  local r = n / elapsed
  if r < 1 then return string.format("%.2f s/it", 1 / r) end
  return string.format("%.2f it/s", r)
end

-- Plain: "train: 50/100 (50%), 10.00 it/s, 0:05 elapsed, eta 0:05, loss=0.5"
function Bar:_plain_line()
  local now = self.clock()
  local elapsed = now - self.start
  local parts = {}
  if self.total then
    parts[1] = string.format("%d/%d (%d%%)", self.n, self.total, self.total > 0 and math.floor(100 * self.n / self.total) or 100)
  else
    parts[1] = tostring(self.n)
  end
  parts[#parts + 1] = rate_text(self.n, elapsed)
  parts[#parts + 1] = hms(elapsed) .. " elapsed"
  if self.total and self.n > 0 and self.n < self.total and elapsed > 0 then
    parts[#parts + 1] = "eta " .. hms((self.total - self.n) * elapsed / self.n)
  end
  local pf = postfix(self.info)
  if pf ~= "" then parts[#parts + 1] = pf end
  return (self.desc and self.desc .. ": " or "") .. table.concat(parts, ", ")
end

-- Characters on screen (bytes when s is not UTF-8).
local function columns(s) return utf8.len(s) or #s end

-- Terminal: "train:  50%|██████      | 50/100 [0:05<0:05, 10.00 it/s, loss=0.5]"
function Bar:_tty_line()
  local elapsed = self.clock() - self.start
  local eta = "?"
  if self.total and self.n > 0 and elapsed > 0 then eta = hms(math.max(0, self.total - self.n) * elapsed / self.n) end
  local pf = postfix(self.info)
  local stats = string.format(" %s%s [%s<%s, %s%s]", self.n, self.total and "/" .. self.total or "", hms(elapsed),
    self.total and eta or "?", rate_text(self.n, elapsed), pf ~= "" and ", " .. pf or "")
  local head = self.desc and self.desc .. ": " or ""
  if not self.total then return head .. stats:sub(2) end
  local frac = self.total > 0 and math.min(1, self.n / self.total) or 1
  head = head .. string.format("%3d%%", math.floor(100 * frac))
  local room = self.width - 1 - columns(head) - columns(stats) - 2
  if room < 5 then return head .. stats end
  local full = math.floor(frac * room)
  return head .. "|" .. string.rep(self.fill, full) .. string.rep(" ", room - full) .. "|" .. stats
end

function Bar:_draw(final)
  if self.tty then
    self.out:write("\r", self:_tty_line(), "\27[K", final and "\n" or "")
  else
    self.out:write(self:_plain_line(), "\n")
  end
  if self.out.flush then self.out:flush() end
  self.last, self.last_n = self.clock(), self.n
end

--- bar:update(n=1, info?): n more steps done; info (e.g. {loss = 0.53}) replaces the values
-- shown. Redraws at most once per interval.
function Bar:update(n, info)
  if self.closed then error("netcl.progress.update: the bar is closed", 2) end
  n = n or 1
  if type(n) ~= "number" then error("netcl.progress.update: n must be a number, got " .. type(n), 2) end
  if info ~= nil then
    if type(info) ~= "table" then error("netcl.progress.update: info must be a table, got " .. type(info), 2) end
    self.info = info
  end
  self.n = self.n + n
  local now = self.clock()
  -- A terminal shows the first update at once; log lines start one interval in.
  local since = self.last or (not self.tty and self.start)
  if not since or now - since >= self.interval then self:_draw(false) end
end

--- bar:log(msg): prints a line without breaking the bar.
function Bar:log(msg)
  if self.tty then
    self.out:write("\r\27[K", tostring(msg), "\n")
    if not self.closed then self:_draw(false) end
  else
    self.out:write(tostring(msg), "\n")
  end
end

--- bar:close(): the final state, once. Also runs for `local bar <close> = progress.bar{...}`.
function Bar:close()
  if self.closed then return end
  -- A log already ending with this count gets no duplicate line.
  if self.tty or self.last_n ~= self.n then self:_draw(true) end
  self.closed = true
end

Bar.__close = Bar.close

M.Bar = Bar

return M
