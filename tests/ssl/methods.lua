-- The training check of netcl.ssl's eight methods on the real Fashion-MNIST (ctest ssl.methods,
-- label slow; minutes per method on a 2-core CPU): samples/simclr.lua pretrains with each method,
-- then probes the encoder and the same encoder at its random initialization. SimCLR's probe must
-- beat the random encoder's by 5 points; every other method's must beat it, with no collapse
-- (the per-dimension std of the L2-normalized embeddings above 0.5/sqrt(d)). Skipped (77) without
-- the dataset.
--   netcl-lua tests/ssl/methods.lua [method ...]     (default: all eight)
local data = require "netcl.data"

local dir = data.fashion_mnist_dir()
if not dir or not io.open(dir .. "/train-images-idx3-ubyte.gz", "rb") and not io.open(dir .. "/train-images-idx3-ubyte", "rb") then
  io.stderr:write("SKIP: Fashion-MNIST not found (Debian's dataset-fashion-mnist, or NETCL_FASHION_MNIST)\n")
  os.exit(77)
end

local i = -1
while arg[i - 1] do i = i - 1 end
local exe = arg[i]

local METHODS = {"simclr", "moco", "byol", "simsiam", "barlow", "vicreg", "swav", "dino"}
local chosen = #arg > 0 and {table.unpack(arg)} or METHODS

local failures = {}
for _, m in ipairs(chosen) do
  local cmd = string.format("%s samples/simclr.lua --method %s --quiet 2>&1", exe, m)
  local p = io.popen(cmd)
  local out = p:read("a")
  p:close()
  local probe, random, std, threshold = out:match("result: method=" .. m ..
    " probe=([%d.]+)%% random=([%d.]+)%% gain=[-+%d.]+ points std=([%d.]+) threshold=([%d.]+)")
  io.write(out:match("result:[^\n]*") or ("no result line from " .. cmd .. ":\n" .. out), "\n")
  io.flush()
  if not probe then
    failures[#failures + 1] = m .. ": the sample failed"
  else
    probe, random, std, threshold = tonumber(probe), tonumber(random), tonumber(std), tonumber(threshold)
    local need = m == "simclr" and 5 or 0
    if probe - random <= need then
      failures[#failures + 1] = string.format("%s: probe %.2f%% does not beat the random encoder's %.2f%% by more than %d points",
        m, probe, random, need)
    end
    if std <= threshold then
      failures[#failures + 1] = string.format("%s: embedding std %.4f <= %.4f: collapsed", m, std, threshold)
    end
  end
end
if #failures > 0 then
  io.stderr:write("FAILED:\n  ", table.concat(failures, "\n  "), "\n")
  os.exit(1)
end
print("all " .. #chosen .. " methods passed")
