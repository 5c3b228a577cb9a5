-- conv2d forward, input gradient and weight gradient at ResNet18's conv shapes, batch 32, on
-- every device (tests/bench/bench_conv.c, built as <build>/bench/bench_conv).
local build = (arg and arg[-1] or ""):match("^(.*)/bin/[^/]*$")
assert(build, "bench_conv: run through <build>/bin/netcl-lua, next to <build>/bench")
local ok = os.execute("NETCL_TUNE=1 '" .. build .. "/bench/bench_conv' --batch 32")
assert(ok, "bench_conv failed")
