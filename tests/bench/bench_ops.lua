-- Effective bandwidth of elementwise add and of a full sum at 16M floats on every device: the
-- CPU figure as a ratio against memcpy, OpenCL against the device's own copy kernel, measured
-- in the same run (tests/bench/bench_ops.c, built as <build>/bench/bench_ops).
local build = (arg and arg[-1] or ""):match("^(.*)/bin/[^/]*$")
assert(build, "bench_ops: run through <build>/bin/netcl-lua, next to <build>/bench")
assert(os.execute("'" .. build .. "/bench/bench_ops'"), "bench_ops failed")
