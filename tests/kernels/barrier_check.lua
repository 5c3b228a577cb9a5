-- Barrier checker for kernels/*.cl (Lua 5.4; runs under lua5.4 or netcl-lua).
--
-- Every work-item of a work-group must reach each barrier (OpenCL C 1.2, 6.12.8); PoCL's
-- work-group compiler aborts on kernels where that is not evident, and also on loops whose trip
-- count differs between the items of a group in a kernel with barriers. The rules, for each
-- kernel and helper function (docs/architecture.md, "Writing kernels"):
--
--   (a) divergent-barrier: no barrier (or call of a function that reaches one) under an
--       if/for/while/switch/?:/&&/|| whose condition depends on a per-item value;
--   (b) barrier-after-return: no barrier after a `return` (or, in a loop, a `break`/`continue`)
--       that only some work-items take;
--   (c) per-item-loop: in a function with barriers, no loop whose trip count depends on a
--       per-item value (use NC_GROUP_FOR: a group-uniform trip count and a guarded body).
--
-- Per-item values: get_local_id, get_global_id (and the sub-group ids), anything computed or
-- loaded from them, and variables assigned under per-item control. Kernel arguments,
-- get_group_id, get_local_size, get_num_groups, get_global_size and constants are uniform. A
-- load is per-item only when its address is (all items read the same shared element alike).
--
-- How: a small C preprocessor expands each program as the runtime builds it (common.cl, then
-- the file; a file guarded by a macro that another kernel file defines, as conv.cl by gemm.cl's
-- NC_GEMM_MAIN, comes after that file), under several option sets (with and without NC_FP64,
-- NC_FAULT, REAL=double). A parser builds each function's statements and expressions with
-- scoped variables, and a taint analysis runs to a fixed point per function. Helper functions
-- get summaries (which parameters must be uniform for their barriers and loops, what their
-- result depends on), checked at each call.
--
-- Escape hatch: a comment `barrier-check: uniform -- <reason>` on the line of a condition marks
-- that condition group-uniform. A marker without a reason, or on a condition that is uniform
-- anyway, is an error.
--
-- Usage: barrier_check.lua [--selftest] [--quiet] [-v] [dir-or-file.cl ...]   (default: kernels;
--        -v lists the programs checked)
-- Exit status: 0 clean, 1 findings (or a failed self-test), 2 usage or parse error.

local M = {}

---------------------------------------------------------------------------------------------------
-- lexer
---------------------------------------------------------------------------------------------------

local PUNCTS = {"...", "<<=", ">>=", "->", "++", "--", "<<", ">>", "<=", ">=", "==", "!=", "&&", "||", "*=",
                "/=", "%=", "+=", "-=", "&=", "^=", "|=", "##"}

local MARKER = "barrier%-check:"

-- Tokens {t = "id"|"num"|"str"|"chr"|"punct"|"nl", v, file, line, ws}; ws: whitespace before.
-- markers[line] = reason (or false for a marker without a reason).
local function lex(src, file, markers)
  local toks, i, n, line, ws = {}, 1, #src, 1, true
  local function push(t, v, l) toks[#toks + 1] = {t = t, v = v, file = file, line = l or line, ws = ws}; ws = false end
  while i <= n do
    local c = src:sub(i, i)
    if c == "\\" and src:sub(i + 1, i + 1) == "\n" then
      i, line = i + 2, line + 1
    elseif c == "\\" and src:sub(i + 1, i + 2) == "\r\n" then
      i, line = i + 3, line + 1
    elseif c == "\n" then
      push("nl", "\n"); i, line, ws = i + 1, line + 1, true
    elseif c:match("%s") then
      i, ws = i + 1, true
    elseif src:sub(i, i + 1) == "/*" then
      local e = src:find("*/", i + 2, true) or n - 1
      local body = src:sub(i + 2, e - 1)
      if markers and body:find(MARKER) then
        local reason = body:match(MARKER .. "%s*uniform%s*%-%-%s*(.-)%s*$")
        markers[line] = (reason and reason:find("%S")) and reason or false
      end
      for _ in body:gmatch("\n") do line = line + 1 end
      i, ws = e + 2, true
    elseif src:sub(i, i + 1) == "//" then
      local e = src:find("\n", i, true) or n + 1
      local body = src:sub(i + 2, e - 1)
      if markers and body:find(MARKER) then
        local reason = body:match(MARKER .. "%s*uniform%s*%-%-%s*(.-)%s*$")
        markers[line] = (reason and reason:find("%S")) and reason or false
      end
      i, ws = e, true
    elseif c:match("[%a_]") then
      local s, e = src:find("^[%w_]+", i)
      push("id", src:sub(s, e)); i = e + 1
    elseif c:match("%d") or (c == "." and src:sub(i + 1, i + 1):match("%d")) then
      local j = i + 1
      while j <= n do
        local d = src:sub(j, j)
        if d:match("[eEpP]") and src:sub(j + 1, j + 1):match("[+-]") then j = j + 2
        elseif d:match("[%w_.]") then j = j + 1
        else break end
      end
      push("num", src:sub(i, j - 1)); i = j
    elseif c == '"' or c == "'" then
      local j = i + 1
      while j <= n and src:sub(j, j) ~= c do j = j + (src:sub(j, j) == "\\" and 2 or 1) end
      push(c == '"' and "str" or "chr", src:sub(i, j)); i = j + 1
    else
      local p = c
      for _, q in ipairs(PUNCTS) do
        if src:sub(i, i + #q - 1) == q then p = q; break end
      end
      push("punct", p); i = i + #p
    end
  end
  push("nl", "\n")
  return toks
end

local function is(tok, v) return tok and tok.t == "punct" and tok.v == v end

---------------------------------------------------------------------------------------------------
-- preprocessor
---------------------------------------------------------------------------------------------------

local function copy_tok(t, extra)
  local r = {}
  for k, v in pairs(t) do r[k] = v end
  for k, v in pairs(extra or {}) do r[k] = v end
  return r
end

local function hide_with(h, name)
  local r = {}
  for k in pairs(h or {}) do r[k] = true end
  if name then r[name] = true end
  return r
end

local expand

local function substitute(m, name, args, site, macros)
  local H = hide_with(site.hide, name)
  local chain = site.mac and (site.mac .. " > " .. name) or name
  local res = {}
  local body = m.body
  local function pidx(tok)
    if tok and tok.t == "id" and m.pindex then return m.pindex[tok.v] end
  end
  local i = 1
  while i <= #body do
    local b = body[i]
    if is(b, "#") and m.params and pidx(body[i + 1]) then
      local parts = {}
      for _, a in ipairs(args[pidx(body[i + 1])] or {}) do parts[#parts + 1] = a.v end
      res[#res + 1] = {t = "str", v = '"' .. table.concat(parts, " "):gsub('[\\"]', "\\%0") .. '"',
                       file = site.file, line = site.line, hide = H}
      i = i + 2
    elseif pidx(b) then
      local a = args[pidx(b)] or {}
      local adjacent = is(body[i - 1], "##") or is(body[i + 1], "##")
      local toks = adjacent and a or expand(a, macros)
      if #toks == 0 and adjacent then res[#res + 1] = {t = "pm", v = "", file = site.file, line = site.line} end
      for _, t in ipairs(toks) do res[#res + 1] = copy_tok(t, {hide = hide_with(t.hide, name)}) end
      i = i + 1
    else
      res[#res + 1] = copy_tok(b, {file = site.file, line = site.line, def_file = b.file, def_line = b.line,
                                   mac = chain, hide = H, paste = is(b, "##") or nil})
      i = i + 1
    end
  end
  -- token pasting
  local out = {}
  local k = 1
  while k <= #res do
    local t = res[k]
    if t.paste and #out > 0 and res[k + 1] then
      local l, r = table.remove(out), res[k + 1]
      local glued = lex(l.v .. r.v, l.file)
      local any = false
      for _, g in ipairs(glued) do
        if g.t ~= "nl" then
          out[#out + 1] = copy_tok(l, {t = g.t, v = g.v, paste = nil}); any = true
        end
      end
      if not any then out[#out + 1] = {t = "pm", v = "", file = l.file, line = l.line} end
      k = k + 2
    else
      out[#out + 1] = t; k = k + 1
    end
  end
  local final = {}
  for _, t in ipairs(out) do if t.t ~= "pm" then final[#final + 1] = t end end
  return final
end

expand = function(toks, macros)
  local out, stack = {}, {}
  for i = #toks, 1, -1 do stack[#stack + 1] = toks[i] end
  while #stack > 0 do
    local tok = table.remove(stack)
    local m = tok.t == "id" and macros[tok.v]
    if m and not (tok.hide and tok.hide[tok.v]) then
      if m.params then
        if is(stack[#stack], "(") then
          table.remove(stack)
          local args, cur, depth = {}, {}, 0
          while true do
            local a = table.remove(stack)
            if not a then error(("%s:%d: unterminated call of macro %s"):format(tok.file, tok.line, tok.v), 0) end
            if is(a, "(") then depth = depth + 1
            elseif is(a, ")") then
              if depth == 0 then break end
              depth = depth - 1
            end
            if depth == 0 and is(a, ",") and not (m.variadic and #args >= #m.params - 1) then
              args[#args + 1] = cur; cur = {}
            else
              cur[#cur + 1] = a
            end
          end
          args[#args + 1] = cur
          local body = substitute(m, tok.v, args, tok, macros)
          for i = #body, 1, -1 do stack[#stack + 1] = body[i] end
        else
          out[#out + 1] = tok
        end
      else
        local body = substitute(m, tok.v, {}, tok, macros)
        for i = #body, 1, -1 do stack[#stack + 1] = body[i] end
      end
    else
      out[#out + 1] = tok
    end
  end
  return out
end

-- #if expressions: integers, defined, ! ~ - +, binary operators, ?:, parentheses.
local function eval_if(toks, macros, where)
  local pre = {}
  local i = 1
  while i <= #toks do
    local t = toks[i]
    if t.t == "id" and t.v == "defined" then
      local name
      if is(toks[i + 1], "(") then name, i = toks[i + 2] and toks[i + 2].v, i + 4
      else name, i = toks[i + 1] and toks[i + 1].v, i + 2 end
      pre[#pre + 1] = {t = "num", v = macros[name] and "1" or "0"}
    else
      pre[#pre + 1] = t; i = i + 1
    end
  end
  local x = expand(pre, macros)
  local p = 1
  local function peek() return x[p] end
  local function num(t)
    if t.t == "num" then return math.tointeger(tonumber((t.v:gsub("[uUlL]+$", "")))) or 0 end
    return 0
  end
  local BIN = {["||"] = 1, ["&&"] = 2, ["|"] = 3, ["^"] = 4, ["&"] = 5, ["=="] = 6, ["!="] = 6, ["<"] = 7,
               [">"] = 7, ["<="] = 7, [">="] = 7, ["<<"] = 8, [">>"] = 8, ["+"] = 9, ["-"] = 9, ["*"] = 10,
               ["/"] = 10, ["%"] = 10}
  local cond
  local function unary()
    local t = x[p]
    if not t then error(where .. ": bad #if expression", 0) end
    p = p + 1
    if is(t, "(") then
      local v = cond()
      p = p + 1
      return v
    elseif is(t, "!") then return unary() == 0 and 1 or 0
    elseif is(t, "-") then return -unary()
    elseif is(t, "+") then return unary()
    elseif is(t, "~") then return ~unary()
    end
    return num(t)
  end
  local function binary(minp)
    local l = unary()
    while peek() and peek().t == "punct" and BIN[peek().v] and BIN[peek().v] >= minp do
      local op = peek().v
      p = p + 1
      local r = binary(BIN[op] + 1)
      if op == "||" then l = (l ~= 0 or r ~= 0) and 1 or 0
      elseif op == "&&" then l = (l ~= 0 and r ~= 0) and 1 or 0
      elseif op == "|" then l = l | r elseif op == "^" then l = l ~ r elseif op == "&" then l = l & r
      elseif op == "==" then l = l == r and 1 or 0 elseif op == "!=" then l = l ~= r and 1 or 0
      elseif op == "<" then l = l < r and 1 or 0 elseif op == ">" then l = l > r and 1 or 0
      elseif op == "<=" then l = l <= r and 1 or 0 elseif op == ">=" then l = l >= r and 1 or 0
      elseif op == "<<" then l = l << r elseif op == ">>" then l = l >> r
      elseif op == "+" then l = l + r elseif op == "-" then l = l - r elseif op == "*" then l = l * r
      elseif op == "/" then l = r ~= 0 and l // r or 0 elseif op == "%" then l = r ~= 0 and l % r or 0 end
    end
    return l
  end
  cond = function()
    local c = binary(1)
    if is(peek(), "?") then
      p = p + 1
      local a = cond()
      p = p + 1
      local b = cond()
      return c ~= 0 and a or b
    end
    return c
  end
  return cond() ~= 0
end

-- Preprocesses the concatenation of files (paths) under defines {NAME = "value"}: a flat token
-- list (no newlines), _Pragma(...) removed.
local function preprocess(files, defines, sources, markers)
  local macros = {}
  for k, v in pairs(defines) do
    macros[k] = {body = (function()
      local t = lex(v, "<command line>")
      t[#t] = nil
      return t
    end)()}
  end
  local out = {}
  for _, path in ipairs(files) do
    local toks = lex(sources[path], path, markers[path])
    local conds = {} -- {active, taken, outer}
    local function active() return #conds == 0 or conds[#conds].active end
    local pending = {}
    local function flush()
      if #pending > 0 then
        for _, t in ipairs(expand(pending, macros)) do out[#out + 1] = t end
        pending = {}
      end
    end
    local i = 1
    while i <= #toks do
      local lstart = i
      while toks[i].t ~= "nl" do i = i + 1 end
      local line = table.move(toks, lstart, i - 1, 1, {})
      i = i + 1
      if is(line[1], "#") then
        flush()
        local d = line[2] and line[2].v or ""
        local where = ("%s:%d"):format(path, line[1].line)
        if d == "ifdef" or d == "ifndef" then
          local on = (macros[line[3].v] ~= nil) == (d == "ifdef")
          conds[#conds + 1] = {outer = active(), active = active() and on, taken = on}
        elseif d == "if" then
          local on = active() and eval_if(table.move(line, 3, #line, 1, {}), macros, where)
          conds[#conds + 1] = {outer = active(), active = on, taken = on}
        elseif d == "elif" then
          local c = conds[#conds]
          local on = c.outer and not c.taken and eval_if(table.move(line, 3, #line, 1, {}), macros, where)
          c.active, c.taken = on, c.taken or on
        elseif d == "else" then
          local c = conds[#conds]
          c.active, c.taken = c.outer and not c.taken, true
        elseif d == "endif" then
          conds[#conds] = nil
        elseif active() and d == "define" then
          local name = line[3].v
          local m = {body = {}}
          local j = 4
          if is(line[4], "(") and not line[4].ws then
            m.params, m.pindex = {}, {}
            j = 5
            while not is(line[j], ")") do
              if line[j].t == "id" then
                m.params[#m.params + 1] = line[j].v; m.pindex[line[j].v] = #m.params
              elseif is(line[j], "...") then
                m.params[#m.params + 1] = "__VA_ARGS__"; m.pindex.__VA_ARGS__ = #m.params; m.variadic = true
              end
              j = j + 1
            end
            j = j + 1
          end
          m.body = table.move(line, j, #line, 1, {})
          macros[name] = m
        elseif active() and d == "undef" then
          macros[line[3].v] = nil
        end
      elseif active() then
        table.move(line, 1, #line, #pending + 1, pending)
      end
    end
    flush()
  end
  -- drop _Pragma("...")
  local clean = {}
  local k = 1
  while k <= #out do
    if out[k].t == "id" and out[k].v == "_Pragma" and is(out[k + 1], "(") then
      k = k + 4
    else
      clean[#clean + 1] = out[k]; k = k + 1
    end
  end
  return clean
end

---------------------------------------------------------------------------------------------------
-- parser
---------------------------------------------------------------------------------------------------

local BASE_TYPES = {}
for w in ([[void char uchar short ushort int uint long ulong float double half bool size_t ptrdiff_t intptr_t
  uintptr_t unsigned signed event_t image2d_t image3d_t sampler_t]]):gmatch("%S+") do BASE_TYPES[w] = true end
local QUALS = {}
for w in ([[const volatile restrict __global global __local local __private private __constant constant
  __read_only __write_only read_only write_only inline static extern __kernel kernel register]]):gmatch("%S+") do
  QUALS[w] = true
end
local SPACES = {__global = "global", global = "global", __local = "local", ["local"] = "local",
                __constant = "constant", constant = "constant"}

local function vector_type(v)
  local b, n = v:match("^(%a+)(%d+)$")
  return b and BASE_TYPES[b] and ({["2"] = 1, ["3"] = 1, ["4"] = 1, ["8"] = 1, ["16"] = 1})[n] ~= nil
end

local Parser = {}
Parser.__index = Parser

local function new_parser(toks)
  return setmetatable({toks = toks, pos = 1, typedefs = {}, scopes = {}, functions = {}, fnlist = {}}, Parser)
end

function Parser:peek(k) return self.toks[self.pos + (k or 0)] end
function Parser:next() local t = self.toks[self.pos]; self.pos = self.pos + 1; return t end
function Parser:fail(msg, tok)
  tok = tok or self:peek() or self.toks[#self.toks]
  error(("%s:%d: barrier_check cannot parse this: %s (near '%s')"):format(tok.file, tok.line, msg, tok.v), 0)
end
function Parser:expect(v)
  local t = self:next()
  if not is(t, v) then self:fail("expected '" .. v .. "'", t) end
  return t
end
function Parser:accept(v)
  if is(self:peek(), v) then return self:next() end
end

function Parser:is_type_tok(t)
  if not t or t.t ~= "id" then return false end
  local v = t.v
  return BASE_TYPES[v] or QUALS[v] or self.typedefs[v] or vector_type(v) or v == "struct" or v == "union" or
             v == "enum" or v == "__attribute__"
end

function Parser:skip_group() -- at "(" or "{" or "[": skips to its match
  local open = self:next().v
  local close = ({["("] = ")", ["{"] = "}", ["["] = "]"})[open]
  local depth = 1
  while depth > 0 do
    local t = self:next()
    if not t then self:fail("unbalanced " .. open) end
    if is(t, open) then depth = depth + 1 elseif is(t, close) then depth = depth - 1 end
  end
end

-- scopes
function Parser:push_scope() self.scopes[#self.scopes + 1] = {} end
function Parser:pop_scope() self.scopes[#self.scopes] = nil end
function Parser:declare(var) self.scopes[#self.scopes][var.name] = var end
function Parser:lookup(name)
  for i = #self.scopes, 1, -1 do
    local v = self.scopes[i][name]
    if v then return v end
  end
end

-- declaration specifiers: returns {space = "local"|..., ptr = false}
function Parser:specifiers()
  local spec = {}
  while self:is_type_tok(self:peek()) do
    local t = self:next()
    if t.v == "__attribute__" then
      self:skip_group()
    elseif t.v == "struct" or t.v == "union" or t.v == "enum" then
      if self:peek().t == "id" then self:next() end
      if is(self:peek(), "{") then self:skip_group() end
    else
      if SPACES[t.v] then spec.space = SPACES[t.v] end
    end
  end
  return spec
end

-- expressions ----------------------------------------------------------------------------------

local BINPREC = {["||"] = 1, ["&&"] = 2, ["|"] = 3, ["^"] = 4, ["&"] = 5, ["=="] = 6, ["!="] = 6, ["<"] = 7,
                 [">"] = 7, ["<="] = 7, [">="] = 7, ["<<"] = 8, [">>"] = 8, ["+"] = 9, ["-"] = 9, ["*"] = 10,
                 ["/"] = 10, ["%"] = 10}
local ASSIGN = {["="] = true, ["+="] = true, ["-="] = true, ["*="] = true, ["/="] = true, ["%="] = true,
                ["<<="] = true, [">>="] = true, ["&="] = true, ["^="] = true, ["|="] = true}

function Parser:expr()
  local e = self:assign()
  while is(self:peek(), ",") do
    local t = self:next()
    e = {k = "comma", a = e, b = self:assign(), tok = t}
  end
  return e
end

function Parser:assign()
  local l = self:cond()
  local t = self:peek()
  if t and t.t == "punct" and ASSIGN[t.v] then
    self:next()
    return {k = "assign", op = t.v, a = l, b = self:assign(), tok = t}
  end
  return l
end

function Parser:cond()
  local c = self:binary(1)
  if is(self:peek(), "?") then
    local t = self:next()
    local a = self:expr()
    self:expect(":")
    local b = self:assign()
    return {k = "cond", c = c, a = a, b = b, tok = t}
  end
  return c
end

function Parser:binary(minp)
  local l = self:unary()
  while true do
    local t = self:peek()
    local p = t and t.t == "punct" and BINPREC[t.v]
    if not p or p < minp then return l end
    self:next()
    l = {k = "bin", op = t.v, a = l, b = self:binary(p + 1), tok = t}
  end
end

function Parser:type_name() -- inside "( ... )" of a cast or sizeof: skip to the ")"
  local depth = 0
  while true do
    local t = self:peek()
    if not t then self:fail("unterminated type name") end
    if is(t, "(") then depth = depth + 1 elseif is(t, ")") then
      if depth == 0 then return end
      depth = depth - 1
    end
    self:next()
  end
end

function Parser:unary()
  local t = self:peek()
  if t.t == "punct" and (t.v == "++" or t.v == "--") then
    self:next()
    return {k = "pre", op = t.v, a = self:unary(), tok = t}
  elseif t.t == "punct" and (t.v == "&" or t.v == "*" or t.v == "+" or t.v == "-" or t.v == "~" or t.v == "!") then
    self:next()
    return {k = "un", op = t.v, a = self:unary(), tok = t}
  elseif t.t == "id" and t.v == "sizeof" then
    self:next()
    if is(self:peek(), "(") and self:is_type_tok(self:peek(1)) then
      self:next(); self:type_name(); self:expect(")")
      return {k = "lit", tok = t}
    end
    return {k = "un", op = "sizeof", a = self:unary(), tok = t}
  elseif is(t, "(") and self:is_type_tok(self:peek(1)) then
    self:next(); self:type_name(); self:expect(")")
    if is(self:peek(), "{") then return {k = "cast", a = self:init_list(), tok = t} end
    return {k = "cast", a = self:unary(), tok = t}
  end
  return self:postfix()
end

function Parser:init_list()
  local t = self:expect("{")
  local items = {}
  while not is(self:peek(), "}") do
    if is(self:peek(), ".") or is(self:peek(), "[") then -- designators
      while is(self:peek(), ".") or is(self:peek(), "[") do
        if is(self:peek(), ".") then self:next(); self:next() else self:skip_group() end
      end
      self:expect("=")
    end
    items[#items + 1] = is(self:peek(), "{") and self:init_list() or self:assign()
    if not self:accept(",") then break end
  end
  self:expect("}")
  return {k = "init", items = items, tok = t}
end

function Parser:postfix()
  local e = self:primary()
  while true do
    local t = self:peek()
    if is(t, "[") then
      self:next()
      e = {k = "index", a = e, i = self:expr(), tok = t}
      self:expect("]")
    elseif is(t, "(") then
      self:next()
      local args = {}
      if not is(self:peek(), ")") then
        repeat args[#args + 1] = self:assign() until not self:accept(",")
      end
      self:expect(")")
      e = {k = "call", fn = e, args = args, tok = t}
    elseif is(t, ".") or is(t, "->") then
      self:next()
      local f = self:next()
      e = {k = "member", a = e, name = f.v, tok = t}
    elseif is(t, "++") or is(t, "--") then
      self:next()
      e = {k = "post", op = t.v, a = e, tok = t}
    else
      return e
    end
  end
end

function Parser:primary()
  local t = self:next()
  if not t then self:fail("unexpected end") end
  if t.t == "id" then return {k = "id", name = t.v, var = self:lookup(t.v), tok = t} end
  if t.t == "num" or t.t == "str" or t.t == "chr" then return {k = "lit", tok = t} end
  if is(t, "(") then
    local e = self:expr()
    self:expect(")")
    return e
  end
  self:fail("unexpected token", t)
end

-- statements -----------------------------------------------------------------------------------

function Parser:declaration()
  local first = self:peek()
  local spec = self:specifiers()
  local items = {}
  if is(self:peek(), ";") then return {k = "decl", items = items, tok = first} end
  repeat
    local ptr = false
    while is(self:peek(), "*") or (self:peek().t == "id" and QUALS[self:peek().v]) do
      if is(self:next(), "*") then ptr = true end
    end
    local nt = self:next()
    if nt.t ~= "id" then self:fail("expected a declarator", nt) end
    local arr = false
    while is(self:peek(), "[") do self:skip_group(); arr = true end
    -- an attribute after the declarator (aligned(16) on a local array)
    while self:peek() and self:peek().t == "id" and self:peek().v == "__attribute__" do
      self:next()
      self:skip_group()
    end
    local var = {name = nt.v, tok = nt, taint = {}, memory = ptr or spec.space ~= nil, array = arr}
    local init
    if self:accept("=") then init = is(self:peek(), "{") and self:init_list() or self:assign() end
    self:declare(var)
    items[#items + 1] = {var = var, init = init}
  until not self:accept(",")
  return {k = "decl", items = items, tok = first}
end

function Parser:statement()
  local t = self:peek()
  if not t then self:fail("unexpected end of function") end
  if is(t, "{") then
    self:next()
    self:push_scope()
    local body = {}
    while not is(self:peek(), "}") do body[#body + 1] = self:statement() end
    self:next()
    self:pop_scope()
    return {k = "block", body = body, tok = t}
  elseif is(t, ";") then
    self:next()
    return {k = "empty", tok = t}
  elseif t.t == "id" then
    local v = t.v
    if v == "if" then
      self:next(); self:expect("(")
      local c = self:expr()
      self:expect(")")
      local th = self:statement()
      local el
      if self:peek() and self:peek().t == "id" and self:peek().v == "else" then
        self:next(); el = self:statement()
      end
      return {k = "if", cond = c, th = th, el = el, tok = t}
    elseif v == "for" then
      self:next(); self:expect("(")
      self:push_scope()
      local init, c, step
      if not is(self:peek(), ";") then
        if self:is_type_tok(self:peek()) then init = self:declaration() else init = {k = "expr", e = self:expr()} end
      end
      self:expect(";")
      if not is(self:peek(), ";") then c = self:expr() end
      self:expect(";")
      if not is(self:peek(), ")") then step = self:expr() end
      self:expect(")")
      local body = self:statement()
      self:pop_scope()
      return {k = "loop", kind = "for", init = init, cond = c, step = step, body = body, tok = t, exit = {}}
    elseif v == "while" then
      self:next(); self:expect("(")
      local c = self:expr()
      self:expect(")")
      return {k = "loop", kind = "while", cond = c, body = self:statement(), tok = t, exit = {}}
    elseif v == "do" then
      self:next()
      local body = self:statement()
      local w = self:next()
      if not (w and w.v == "while") then self:fail("expected while", w) end
      self:expect("(")
      local c = self:expr()
      self:expect(")"); self:expect(";")
      return {k = "loop", kind = "do", cond = c, body = body, tok = t, exit = {}}
    elseif v == "switch" then
      self:next(); self:expect("(")
      local c = self:expr()
      self:expect(")")
      return {k = "switch", cond = c, body = self:statement(), tok = t}
    elseif v == "case" then
      self:next()
      self:cond()
      self:expect(":")
      return {k = "empty", tok = t}
    elseif v == "default" then
      self:next(); self:expect(":")
      return {k = "empty", tok = t}
    elseif v == "break" or v == "continue" then
      self:next(); self:expect(";")
      return {k = v, tok = t}
    elseif v == "return" then
      self:next()
      local e
      if not is(self:peek(), ";") then e = self:expr() end
      self:expect(";")
      return {k = "return", e = e, tok = t}
    elseif v == "goto" then
      self:fail("goto is not supported", t)
    elseif v == "__asm__" then
      -- inline PTX (kernels/mma.cl, gemm_mma.cl): opaque, its operands unread and its outputs
      -- not tracked (none of them decides a branch or a loop there)
      self:next()
      if self:peek() and self:peek().v == "volatile" then self:next() end
      self:expect("(")
      local depth = 1
      while depth > 0 do
        local x = self:next()
        if not x then self:fail("unterminated __asm__", t) end
        if is(x, "(") then depth = depth + 1 elseif is(x, ")") then depth = depth - 1 end
      end
      self:expect(";")
      return {k = "expr", e = {k = "lit", tok = t}, tok = t}
    elseif self:is_type_tok(t) then
      local d = self:declaration()
      self:expect(";")
      return d
    end
  end
  local e = self:expr()
  self:expect(";")
  return {k = "expr", e = e, tok = t}
end

-- top level ------------------------------------------------------------------------------------

function Parser:parse_params(a, b) -- token indexes of the parameter list, exclusive of parens
  local params, cur, depth = {}, {}, 0
  for i = a, b do
    local t = self.toks[i]
    if is(t, "(") or is(t, "[") then depth = depth + 1 elseif is(t, ")") or is(t, "]") then depth = depth - 1 end
    if depth == 0 and is(t, ",") then params[#params + 1] = cur; cur = {} else cur[#cur + 1] = t end
  end
  if #cur > 0 then params[#params + 1] = cur end
  local out = {}
  for _, p in ipairs(params) do
    local name, ptr, space, arr
    for _, t in ipairs(p) do
      if is(t, "*") then ptr = true elseif is(t, "[") then arr = true end
      if t.t == "id" then
        if SPACES[t.v] then space = SPACES[t.v] end
        if not (QUALS[t.v] or BASE_TYPES[t.v] or self.typedefs[t.v] or vector_type(t.v) or t.v == "struct") then
          name = t
        end
      end
    end
    if name then
      out[#out + 1] = {name = name.v, tok = name, taint = {}, memory = ptr or arr or space ~= nil, param = #out + 1}
    end
  end
  return out
end

function Parser:parse_unit()
  while self.pos <= #self.toks do
    local start = self.pos
    local depth = 0
    while true do
      local t = self:peek()
      if not t then return end
      if is(t, "(") or is(t, "[") then depth = depth + 1
      elseif is(t, ")") or is(t, "]") then depth = depth - 1 end
      if depth == 0 and is(t, ";") then
        -- a declaration: remember typedef names
        if self.toks[start].v == "typedef" then
          local name
          local d = 0
          for i = start, self.pos - 1 do
            local u = self.toks[i]
            if is(u, "{") or is(u, "(") or is(u, "[") then d = d + 1
            elseif is(u, "}") or is(u, ")") or is(u, "]") then d = d - 1
            elseif d == 0 and u.t == "id" then name = u.v end
          end
          if name then self.typedefs[name] = true end
        end
        self:next()
        break
      elseif depth == 0 and is(t, "{") then
        local prev = self.toks[self.pos - 1]
        if is(prev, ")") and self.pos - 1 > start then
          -- a function definition: the last parenthesized group before "{" holds the parameters
          local close = self.pos - 1
          local d, open = 0, nil
          for i = close, start, -1 do
            local u = self.toks[i]
            if is(u, ")") then d = d + 1 elseif is(u, "(") then
              d = d - 1
              if d == 0 then open = i; break end
            end
          end
          local name = self.toks[open - 1]
          local kernel = false
          for i = start, open - 1 do
            if self.toks[i].v == "__kernel" or self.toks[i].v == "kernel" then kernel = true end
          end
          local params = self:parse_params(open + 1, close - 1)
          self:push_scope()
          for _, p in ipairs(params) do self:declare(p) end
          local body = self:statement()
          self:pop_scope()
          local f = {name = name.v, tok = name, kernel = kernel, params = params, body = body}
          self.functions[f.name] = f
          self.fnlist[#self.fnlist + 1] = f
          break
        else
          self:skip_group() -- struct, union, enum or initializer body; the declaration goes on
        end
      else
        self:next()
      end
    end
  end
end

---------------------------------------------------------------------------------------------------
-- analysis
---------------------------------------------------------------------------------------------------

local function union(...)
  local r = {}
  for i = 1, select("#", ...) do
    for k in pairs(select(i, ...) or {}) do r[k] = true end
  end
  return r
end

local function add_into(dst, src) -- true if dst grew
  local grew = false
  for k in pairs(src) do
    if not dst[k] then dst[k] = true; grew = true end
  end
  return grew
end

local PER_ITEM = {get_local_id = true, get_global_id = true, get_sub_group_local_id = true,
                  get_local_linear_id = true, get_global_linear_id = true, get_sub_group_id = true}
local UNIFORM = {get_group_id = true, get_local_size = true, get_num_groups = true, get_global_size = true,
                 get_work_dim = true, get_global_offset = true, get_enqueued_local_size = true}

local function is_barrier_builtin(name)
  return name == "barrier" or name == "work_group_barrier" or name == "sub_group_barrier" or
             name:match("^work_group_") ~= nil or name:match("^sub_group_[a-z_]*reduce") ~= nil or
             name:match("^sub_group_[a-z_]*scan") ~= nil or name == "sub_group_broadcast" or
             name == "sub_group_all" or name == "sub_group_any" or name:match("^async_work_group") ~= nil or
             name == "wait_group_events"
end

local function loc(tok)
  if tok.def_file and tok.mac then
    return ("%s:%d"):format(tok.def_file, tok.def_line), ("macro %s, expanded at %s:%d"):format(tok.mac, tok.file, tok.line)
  end
  return ("%s:%d"):format(tok.file, tok.line), nil
end

-- A short location for the reasons inside a message: file name and line.
local function where(tok)
  local a, b = loc(tok)
  a = a:gsub("^.*/", "")
  return b and (a .. " (" .. b:gsub("expanded at .*/", "expanded at ") .. ")") or a
end

-- Source text of an expression (expanded tokens), shortened.
local function text_of(e)
  local parts = {}
  local function walk(n)
    if not n then return end
    local k = n.k
    if k == "id" then parts[#parts + 1] = n.name
    elseif k == "lit" then parts[#parts + 1] = n.tok.v
    elseif k == "bin" or k == "assign" then walk(n.a); parts[#parts + 1] = n.op; walk(n.b)
    elseif k == "comma" then walk(n.a); parts[#parts + 1] = ","; walk(n.b)
    elseif k == "cond" then walk(n.c); parts[#parts + 1] = "?"; walk(n.a); parts[#parts + 1] = ":"; walk(n.b)
    elseif k == "un" or k == "pre" then parts[#parts + 1] = n.op; walk(n.a)
    elseif k == "post" then walk(n.a); parts[#parts + 1] = n.op
    elseif k == "cast" then parts[#parts + 1] = "(cast)"; walk(n.a)
    elseif k == "index" then walk(n.a); parts[#parts + 1] = "["; walk(n.i); parts[#parts + 1] = "]"
    elseif k == "member" then walk(n.a); parts[#parts + 1] = n.tok.v .. n.name
    elseif k == "call" then
      walk(n.fn); parts[#parts] = parts[#parts] .. "("
      for i, a in ipairs(n.args) do
        if i > 1 then parts[#parts + 1] = "," end
        walk(a)
      end
      parts[#parts + 1] = ")"
    elseif k == "init" then parts[#parts + 1] = "{...}" end
  end
  walk(e)
  local s = table.concat(parts, " "):gsub(" ([%]%),])", "%1"):gsub("([%[%(]) ", "%1")
  if #s > 70 then s = s:sub(1, 67) .. "..." end
  return s
end

-- Per-item variables named in an expression.
local function item_vars(e, acc)
  acc = acc or {}
  if type(e) ~= "table" then return acc end
  if e.k == "id" and e.var and e.var.taint.item then acc[e.name] = true end
  if e.k == "call" and e.fn.k == "id" and PER_ITEM[e.fn.name] then acc[e.fn.name .. "()"] = true end
  for key, v in pairs(e) do
    if key ~= "var" and key ~= "tok" and type(v) == "table" then
      if v.k then item_vars(v, acc) elseif key == "args" or key == "items" then
        for _, a in ipairs(v) do item_vars(a, acc) end
      end
    end
  end
  return acc
end

local function sorted_keys(t)
  local r = {}
  for k in pairs(t) do r[#r + 1] = k end
  table.sort(r)
  return r
end

-- Does the function (syntactically) reach a barrier?
local function find_calls(node, fn)
  if type(node) ~= "table" then return end
  if node.k == "call" and node.fn.k == "id" then fn(node.fn.name) end
  for key, v in pairs(node) do
    if key ~= "var" and key ~= "tok" and key ~= "exit" and type(v) == "table" then find_calls(v, fn) end
  end
end

-- report(rule, tok, message); markers: file -> line -> reason; used: marker keys consulted
local function analyze_unit(p, report, markers, marker_use)
  for _, f in ipairs(p.fnlist) do
    -- does f synchronize?
    f.sync = false
    find_calls(f.body, function(name)
      if is_barrier_builtin(name) or (p.functions[name] and p.functions[name] ~= f and p.functions[name].sync) then
        f.sync = true
      end
    end)
    local summary = {ret = {}, sync_points = {}, loop_points = {}}
    f.summary = summary
    for _, prm in ipairs(f.params) do
      prm.taint = f.kernel and {} or {["p" .. prm.param] = true}
    end
    local final = false
    local changed
    local reasons, after_return, loops

    local function marked_uniform(tok, taint)
      if not next(taint) then return false end
      for _, pos in ipairs({{tok.def_file, tok.def_line}, {tok.file, tok.line}}) do
        local m = pos[1] and markers[pos[1]] and markers[pos[1]][pos[2]]
        if m then
          local key = pos[1] .. ":" .. pos[2]
          if taint.item then marker_use[key] = true end
          return true
        end
      end
      return false
    end

    local function control()
      local c = union(after_return.taint)
      for _, r in ipairs(reasons) do add_into(c, r.taint) end
      return c
    end

    local function grow(dst, src)
      if add_into(dst, src) then changed = true end
    end

    local function describe(rs)
      local out, seen = {}, {}
      for _, r in ipairs(rs) do
        if r.taint.item and not seen[r.desc] then out[#out + 1] = r.desc; seen[r.desc] = true end
      end
      return out
    end

    local function barrier_event(tok, what, extra)
      -- extra: {taint, desc} from a callee's parameter-dependent barrier
      local c = control()
      if extra then add_into(c, extra.taint) end
      summary.sync_points[#summary.sync_points + 1] = {taint = c, tok = tok}
      if final and c.item then
        local why = describe(reasons)
        local rule = "divergent-barrier"
        if #why == 0 and extra and extra.taint.item then why[1] = extra.desc end
        if #why == 0 then
          rule = "barrier-after-return"
          why = describe(after_return.reasons)
          for _, l in ipairs(loops) do
            for _, d in ipairs(describe(l.node.exit_reasons or {})) do why[#why + 1] = d end
          end
        end
        report(rule, tok, ("%s in %s '%s' is not reached by every work-item of the group: %s"):format(
          what, f.kernel and "kernel" or "function", f.name, table.concat(why, "; ")))
      end
    end

    local function loop_event(tok, trip, what, desc)
      summary.loop_points[#summary.loop_points + 1] = {taint = trip, tok = tok, desc = desc}
      if final and f.sync and trip.item then
        report("per-item-loop", tok, ("%s in %s '%s', which has barriers, has a trip count that differs between the work-items of a group: %s (use NC_GROUP_FOR: a group-uniform trip count, the body guarded)"):format(
          what, f.kernel and "kernel" or "function", f.name, desc))
      end
    end

    local ev, walk

    local function base_var(e) -- the variable an lvalue writes, and whether it is a store to memory
      if e.k == "id" then return e.var, false end
      if e.k == "index" or e.k == "member" then
        local v, store = base_var(e.a)
        if v and v.memory and e.k == "index" then return v, true end
        if e.k == "member" and e.tok.v == "->" then return v, true end
        return v, store
      end
      if e.k == "un" and e.op == "*" then
        local v = base_var(e.a)
        return v, true
      end
      if e.k == "cast" then return base_var(e.a) end
      return nil, true
    end

    local function write(lhs, t)
      local v, store = base_var(lhs)
      if v and not store then
        local idx = {}
        local n = lhs
        while n.k == "index" or n.k == "member" do
          if n.k == "index" then add_into(idx, ev(n.i)) end
          n = n.a
        end
        grow(v.taint, union(t, idx, control()))
      elseif store then
        -- evaluate the address for its side effects
        local n = lhs
        while n.k == "index" or n.k == "member" or n.k == "un" or n.k == "cast" do
          if n.k == "index" then ev(n.i) end
          n = n.a
        end
      end
    end

    local function subst(taint, argt)
      local r = {}
      for k in pairs(taint) do
        if k == "item" then r.item = true
        else
          local i = tonumber(k:sub(2))
          add_into(r, argt[i] or {})
        end
      end
      return r
    end

    local function with_reason(r, fn)
      reasons[#reasons + 1] = r
      local res = fn()
      reasons[#reasons] = nil
      return res
    end

    local function cond_reason(kind, e, tok)
      local t = ev(e)
      if marked_uniform(e.tok or tok, t) then t = {} end
      local vars = sorted_keys(item_vars(e))
      local w = where(tok)
      return {taint = t, desc = ("`%s (%s)` at %s depends on per-item value%s %s"):format(kind, text_of(e), w,
                                 #vars == 1 and "" or "s", #vars > 0 and table.concat(vars, ", ") or "(via assignments)")}
    end

    ev = function(e)
      if not e then return {} end
      local k = e.k
      if k == "id" then return e.var and union(e.var.taint) or {}
      elseif k == "lit" then return {}
      elseif k == "init" then
        local r = {}
        for _, it in ipairs(e.items) do add_into(r, ev(it)) end
        return r
      elseif k == "un" then
        return ev(e.a)
      elseif k == "pre" or k == "post" then
        local t = ev(e.a)
        write(e.a, t)
        return t
      elseif k == "cast" or k == "member" then return ev(e.a)
      elseif k == "index" then return union(ev(e.a), ev(e.i))
      elseif k == "comma" then ev(e.a); return ev(e.b)
      elseif k == "bin" then
        local a = ev(e.a)
        if e.op == "&&" or e.op == "||" then
          local r = {taint = a, desc = ("`%s` at %s depends on per-item values %s"):format(e.op, where(e.tok),
                    table.concat(sorted_keys(item_vars(e.a)), ", "))}
          return union(a, with_reason(r, function() return ev(e.b) end))
        end
        return union(a, ev(e.b))
      elseif k == "cond" then
        local c = ev(e.c)
        local r = {taint = c, desc = ("`?:` at %s depends on per-item values %s"):format(where(e.tok),
                   table.concat(sorted_keys(item_vars(e.c)), ", "))}
        return union(c, with_reason(r, function() return union(ev(e.a), ev(e.b)) end))
      elseif k == "assign" then
        local t = ev(e.b)
        if e.op ~= "=" then t = union(t, ev(e.a)) end
        write(e.a, t)
        return t
      elseif k == "call" then
        local argt = {}
        for i, a in ipairs(e.args) do argt[i] = ev(a) end
        local name = e.fn.k == "id" and e.fn.name
        if not name then return union(ev(e.fn), table.unpack(argt)) end
        if PER_ITEM[name] then return {item = true} end
        if UNIFORM[name] then return {} end
        if is_barrier_builtin(name) then
          barrier_event(e.fn.tok, name .. "()")
          return {}
        end
        local g = p.functions[name]
        if g and g.summary then
          local gs = g.summary
          if g.sync then
            local extra = {taint = {}, desc = nil}
            local descs = {}
            for _, sp in ipairs(gs.sync_points) do
              local only_params = union(sp.taint)
              only_params.item = nil
              local s = subst(only_params, argt)
              if s.item then descs[#descs + 1] = ("its barrier at %s depends on an argument that is per-item here"):format(where(sp.tok)) end
              add_into(extra.taint, s)
            end
            extra.desc = ("the call passes per-item values to '%s' (%s)"):format(name, table.concat(descs, "; "))
            barrier_event(e.fn.tok, ("call of '%s' (which has barriers)"):format(name), extra)
          end
          for _, lp in ipairs(gs.loop_points) do
            local t = union(lp.taint)
            if g.sync then t.item = nil end -- reported in g itself
            local s = subst(t, argt)
            if next(s) then
              loop_event(e.fn.tok, s, ("the loop at %s in '%s', called here,"):format(where(lp.tok), name),
                         lp.taint.item and lp.desc or "its bound comes from a per-item argument")
            end
          end
          return subst(gs.ret, argt)
        end
        -- builtins: the result depends on the arguments; vstoreN writes its third argument
        if name:match("^vstore") and e.args[3] then
          local a = e.args[3]
          if a.k == "un" and a.op == "&" then a = a.a end
          write(a, argt[1])
        end
        return union(table.unpack(argt))
      end
      return {}
    end

    walk = function(s)
      local k = s.k
      if k == "block" then
        for _, st in ipairs(s.body) do walk(st) end
      elseif k == "decl" then
        for _, it in ipairs(s.items) do
          local t = it.init and ev(it.init) or {}
          grow(it.var.taint, union(t, control()))
        end
      elseif k == "expr" then
        ev(s.e)
      elseif k == "if" then
        local r = cond_reason("if", s.cond, s.tok)
        with_reason(r, function()
          walk(s.th)
          if s.el then walk(s.el) end
        end)
      elseif k == "switch" then
        local r = cond_reason("switch", s.cond, s.tok)
        loops[#loops + 1] = {node = s, depth = #reasons, switch = true}
        with_reason(r, function() walk(s.body) end)
        loops[#loops] = nil
      elseif k == "loop" then
        if s.init then walk(s.init) end
        local prev = describe(s.exit_reasons or {}) -- early exits found by the previous pass
        s.exit_reasons = {}
        local entry = {node = s, depth = #reasons}
        local r = s.cond and cond_reason(s.kind, s.cond, s.tok) or {taint = {}}
        local lr = {taint = union(r.taint, s.exit)}
        if s.exit.item and #prev > 0 then
          lr.desc = ("`%s` loop at %s, which some work-items leave early: %s"):format(s.kind, where(s.tok),
                                                                                    table.concat(prev, "; "))
        else
          lr.desc = r.desc or ("`%s` loop at %s"):format(s.kind, where(s.tok))
        end
        loops[#loops + 1] = entry
        with_reason(lr, function()
          walk(s.body)
          if s.step then ev(s.step) end
        end)
        loops[#loops] = nil
        -- the trip count: the condition (after the body's assignments) and early exits
        local ct = s.cond and ev(s.cond) or {}
        if s.cond and marked_uniform(s.cond.tok or s.tok, ct) then ct = {} end
        local trip = union(ct, s.exit)
        local descs = describe(s.exit_reasons)
        if #descs == 0 and ct.item then descs = {cond_reason(s.kind, s.cond, s.tok).desc} end
        loop_event(s.tok, trip, ("`%s` loop at %s"):format(s.kind, where(s.tok)), table.concat(descs, "; "))
      elseif k == "break" or k == "continue" then
        for i = #loops, 1, -1 do
          local l = loops[i]
          if not (l.switch and k == "continue") then
            if not l.switch then
              local rel = {}
              local descs = {}
              for j = l.depth + 2, #reasons do
                add_into(rel, reasons[j].taint)
                if reasons[j].taint.item then descs[#descs + 1] = reasons[j].desc end
              end
              if next(rel) then
                grow(l.node.exit, rel)
                if rel.item then
                  l.node.exit_reasons[#l.node.exit_reasons + 1] = {taint = rel, desc = ("`%s` at %s taken only by some work-items (%s)"):format(k, where(s.tok), table.concat(descs, "; "))}
                end
              end
            end
            break
          end
        end
      elseif k == "return" then
        local t = s.e and ev(s.e) or {}
        local c = control()
        grow(summary.ret, union(t, c))
        local rel = {}
        local descs = {}
        for _, r in ipairs(reasons) do
          add_into(rel, r.taint)
          if r.taint.item then descs[#descs + 1] = r.desc end
        end
        if next(rel) then
          add_into(after_return.taint, rel)
          if rel.item then
            after_return.reasons[#after_return.reasons + 1] = {taint = rel, desc = ("`return` at %s taken only by some work-items (%s)"):format(where(s.tok), table.concat(descs, "; "))}
          end
          for _, l in ipairs(loops) do
            if not l.switch then
              local lrel = {}
              for j = l.depth + 2, #reasons do add_into(lrel, reasons[j].taint) end
              grow(l.node.exit, lrel)
              if lrel.item then
                l.node.exit_reasons[#l.node.exit_reasons + 1] = {taint = lrel, desc = ("`return` at %s taken only by some work-items"):format(where(s.tok))}
              end
            end
          end
        end
      end
    end

    local passes = 0
    repeat
      changed = false
      reasons, after_return, loops = {}, {taint = {}, reasons = {}}, {}
      summary.sync_points, summary.loop_points = {}, {}
      walk(f.body)
      passes = passes + 1
      if passes > 50 then error("barrier_check: no fixed point for " .. f.name, 0) end
    until not changed
    final = true
    reasons, after_return, loops = {}, {taint = {}, reasons = {}}, {}
    summary.sync_points, summary.loop_points = {}, {}
    walk(f.body)
  end
end

---------------------------------------------------------------------------------------------------
-- driver
---------------------------------------------------------------------------------------------------

local CONFIGS = {
  {},
  {NC_FP64 = "1", cl_khr_fp64 = "1", cl_khr_int64_base_atomics = "1"},
  {NC_FP64 = "1", cl_khr_fp64 = "1", cl_khr_int64_base_atomics = "1", NC_FAULT = "1"},
  {NC_FP64 = "1", cl_khr_fp64 = "1", cl_khr_int64_base_atomics = "1", REAL = "double", NC_REAL_DOUBLE = "1"},
  -- the tensor-core builds (runtime/backend/opencl/cl_gemm.c), and their emulation in CI
  {NC_MMA_TF32 = "1"},
  {NC_MMA_BF16 = "1", NC_MMA_EMULATE = "1"},
}

local function read_file(path)
  local f = assert(io.open(path, "rb"))
  local s = f:read("a")
  f:close()
  return s
end

local function basename(path) return path:match("([^/]+)$") end

-- The files each kernel file comes after in the runtime's programs of several files
-- ("mma+gemm_fast" in the slot table of runtime/backend/opencl/cl_backend.h, beside the kernels
-- folder): before["gemm_fast.cl"] = {"mma.cl"}.
local function runtime_prefixes(paths)
  local dir = (paths[1] or ""):match("^(.*)/[^/]+$") or "."
  local f = io.open(dir .. "/../runtime/backend/opencl/cl_backend.h")
  local before = {}
  if not f then return before end
  for prog in f:read("a"):gmatch('"([%w_]+%+[%w_+]+)"') do
    local parts = {}
    for part in prog:gmatch("[^+]+") do parts[#parts + 1] = part .. ".cl" end
    local list = before[parts[#parts]] or {}
    before[parts[#parts]] = list
    for i = 1, #parts - 1 do
      local known = false
      for _, q in ipairs(list) do known = known or q == parts[i] end
      if not known then list[#list + 1] = parts[i] end
    end
  end
  f:close()
  return before
end

-- Programs as the runtime builds them: common.cl first, then the file; a file the runtime
-- builds after others (runtime_prefixes), or whose #ifdef / #ifndef names a macro another
-- kernel file #defines, comes after those files.
local function programs(paths, sources)
  local common
  local defines_in = {}
  local before, by_name = runtime_prefixes(paths), {}
  for _, path in ipairs(paths) do by_name[basename(path)] = path end
  for _, path in ipairs(paths) do
    if basename(path) == "common.cl" then common = path end
    for name in sources[path]:gmatch("\n%s*#%s*define%s+([%w_]+)") do
      defines_in[name] = defines_in[name] or {}
      defines_in[name][path] = true
    end
  end
  local progs = {}
  for _, path in ipairs(paths) do
    if path ~= common then
      local files = {common}
      local seen = {}
      for _, name in ipairs(before[basename(path)] or {}) do
        local other = by_name[name]
        if other and other ~= path and not seen[other] then files[#files + 1] = other; seen[other] = true end
      end
      for name in sources[path]:gmatch("#%s*ifn?def%s+([%w_]+)") do
        local own = defines_in[name] and defines_in[name][path] -- e.g. #ifndef REAL ... #define REAL
        for other in pairs(own and {} or defines_in[name] or {}) do
          if other ~= path and other ~= common and not seen[other] then
            files[#files + 1] = other; seen[other] = true
          end
        end
      end
      files[#files + 1] = path
      progs[#progs + 1] = files
    end
  end
  return progs
end

-- Checks the given .cl files; returns the list of findings (strings) and statistics.
function M.check(paths, opts)
  opts = opts or {}
  local sources, markers = {}, {}
  for _, path in ipairs(paths) do
    sources[path] = read_file(path)
    markers[path] = {}
  end
  local findings, seen = {}, {}
  local marker_use = {}
  local stats = {files = #paths, functions = {}, kernels = {}, sync = {}}
  local function report(rule, tok, msg)
    local at, expanded = loc(tok)
    local line = ("%s: error: [%s] %s%s"):format(at, rule, msg, expanded and (" [" .. expanded .. "]") or "")
    if not seen[line] then
      seen[line] = true
      findings[#findings + 1] = line
    end
  end
  for _, files in ipairs(programs(paths, sources)) do
    if opts.verbose then print("program: " .. table.concat(files, " + ")) end
    for _, defs in ipairs(CONFIGS) do
      local toks = preprocess(files, defs, sources, markers)
      local p = new_parser(toks)
      p:parse_unit()
      analyze_unit(p, report, markers, marker_use)
      for _, f in ipairs(p.fnlist) do
        local key = f.tok.file .. ":" .. f.name
        stats.functions[key] = true
        if f.kernel then stats.kernels[key] = true end
        if f.sync then stats.sync[key] = true end
      end
    end
  end
  for _, path in ipairs(paths) do
    for line, reason in pairs(markers[path]) do
      if reason == false then
        findings[#findings + 1] = ("%s:%d: error: [marker] a barrier-check marker needs a reason: `barrier-check: uniform -- <why this condition is the same for the whole group>`"):format(path, line)
      elseif not marker_use[path .. ":" .. line] then
        findings[#findings + 1] = ("%s:%d: error: [marker] unneeded barrier-check marker: no per-item condition on this line"):format(path, line)
      end
    end
  end
  table.sort(findings)
  local function count(t) local n = 0 for _ in pairs(t) do n = n + 1 end return n end
  return findings, {files = #paths, functions = count(stats.functions), kernels = count(stats.kernels),
                    sync = count(stats.sync)}
end

local function list_dir(dir)
  local paths = {}
  local p = io.popen('ls -1 "' .. dir .. '"')
  for name in p:lines() do
    if name:match("%.cl$") then paths[#paths + 1] = dir .. "/" .. name end
  end
  p:close()
  table.sort(paths)
  return paths
end

local function run_paths(args, quiet)
  local paths = {}
  for _, a in ipairs(args) do
    if a:match("%.cl$") then paths[#paths + 1] = a else
      for _, q in ipairs(list_dir(a)) do paths[#paths + 1] = q end
    end
  end
  if #paths == 0 then
    io.stderr:write("barrier_check: no .cl files\n")
    return 2
  end
  local ok, findings, stats = pcall(M.check, paths, {verbose = M.verbose})
  if not ok then
    io.stderr:write(tostring(findings), "\n")
    return 2
  end
  for _, f in ipairs(findings) do print(f) end
  if not quiet or #findings > 0 then
    print(("barrier_check: %d files, %d functions (%d kernels), %d with barriers: %d finding%s"):format(
      stats.files, stats.functions, stats.kernels, stats.sync, #findings, #findings == 1 and "" or "s"))
  end
  return #findings == 0 and 0 or 1
end

---------------------------------------------------------------------------------------------------
-- self-test: planted divergent barriers must be found, uniform ones must not
---------------------------------------------------------------------------------------------------

local PLANTED = {
  {name = "if_local_id.cl", expect = {"divergent%-barrier"}, src = [[
__kernel void planted(__global float *x) {
  __local float t[64];
  t[get_local_id(0)] = x[get_global_id(0)];
  if (get_local_id(0) < 4) barrier(CLK_LOCAL_MEM_FENCE);
  x[get_global_id(0)] = t[0];
}
]]},
  {name = "early_return.cl", expect = {"barrier%-after%-return"}, src = [[
__kernel void planted(__global float *x, long n) {
  __local float t[64];
  const long i = get_global_id(0);
  if (i >= n) return;
  t[get_local_id(0)] = x[i];
  barrier(CLK_LOCAL_MEM_FENCE);
  x[i] = t[0];
}
]]},
  {name = "via_variable_and_macro.cl", expect = {"divergent%-barrier"}, src = [[
#define SYNC barrier(CLK_LOCAL_MEM_FENCE)
__kernel void planted(__global float *x) {
  const int lid = get_local_id(0);
  int odd = 0;
  if (lid & 1) odd = 1;       /* assigned under per-item control */
  while (odd) {
    SYNC;
    odd = 0;
  }
}
]]},
  {name = "loop_with_barrier.cl", expect = {"divergent%-barrier", "per%-item%-loop"}, src = [[
__kernel void planted(__global float *x, long n) {
  __local float t[64];
  const int lid = get_local_id(0), ls = get_local_size(0);
  for (long i = lid; i < n; i += ls) {
    t[lid] = x[i];
    barrier(CLK_LOCAL_MEM_FENCE);
    x[i] = t[(lid + 1) % ls];
    barrier(CLK_LOCAL_MEM_FENCE);
  }
}
]]},
  {name = "helper.cl", expect = {"divergent%-barrier"}, src = [[
inline float group_sum(float v, __local float *s, int steps) {
  const int lid = get_local_id(0);
  s[lid] = v;
  barrier(CLK_LOCAL_MEM_FENCE);
  for (int w = steps; w > 0; w >>= 1) {
    if (lid < w) s[lid] += s[lid + w];
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  return s[0];
}
__kernel void planted(__global float *x) {
  __local float s[64];
  /* a per-item argument decides how often the helper's loop of barriers runs */
  x[0] = group_sum(x[get_global_id(0)], s, (int)get_local_id(0));
}
__kernel void planted2(__global float *x) {
  __local float s[64];
  if (x[get_local_id(0)] > 0) x[1] = group_sum(1, s, 32);
}
]]},
  {name = "per_item_loop.cl", expect = {"per%-item%-loop"}, src = [[
__kernel void planted(__global float *x, long n, __global float *out) {
  __local float t[64];
  const int lid = get_local_id(0), ls = get_local_size(0);
  float acc = 0;
  for (long i = lid; i < n; i += ls) acc += x[i];
  t[lid] = acc;
  barrier(CLK_LOCAL_MEM_FENCE);
  if (lid == 0) out[get_group_id(0)] = t[0] + t[1];
}
]]},
  {name = "divergent_break.cl", expect = {"per%-item%-loop"}, src = [[
__kernel void planted(__global float *x, int rounds) {
  __local float t[64];
  const int lid = get_local_id(0);
  for (int r = 0; r < rounds; r++) {
    t[lid] = x[r];
    barrier(CLK_LOCAL_MEM_FENCE);
    if (t[lid] < 0) break;
    x[r] = t[0];
  }
}
]]},
  -- must stay clean: uniform conditions, NC_GROUP_FOR-style loops, a marker with a reason
  {name = "uniform.cl", expect = {}, src = [[
#define GROUP_FOR(T, i, first, lid, n, step) \
  for (T i##_base_ = (first), i = i##_base_ + (lid); i##_base_ < (n); i##_base_ += (step), i = i##_base_ + (lid)) \
    if (i < (n))
inline float wg_sum(float v, __local float *s) {
  const int lid = get_local_id(0), ls = get_local_size(0);
  s[lid] = v;
  barrier(CLK_LOCAL_MEM_FENCE);
  for (int w = ls / 2; w > 0; w >>= 1) {
    if (lid < w) s[lid] += s[lid + w];
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  const float r = s[0];
  barrier(CLK_LOCAL_MEM_FENCE);
  return r;
}
__kernel void fine(__global float *x, long n, int flag, __global float *out) {
  __local float s[64];
  const int lid = get_local_id(0), ls = get_local_size(0);
  float acc = 0;
  GROUP_FOR(long, i, 0, lid, n, ls) acc += x[i];
  const float total = wg_sum(acc, s);
  if (flag) barrier(CLK_LOCAL_MEM_FENCE);
  for (long u = get_group_id(0); u < n; u += get_num_groups(0)) barrier(CLK_LOCAL_MEM_FENCE);
  const int ng = get_num_groups(0);
  if (total > 0 && ng > 1) barrier(CLK_GLOBAL_MEM_FENCE); /* total: every item got the same sum */
  const int lane = get_local_id(0) / 64;
  if (lane == 0) barrier(CLK_LOCAL_MEM_FENCE); /* barrier-check: uniform -- lane is 0 in every item */
  if (lid == 0) out[get_group_id(0)] = total;
}
]]},
}

local function selftest()
  local base = os.tmpname()
  os.remove(base)
  local dir = base .. "_barrier_check"
  assert(os.execute('mkdir -p "' .. dir .. '"'))
  local failed = 0
  for _, case in ipairs(PLANTED) do
    local path = dir .. "/" .. case.name
    local f = assert(io.open(path, "w"))
    f:write(case.src)
    f:close()
    local ok, findings = pcall(M.check, {path})
    if not ok then
      print(("FAIL %s: %s"):format(case.name, findings))
      failed = failed + 1
    else
      print(("-- %s: %d finding%s"):format(case.name, #findings, #findings == 1 and "" or "s"))
      for _, line in ipairs(findings) do print("   " .. line:sub(#dir + 2)) end
      for _, rule in ipairs(case.expect) do
        local hit = false
        for _, line in ipairs(findings) do
          if line:find("%[" .. rule .. "%]") then hit = true end
        end
        if not hit then
          print(("FAIL %s: no [%s] finding"):format(case.name, rule:gsub("%%", "")))
          failed = failed + 1
        end
      end
      if #case.expect == 0 and #findings > 0 then
        print(("FAIL %s: expected no findings"):format(case.name))
        failed = failed + 1
      end
    end
    os.remove(path)
  end
  -- a marker without a reason is an error
  local path = dir .. "/bad_marker.cl"
  local f = assert(io.open(path, "w"))
  f:write("__kernel void k(__global float *x) {\n  if (get_local_id(0) < 1) barrier(CLK_LOCAL_MEM_FENCE); /* barrier-check: uniform */\n}\n")
  f:close()
  local _, findings = pcall(M.check, {path})
  local hit = false
  for _, line in ipairs(findings) do if line:find("needs a reason") then hit = true end end
  print(("-- bad_marker.cl: %s"):format(hit and "marker without a reason rejected" or "FAIL: accepted"))
  if not hit then failed = failed + 1 end
  os.remove(path)
  os.execute('rmdir "' .. dir .. '"')
  print(failed == 0 and "barrier_check self-test: ok" or ("barrier_check self-test: %d failure(s)"):format(failed))
  return failed == 0 and 0 or 1
end

---------------------------------------------------------------------------------------------------

local function main(argv)
  local args, quiet, self = {}, false, false
  for _, a in ipairs(argv) do
    if a == "--selftest" then self = true
    elseif a == "--quiet" then quiet = true
    elseif a == "-v" or a == "--verbose" then M.verbose = true
    elseif a == "-h" or a == "--help" then
      print("usage: barrier_check.lua [--selftest] [--quiet] [-v] [dir-or-file.cl ...]  (default: kernels)")
      return 0
    else args[#args + 1] = a end
  end
  if self then return selftest() end
  if #args == 0 then args = {"kernels"} end
  return run_paths(args, quiet)
end

if arg and arg[0] and arg[0]:match("barrier_check%.lua$") then
  os.exit(main(arg))
end

return M
