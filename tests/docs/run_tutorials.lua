-- Runs every ```lua code block of the tutorial pages given on the command line (docs/tutorials/*.md),
-- in order, and fails when any block raises an error. Each block is a complete program: it runs as
-- its own chunk with an environment of its own (globals do not leak from one block to the next),
-- and its line numbers are the page's, so an error reads `docs/tutorials/PAGE.md:LINE: message`.
--
--   netcl-lua tests/docs/run_tutorials.lua docs/tutorials/first-training-run.md [...]
--
-- ctest (tests/CMakeLists.txt, `docs.tutorial.*`) runs each page on the CPU backend with
-- NETCL_TUTORIAL_QUICK=1, which the tutorials read to train on smaller sizes, from a scratch
-- working directory in the build tree (the blocks write their checkpoints and charts there).
-- Blocks fenced with another language (```sh, ```c, ```text) are not run.
local nc = require "netcl"

-- The ```lua blocks of a Markdown file: {line = first code line, code = text}.
local function blocks_of(path)
  local f = assert(io.open(path, "r"))
  local out, cur, n = {}, nil, 0
  for line in f:lines() do
    n = n + 1
    if cur then
      if line:match("^```%s*$") then
        out[#out + 1] = cur
        cur = nil
      else
        cur.lines[#cur.lines + 1] = line
      end
    elseif line:match("^```lua%s*$") then
      cur = {line = n + 1, lines = {}}
    end
  end
  f:close()
  assert(cur == nil, path .. ": a ```lua block is not closed")
  for _, b in ipairs(out) do b.code = table.concat(b.lines, "\n") end
  return out
end

if #arg == 0 then
  io.stderr:write("usage: run_tutorials.lua PAGE.md [...]\n")
  os.exit(2)
end

local failures, ran = 0, 0
for _, path in ipairs(arg) do
  local name = path:match("(docs/tutorials/[^/]+)$") or path
  local blocks = blocks_of(path)
  if #blocks == 0 then
    io.stderr:write(string.format("FAIL %s: the page has no ```lua block\n", name))
    failures = failures + 1
  end
  for i, b in ipairs(blocks) do
    -- pad with newlines so the chunk's line numbers are the page's
    local src = string.rep("\n", b.line - 1) .. b.code
    local env = setmetatable({}, {__index = _G})
    local chunk, err = load(src, "@" .. name, "t", env)
    local t0 = nc.clock()
    local ok = chunk ~= nil
    if ok then
      nc.set_default_device(nc.device("cpu"))
      ok, err = xpcall(chunk, debug.traceback)
    end
    ran = ran + 1
    if ok then
      print(string.format("ok   %s block %d (line %d) %.1fs", name, i, b.line, nc.clock() - t0))
    else
      failures = failures + 1
      io.stderr:write(string.format("FAIL %s block %d (line %d): %s\n", name, i, b.line, tostring(err)))
    end
    collectgarbage()
  end
end
print(string.format("%d block(s) run, %d failed", ran, failures))
os.exit(failures == 0 and 0 or 1)
