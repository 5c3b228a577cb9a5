-- Runs every benchmark in tests/bench (bench_*.lua, or the names given as arguments); each
-- prints one JSON object per line with its figures and the reference ratio of the same run.
-- --device SPEC (or NETCL_DEVICE=SPEC) runs them on that device ("cpu", "opencl", "opencl:1:0").
local dir = arg[0]:match("^(.*)/[^/]*$") or "."
local names, picked = {}, {}
local i = 1
while i <= #arg do
  local dev = arg[i]:match("^%-%-device=(.+)$")
  if arg[i] == "--device" then dev, i = arg[i + 1], i + 1 end
  if dev then
    local nc = require "netcl"
    nc.set_default_device(nc.device(dev))
  else
    picked[#picked + 1] = arg[i]
  end
  i = i + 1
end
if #picked > 0 then
  for _, a in ipairs(picked) do names[#names + 1] = dir .. "/bench_" .. a:gsub("^bench_", ""):gsub("%.lua$", "") .. ".lua" end
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
