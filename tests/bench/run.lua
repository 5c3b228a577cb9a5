-- Runs every benchmark in tests/bench (bench_*.lua, or the names given as arguments); each
-- prints one JSON object per line with its figures and the reference ratio of the same run.
local dir = arg[0]:match("^(.*)/[^/]*$") or "."
local names = {}
if #arg > 0 then
  for i = 1, #arg do names[#names + 1] = dir .. "/bench_" .. arg[i]:gsub("^bench_", ""):gsub("%.lua$", "") .. ".lua" end
else
  local p = assert(io.popen("ls " .. dir .. "/bench_*.lua 2>/dev/null"))
  for f in p:lines() do names[#names + 1] = f end
  p:close()
end
local failed = 0
for _, f in ipairs(names) do
  io.stderr:write("== " .. f .. "\n")
  local chunk, err = loadfile(f)
  if not chunk then
    io.stderr:write(err .. "\n")
    failed = failed + 1
  else
    local ok, e = pcall(chunk)
    if not ok then
      io.stderr:write(tostring(e) .. "\n")
      failed = failed + 1
    end
  end
end
os.exit(failed == 0 and 0 or 1)
