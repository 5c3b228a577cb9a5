-- netcl.progress: the plain log-line format (stdout not a terminal) and the terminal bar,
-- driven by a fake clock and a fake output.
local lu = require "luaunit"
local progress = require "netcl.progress"
local H = require "helpers"

H.device()

local function fake()
  local f = {now = 0, text = {}}
  f.clock = function() return f.now end
  f.out = {write = function(_, ...) for _, s in ipairs({...}) do f.text[#f.text + 1] = s end end}
  f.all = function() return table.concat(f.text) end
  return f
end

TestProgress = {}

function TestProgress:test_plain_lines()
  local f = fake()
  local bar = progress.bar{total = 100, desc = "train", out = f.out, clock = f.clock, tty = false, interval = 5}
  f.now = 1
  bar:update(10, {loss = 0.5})
  lu.assertEquals(f.all(), "") -- at most one line per interval
  f.now = 5
  bar:update(40, {loss = 0.25, acc = 0.875})
  lu.assertEquals(f.all(), "train: 50/100 (50%), 10.00 it/s, 0:05 elapsed, eta 0:05, acc=0.875 loss=0.25\n")
  f.now = 7
  bar:update(10)
  f.now = 10
  bar:update(40, {loss = 0.125})
  f.now = 11
  bar:close()
  bar:close() -- once
  lu.assertEquals(f.all(), "train: 50/100 (50%), 10.00 it/s, 0:05 elapsed, eta 0:05, acc=0.875 loss=0.25\n" ..
    "train: 100/100 (100%), 10.00 it/s, 0:10 elapsed, loss=0.125\n")
  H.assert_error(function() bar:update(1) end, "netcl.progress.update: the bar is closed")
end

function TestProgress:test_plain_close_and_unknown_total()
  local f = fake()
  do
    local bar <close> = progress.bar{desc = "eval", out = f.out, clock = f.clock, tty = false}
    for _ = 1, 30 do bar:update() end
    f.now = 4000
    bar:update(0, {seen = 30})
  end
  -- nothing within the default 10 s interval... until the update at 4000 s; <close> adds no
  -- duplicate of that final state
  lu.assertEquals(f.all(), "eval: 30, 133.33 s/it, 1:06:40 elapsed, seen=30\n")
  local g = fake()
  local bar = progress.bar{total = 4, out = g.out, clock = g.clock, tty = false}
  g.now = 2
  bar:update(1)
  bar:log("epoch 1: loss 0.5")
  bar:close()
  lu.assertEquals(g.all(), "epoch 1: loss 0.5\n1/4 (25%), 2.00 s/it, 0:02 elapsed, eta 0:06\n")
end

function TestProgress:test_terminal_bar()
  local f = fake()
  local bar = progress.bar{total = 100, desc = "train", out = f.out, clock = f.clock, tty = true, width = 80,
                           interval = 0.5}
  f.now = 5
  bar:update(50, {loss = 0.25})
  local stats = " 50/100 [0:05<0:05, 10.00 it/s, loss=0.25]"
  local head = "train:  50%"
  local room = 80 - 1 - #head - #stats - 2
  local line = head .. "|" .. string.rep(bar.fill, room // 2) .. string.rep(" ", room - room // 2) .. "|" .. stats
  lu.assertEquals(f.all(), "\r" .. line .. "\27[K")
  f.now = 5.2
  bar:update(1) -- within the interval: no redraw
  lu.assertEquals(f.all(), "\r" .. line .. "\27[K")
  bar:log("note")
  lu.assertStrContains(f.all(), "\r\27[Knote\n\rtrain:  51%|")
  f.now = 10
  bar:update(49)
  bar:close()
  lu.assertStrContains(f.all(), "100/100 [0:10<0:00, 10.00 it/s, loss=0.25]\27[K\n")
  lu.assertEquals(select(2, f.all():gsub("\n", "")), 2) -- the log line and the final newline
  -- too narrow for a bar: the numbers alone
  local g = fake()
  local narrow = progress.bar{total = 10, out = g.out, clock = g.clock, tty = true, width = 20}
  narrow:update(3)
  lu.assertEquals(g.all(), "\r 30% 3/10 [0:00<?, ? it/s]\27[K")
end

function TestProgress:test_errors()
  H.assert_error(function() progress.bar{totl = 3} end, "netcl.progress.bar: unknown option 'totl'")
  H.assert_error(function() progress.bar{total = -1} end, "total must be a number >= 0")
  local bar = progress.bar{total = 1, out = fake().out, tty = false}
  H.assert_error(function() bar:update("x") end, "n must be a number")
  H.assert_error(function() bar:update(1, 5) end, "info must be a table")
end

os.exit(lu.LuaUnit.run())
