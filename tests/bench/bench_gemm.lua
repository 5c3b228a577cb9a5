-- SGEMM at n = 256, 512, 1024, 2048 on every device, as ratios measured in the same run: the
-- CPU backend against OpenBLAS called directly, OpenCL against CLBlast (when libclblast-dev is
-- installed). The measuring is C (tests/bench/bench_gemm.c, built as <build>/bench/bench_gemm,
-- where it can call both references); this runs it with the GEMM tuner enabled, so OpenCL is
-- timed with the tile variant tuned for the device (tuned once, then cached on disk).
local build = (arg and arg[-1] or ""):match("^(.*)/bin/[^/]*$")
assert(build, "bench_gemm: run through <build>/bin/netcl-lua, next to <build>/bench")
local ok = os.execute("NETCL_TUNE=1 '" .. build .. "/bench/bench_gemm'")
assert(ok, "bench_gemm failed")
