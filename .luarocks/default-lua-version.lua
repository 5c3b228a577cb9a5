-- This checkout is a LuaRocks project for Lua 5.4: `luarocks make netcl-scm-1.rockspec` run here
-- uses Lua 5.4 even where LuaRocks defaults to another version (Debian's luarocks 3.8 picks 5.1
-- when lua5.1 is installed), and installs into ./lua_modules unless given --tree or --local.
-- LuaRocks reads this file only when both .luarocks/ and lua_modules/ exist (docs/install.md).
return "5.4"
