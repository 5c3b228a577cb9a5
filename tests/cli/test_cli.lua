-- netcl-lua's command line: options, the arg table, exit codes, and the REPL when stdin is
-- not a terminal (plain lines). Run by ctest as `netcl-lua test_cli.lua`, so arg[-1] is the
-- binary under test. The terminal REPL is covered by test_repl_pty.c.
local lu = require "luaunit"

local exe = assert(arg[-1], "run me as: netcl-lua test_cli.lua")
local tmp = os.tmpname()

local function q(s) return "'" .. s:gsub("'", "'\\''") .. "'" end

local function slurp(path)
  local f = assert(io.open(path, "rb"))
  local s = f:read("a")
  f:close()
  return s
end

local function spit(path, s)
  local f = assert(io.open(path, "wb"))
  f:write(s)
  f:close()
end

-- Runs `prefix exe args` with stdin_text on stdin; returns exit code, stdout, stderr.
local function run(args, stdin_text, prefix)
  spit(tmp .. ".in", stdin_text or "")
  local cmd = string.format("%s %s %s < %s > %s 2> %s", prefix or "", q(exe), args, q(tmp .. ".in"),
                            q(tmp .. ".out"), q(tmp .. ".err"))
  local _, how, code = os.execute(cmd)
  if how == "signal" then code = 128 + code end
  return code, slurp(tmp .. ".out"), slurp(tmp .. ".err")
end

local function has_opencl()
  local code, out = run("--list-devices")
  return code == 0 and out:find("opencl:%d+:%d+") ~= nil
end

TestOptions = {}

function TestOptions:test_version()
  local code, out = run("-v")
  lu.assertEquals(code, 0)
  lu.assertStrMatches(out, "netcl%-lua %d+%.%d+%.%d+ %(Lua 5%.4%.%d+%)\n")
end

function TestOptions:test_help()
  local code, out = run("--help")
  lu.assertEquals(code, 0)
  lu.assertStrContains(out, "usage:")
  lu.assertStrContains(out, "--list-devices")
end

function TestOptions:test_e_runs_in_order()
  local code, out = run("-e 'x = 1' -e 'x = x + 1' -e'print(x * 10)'")
  lu.assertEquals(code, 0)
  lu.assertEquals(out, "20\n")
end

function TestOptions:test_l_sets_a_global()
  local code, out = run("-l netcl -e 'print(type(netcl.ones))'")
  lu.assertEquals(code, 0)
  lu.assertEquals(out, "function\n")
  code, out = run("-l nc=netcl -e 'print(nc.version == require(\"netcl\").version, netcl)'")
  lu.assertEquals(code, 0)
  lu.assertEquals(out, "true\tnil\n")
end

function TestOptions:test_l_missing_module_fails()
  local code, _, err = run("-l no_such_module_xyz -e 'print(1)'")
  lu.assertEquals(code, 1)
  lu.assertStrContains(err, "module 'no_such_module_xyz' not found")
end

function TestOptions:test_bad_options()
  local code, _, err = run("-z")
  lu.assertEquals(code, 1)
  lu.assertStrContains(err, "unrecognized option '-z'")
  code, _, err = run("-e")
  lu.assertEquals(code, 1)
  lu.assertStrContains(err, "'-e' needs an argument")
  code, _, err = run("--device")
  lu.assertEquals(code, 1)
  lu.assertStrContains(err, "'--device' needs an argument")
end

function TestOptions:test_exit_codes()
  lu.assertEquals((run("-e 'os.exit(3)'")), 3)
  local code, _, err = run("-e 'error(\"kaput\")'")
  lu.assertEquals(code, 1)
  lu.assertStrContains(err, "kaput")
  lu.assertStrContains(err, "stack traceback:")
  code, _, err = run("-e 'x = = 1'")
  lu.assertEquals(code, 1)
  lu.assertStrContains(err, "unexpected symbol")
end

-- The arg table and the script's varargs, as lua5.4 builds them.
local ARGS_SCRIPT = [[
local parts = {}
for i = -3, #arg do parts[#parts + 1] = i .. "=" .. tostring(arg[i]) end
parts[#parts + 1] = "n=" .. select("#", ...)
parts[#parts + 1] = "va=" .. table.concat({...}, "|")
print(table.concat(parts, " "))
]]

function TestOptions:test_arg_table()
  local script = tmp .. "_args.lua"
  spit(script, ARGS_SCRIPT)
  local code, out = run("-e 'x=1' " .. q(script) .. " 'a b' -c")
  lu.assertEquals(code, 0)
  lu.assertEquals(out, string.format("-3=%s -2=-e -1=x=1 0=%s 1=a b 2=-c n=2 va=a b|-c\n", exe, script))
  -- the same, from lua5.4 itself where installed (the interpreter's own name differs)
  local lua = io.popen("command -v lua5.4"):read("l")
  if lua then
    local p = io.popen(string.format("%s -e 'x=1' %s 'a b' -c", q(lua), q(script)))
    local ref = p:read("a")
    p:close()
    lu.assertEquals(out:gsub("^%-3=%S+", ""), ref:gsub("^%-3=%S+", ""))
  end
  os.remove(script)
end

function TestOptions:test_arg_without_script()
  local code, out = run("-e 'print(arg[0], arg[1], arg[2], #arg)'")
  lu.assertEquals(code, 0)
  lu.assertEquals(out, exe .. "\t-e\tprint(arg[0], arg[1], arg[2], #arg)\t2\n")
end

function TestOptions:test_stdin_script()
  local code, out = run("- x y", "print(arg[0], ...)")
  lu.assertEquals(code, 0)
  lu.assertEquals(out, "-\tx\ty\n")
  -- after --, the next word is the script even when it looks like an option
  local script = tmp .. "_dd.lua"
  spit(script, "print('dd', ...)")
  code, out = run("-- " .. q(script) .. " -e")
  lu.assertEquals(code, 0)
  lu.assertEquals(out, "dd\t-e\n")
  os.remove(script)
end

-- With no script and no -e, stdin that is not a terminal runs as a script (as lua5.4 does).
function TestOptions:test_piped_stdin_is_a_script()
  local code, out = run("", "print('from' .. 'stdin')")
  lu.assertEquals(code, 0)
  lu.assertEquals(out, "fromstdin\n")
  local err
  code, _, err = run("", "=1")
  lu.assertEquals(code, 1)
  lu.assertStrContains(err, "unexpected symbol")
end

function TestOptions:test_device()
  local probe = "-e 'print(require(\"netcl\").default_device().kind)'"
  local code, out = run("--device cpu " .. probe)
  lu.assertEquals(code, 0)
  lu.assertEquals(out, "cpu\n")
  code, out = run("--device=cpu " .. probe, nil, "NETCL_DEVICE=opencl")
  lu.assertEquals(code, 0)
  lu.assertEquals(out, "cpu\n")
  local err
  code, _, err = run("--device nope -e 'print(1)'")
  lu.assertEquals(code, 1)
  lu.assertStrContains(err, "bad device spec 'nope'")
  code, _, err = run("--device opencl:7:7 -e 'print(1)'")
  lu.assertEquals(code, 1)
  lu.assertStrContains(err, "no OpenCL device opencl:7:7")
  if has_opencl() then
    code, out = run("--device opencl " .. probe, nil, "NETCL_DEVICE=cpu")
    lu.assertEquals(code, 0)
    lu.assertEquals(out, "opencl\n")
  end
end

function TestOptions:test_list_devices()
  local code, out = run("--device cpu --list-devices")
  lu.assertEquals(code, 0)
  lu.assertStrMatches(out, "%* cpu +cpu .*")
  lu.assertStrContains(out, "(* = default device)")
end

function TestOptions:test_warmup()
  local code, out = run("--device cpu --warmup")
  lu.assertEquals(code, 0)
  lu.assertStrMatches(out, "warmup: cpu %(.*%) runs compiled C: no kernels to build\n")
  -- then runs what follows, as usual
  code, out = run("--device cpu --warmup -e 'print(\"after\")'")
  lu.assertEquals(code, 0)
  lu.assertStrContains(out, "\nafter\n")
  if not has_opencl() then return end
  -- OpenCL: the first run compiles every program into an empty cache, the second loads them
  local cache = tmp .. "_cache"
  local stats = "-e 'local s = require(\"netcl\").memory_stats(); print(s.programs_built, s.programs_loaded)'"
  local env = "NETCL_CACHE_DIR=" .. q(cache)
  code, out = run("--device opencl --warmup " .. stats, nil, env)
  lu.assertEquals(code, 0)
  local secs, built, loaded = out:match("every kernel built and cached in (%d+%.%d+) s\n(%d+)\t(%d+)\n$")
  lu.assertNotNil(secs, out)
  lu.assertTrue(tonumber(built) > 0 and tonumber(loaded) == 0, out)
  code, out = run("--device opencl --warmup " .. stats, nil, env)
  lu.assertEquals(code, 0)
  built, loaded = out:match("(%d+)\t(%d+)\n$")
  lu.assertEquals(tonumber(built), 0, out)
  lu.assertTrue(tonumber(loaded) > 0, out)
  os.execute("rm -rf " .. q(cache))
end

-- SIGINT stops a running script with "interrupted!" (the signal is sent once the loop runs).
function TestOptions:test_sigint_stops_a_script()
  local ready = tmp .. "_ready"
  os.remove(ready)
  local script = string.format([[
%s -e 'io.open(%q, "w"):close() while true do end' 2> %s &
pid=$!
n=0
while [ ! -e %s ] && [ $n -lt 600 ]; do sleep 0.05; n=$((n + 1)); done
kill -INT $pid
wait $pid
exit $?]], q(exe), ready, q(tmp .. ".err"), q(ready))
  local _, _, code = os.execute(script)
  os.remove(ready)
  lu.assertEquals(code, 1)
  lu.assertStrContains(slurp(tmp .. ".err"), "interrupted!")
end

TestPipedRepl = {}

function TestPipedRepl:test_statements_expressions_and_errors()
  local code, out, err = run("-i", table.concat({
    "x = 20",
    "=x + 1",
    "x * 3",
    "function f(a)",
    "  return a * 2",
    "end",
    "f(4)",
    "error('oops')",
    "print('still ' .. 'here')",
    "nil",
    "local y = 5",
    "=nil, false",
  }, "\n") .. "\n")
  lu.assertEquals(code, 0)
  -- no prompts when stdin is not a terminal; the final newline is the REPL's exit
  lu.assertEquals(out, "21\n60\n8\nstill here\nnil\nnil\tfalse\n\n")
  lu.assertStrContains(err, "stdin:1: oops")
  lu.assertStrContains(err, "stack traceback:")
end

function TestPipedRepl:test_multiline_expression_prints()
  local code, out = run("-i", "=string.format('%d-%d',\n  3, 4)\nstring.rep('ab',\n 2)\n")
  lu.assertEquals(code, 0)
  lu.assertEquals(out, "3-4\nabab\n\n")
end

function TestPipedRepl:test_tensor_prints_like_tostring()
  local code, out = run("-i", "nc = require 'netcl'\nnc.ones({2, 2})\n=tostring(nc.ones({2, 2}))\n")
  lu.assertEquals(code, 0)
  lu.assertStrContains(out, "tensor([[1., 1.],")
  local first, second = out:match("^(tensor.-%))\n(tensor.-%))\n\n$")
  lu.assertEquals(first, second)
end

function TestPipedRepl:test_incomplete_chunk_at_eof()
  local code, out, err = run("-i", "function g(\n")
  lu.assertEquals(code, 0)
  lu.assertEquals(out, "\n")
  lu.assertStrContains(err, "<eof>")
end

function TestPipedRepl:test_print_errors_are_reported()
  local code, _, err = run("-i", "setmetatable({}, {__tostring = function() error('bad tostring') end})\n")
  lu.assertEquals(code, 0)
  lu.assertStrContains(err, "error calling 'print'")
  lu.assertStrContains(err, "bad tostring")
end

function TestPipedRepl:test_slow_statements_show_their_time()
  local code, out = run("-i", "local t = os.clock() while os.clock() - t < 0.25 do end\nx = 1\n")
  lu.assertEquals(code, 0)
  lu.assertStrMatches(out, "%(%d+%.%d%d s%)\n\n")
end

function TestPipedRepl:test_repl_after_script_sees_its_globals()
  local script = tmp .. "_g.lua"
  spit(script, "answer = 42")
  local code, out = run("-i " .. q(script), "=answer\n")
  lu.assertEquals(code, 0)
  lu.assertEquals(out, "42\n\n")
  os.remove(script)
end

local status = lu.LuaUnit.run()
for _, ext in ipairs({"", ".in", ".out", ".err"}) do os.remove(tmp .. ext) end
os.exit(status)
