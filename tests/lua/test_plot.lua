-- netcl.plot: the SVG is well-formed XML (checked by the parser below, and by xmllint too
-- where installed), holds every data point where the axes say it should be, and bad input
-- gives clear errors.
local lu = require "luaunit"
local plot = require "netcl.plot"
local nc = require "netcl"

-- ---- a small XML 1.0 well-formedness checker -------------------------------------------------
-- Elements, attributes, character and the five predefined entity references, comments,
-- processing instructions and CDATA; one root element. Returns the tree or raises.
local function parse_xml(s)
  local pos = 1
  local function fail(msg) error(string.format("not well-formed XML at byte %d: %s", pos, msg), 0) end
  local NAME = "^[A-Za-z_:][A-Za-z0-9_:%.%-]*"
  local ENT = {amp = "&", lt = "<", gt = ">", quot = '"', apos = "'"}

  local function decode(t, in_attr)
    if in_attr and t:find("<", 1, true) then fail("'<' in an attribute value") end
    return (t:gsub("&([^;]*);?", function(ref)
      local full = t  -- keep the closure simple: validate each reference
      if ENT[ref] then return ENT[ref] end
      local n = ref:match("^#x(%x+)$")
      if n then return utf8.char(tonumber(n, 16)) end
      n = ref:match("^#(%d+)$")
      if n then return utf8.char(tonumber(n)) end
      fail("bad reference '&" .. ref .. "' in " .. full:sub(1, 60))
    end))
  end

  local function check_refs(t, in_attr)
    -- every '&' must start a complete reference
    for amp in t:gmatch("&[^;]*;?") do
      if not amp:find(";$") then fail("'&' without a reference") end
    end
    return decode(t, in_attr)
  end

  local function skip_ws() pos = s:find("[^ \t\r\n]", pos) or #s + 1 end

  local function misc()
    while true do
      skip_ws()
      if s:sub(pos, pos + 3) == "<!--" then
        local e = s:find("-->", pos + 4, true) or fail("unterminated comment")
        if s:sub(pos + 4, e - 1):find("--", 1, true) then fail("'--' inside a comment") end
        pos = e + 3
      elseif s:sub(pos, pos + 1) == "<?" then
        local e = s:find("?>", pos + 2, true) or fail("unterminated processing instruction")
        pos = e + 2
      else
        return
      end
    end
  end

  local element
  function element()
    if s:sub(pos, pos) ~= "<" then fail("expected '<'") end
    pos = pos + 1
    local name = s:match(NAME, pos) or fail("bad element name")
    pos = pos + #name
    local node = {name = name, attrs = {}, children = {}, text = {}}
    while true do
      local ws = s:match("^[ \t\r\n]*", pos)
      pos = pos + #ws
      local c = s:sub(pos, pos)
      if c == ">" then pos = pos + 1 break end
      if s:sub(pos, pos + 1) == "/>" then pos = pos + 2 return node end
      if #ws == 0 then fail("attributes need whitespace before them") end
      local an = s:match(NAME, pos) or fail("bad attribute name")
      pos = pos + #an
      local eq = s:match("^[ \t\r\n]*=[ \t\r\n]*", pos) or fail("expected '=' after " .. an)
      pos = pos + #eq
      local quote = s:sub(pos, pos)
      if quote ~= '"' and quote ~= "'" then fail("attribute value must be quoted") end
      local e = s:find(quote, pos + 1, true) or fail("unterminated attribute value")
      if node.attrs[an] ~= nil then fail("duplicate attribute " .. an) end
      node.attrs[an] = check_refs(s:sub(pos + 1, e - 1), true)
      pos = e + 1
    end
    while true do
      local lt = s:find("<", pos, true) or fail("unclosed element <" .. name .. ">")
      local t = s:sub(pos, lt - 1)
      if t:find("]]>", 1, true) then fail("']]>' in text") end
      node.text[#node.text + 1] = check_refs(t, false)
      pos = lt
      if s:sub(pos, pos + 1) == "</" then
        local close = s:match("^</(" .. NAME:sub(2) .. ")[ \t\r\n]*>", pos)
        if close ~= name then fail("</" .. tostring(close) .. "> closes <" .. name .. ">") end
        pos = s:find(">", pos, true) + 1
        node.text = table.concat(node.text)
        return node
      elseif s:sub(pos, pos + 3) == "<!--" or s:sub(pos, pos + 1) == "<?" then
        misc()
      elseif s:sub(pos, pos + 8) == "<![CDATA[" then
        local e = s:find("]]>", pos, true) or fail("unterminated CDATA")
        node.text[#node.text + 1] = s:sub(pos + 9, e - 1)
        pos = e + 3
      else
        node.children[#node.children + 1] = element()
      end
    end
  end

  if s:sub(1, 5) == "<?xml" then
    local e = s:find("?>", 1, true) or fail("unterminated XML declaration")
    pos = e + 2
  end
  misc()
  local root = element()
  misc()
  if pos <= #s then fail("content after the root element") end
  return root
end

local function walk(node, fn)
  fn(node)
  for _, c in ipairs(node.children) do walk(c, fn) end
end

local function find_all(root, pred)
  local out = {}
  walk(root, function(n) if pred(n) then out[#out + 1] = n end end)
  return out
end

local function by_class(root, class)
  return find_all(root, function(n) return n.attrs.class == class end)
end

-- Pixel positions of a series group: polylines' points, then the markers.
local function series_points(g)
  local lines, dots = {}, {}
  for _, c in ipairs(g.children) do
    if c.name == "polyline" then
      local line = {}
      for x, y in c.attrs.points:gmatch("([%d%.%-]+),([%d%.%-]+)") do line[#line + 1] = {tonumber(x), tonumber(y)} end
      lines[#lines + 1] = line
    elseif c.name == "circle" then
      dots[#dots + 1] = {tonumber(c.attrs.cx), tonumber(c.attrs.cy)}
    end
  end
  return lines, dots
end

-- Fits pixel = a + b * f(value) through the two most distant values, then checks every pair.
local function check_affine(pairs_, f, what)
  table.sort(pairs_, function(p, q) return f(p[1]) < f(q[1]) end)
  local lo, hi = pairs_[1], pairs_[#pairs_]
  lu.assertTrue(f(hi[1]) > f(lo[1]), what .. ": needs two distinct values")
  local b = (hi[2] - lo[2]) / (f(hi[1]) - f(lo[1]))
  local a = lo[2] - b * f(lo[1])
  for _, p in ipairs(pairs_) do
    lu.assertAlmostEquals(p[2], a + b * f(p[1]), 0.011, what .. ": value " .. p[1] .. " is off its axis")
  end
  return a, b
end

local function xmllint_ok(svg)
  local have = io.popen("command -v xmllint 2>/dev/null"):read("l")
  if not have then return nil end
  local path = os.tmpname()
  local f = assert(io.open(path, "wb"))
  f:write(svg)
  f:close()
  local ok = os.execute("xmllint --noout " .. path .. " 2>/dev/null")
  os.remove(path)
  return ok == true
end

-- ---- the checker must itself reject broken documents ------------------------------------------
TestChecker = {}

function TestChecker:test_rejects_malformed()
  for _, bad in ipairs({
    "<a><b></a></b>", "<a>x & y</a>", '<a x="1" x="2"/>', "<a/><b/>", "<a>", '<a x=1/>',
    "<a>&bogus;</a>", '<a x="<"/>', "<a><!-- x -- y --></a>", "text<a/>", "<a></A>",
  }) do
    lu.assertErrorMsgContains("not well-formed", parse_xml, bad)
  end
  local t = parse_xml('<?xml version="1.0"?>\n<!-- c --><a k="&lt;&#65;&#x42;"><b/>t&amp;u<![CDATA[<x>]]></a>\n')
  lu.assertEquals(t.name, "a")
  lu.assertEquals(t.attrs.k, "<AB")
  lu.assertEquals(t.text, "t&u<x>")
end

-- ---- charts ---------------------------------------------------------------------------------------
TestPlot = {}

local LOSS = {2.31, 1.52, 1.10, 0.83, 0.71, 0.64, 0.60, 0.58}
local VAL = {2.20, 1.61, 1.25, 1.02, 0.97, 0.95, 0.96, 0.99}
local X2 = {1, 2, 4, 8, 10, 12, 14, 16}

function TestPlot:test_well_formed_with_every_point_on_its_axes()
  local title = 'Loss <train & "val"> ünïcode'
  local svg = plot.line{
    title = title, xlabel = "epoch", ylabel = "loss",
    series = {{name = "train <a&b>", y = LOSS}, {name = "val", x = X2, y = VAL, dash = true}},
  }
  local root = parse_xml(svg)
  lu.assertEquals(root.name, "svg")
  lu.assertEquals(root.attrs.xmlns, "http://www.w3.org/2000/svg")
  if xmllint_ok(svg) == false then lu.fail("xmllint rejects the SVG") end
  lu.assertEquals(by_class(root, "title")[1].text, title)
  lu.assertEquals(by_class(root, "xlabel")[1].text, "epoch")
  lu.assertEquals(by_class(root, "ylabel")[1].text, "loss")

  local groups = by_class(root, "series")
  lu.assertEquals(#groups, 2)
  lu.assertEquals(groups[1].attrs["data-name"], "train <a&b>")
  lu.assertEquals(groups[2].attrs["data-name"], "val")
  lu.assertEquals(groups[2].attrs["stroke-dasharray"], "6 4")
  local xs, ys = {}, {}
  for k, g in ipairs(groups) do
    local data_x = k == 1 and {1, 2, 3, 4, 5, 6, 7, 8} or X2
    local data_y = k == 1 and LOSS or VAL
    local lines, dots = series_points(g)
    lu.assertEquals(#lines, 1)
    lu.assertEquals(#lines[1], #data_y)
    lu.assertEquals(dots, lines[1])            -- short series: a marker on each point
    for i, p in ipairs(lines[1]) do
      xs[#xs + 1] = {data_x[i], p[1]}
      ys[#ys + 1] = {data_y[i], p[2]}
    end
  end
  -- both series share the axes: one affine map per axis fits all 16 points
  local _, bx = check_affine(xs, function(v) return v end, "x")
  local ay, by = check_affine(ys, function(v) return v end, "y")
  lu.assertTrue(bx > 0)
  lu.assertTrue(by < 0, "larger values are drawn higher")

  -- y ticks: nice, evenly spaced numbers, each drawn where the axis map puts it
  local labels = by_class(root, "yticks")[1].children
  lu.assertTrue(#labels >= 3 and #labels <= 10, #labels .. " y ticks")
  local values = {}
  for i, t in ipairs(labels) do
    values[i] = tonumber(t.text)
    lu.assertNotNil(values[i], "tick label " .. t.text)
    lu.assertAlmostEquals(tonumber(t.attrs.y) - 4, ay + by * values[i], 0.011)
  end
  local step = values[2] - values[1]
  local mant = step / 10 ^ math.floor(math.log(step, 10) + 1e-9)
  lu.assertTrue(math.abs(mant - 1) < 1e-6 or math.abs(mant - 2) < 1e-6 or math.abs(mant - 5) < 1e-6,
                "tick step " .. step)
  for i = 3, #values do lu.assertAlmostEquals(values[i] - values[i - 1], step, 1e-9) end
  -- integer x data: integer x ticks
  for _, t in ipairs(by_class(root, "xticks")[1].children) do lu.assertStrMatches(t.text, "%-?%d+") end

  local legend = by_class(root, "legend")[1]
  local names = {}
  for _, c in ipairs(legend.children) do if c.name == "text" then names[#names + 1] = c.text end end
  lu.assertEquals(names, {"train <a&b>", "val"})
end

function TestPlot:test_legend_avoids_the_data()
  -- rising curves end in the top-right corner: the legend must go elsewhere
  local root = parse_xml(plot.line{series = {{name = "train", y = {0.3, 0.5, 0.7, 0.8, 0.85, 0.88, 0.9, 0.91}},
                                             {name = "val", y = {0.3, 0.48, 0.66, 0.75, 0.78, 0.8, 0.8, 0.79}}}})
  local box = by_class(root, "legend")[1].children[1]
  lu.assertEquals(box.name, "rect")
  local x0, y0 = tonumber(box.attrs.x), tonumber(box.attrs.y)
  local x1, y1 = x0 + tonumber(box.attrs.width), y0 + tonumber(box.attrs.height)
  for _, g in ipairs(by_class(root, "series")) do
    local lines = series_points(g)
    for _, p in ipairs(lines[1]) do
      lu.assertFalse(p[1] >= x0 and p[1] <= x1 and p[2] >= y0 and p[2] <= y1, "the legend hides a point")
    end
  end
end

function TestPlot:test_gaps_and_long_series()
  local y = {}
  for i = 1, 100 do y[i] = math.sin(i / 10) end
  y[50] = 0 / 0
  y[51] = math.huge
  y[100] = 0 / 0
  local root = parse_xml(plot.line{series = {{name = "s", y = y}}, legend = false})
  local lines, dots = series_points(by_class(root, "series")[1])
  lu.assertEquals(#lines, 2)
  lu.assertEquals(#lines[1], 49)
  lu.assertEquals(#lines[2], 48)
  lu.assertEquals(#dots, 0)                   -- long series: no markers
  lu.assertEquals(#by_class(root, "legend"), 0)
  local pts = {}
  for i, p in ipairs(lines[2]) do pts[i] = {i + 51, p[1]} end
  check_affine(pts, function(v) return v end, "x after the gap")
end

function TestPlot:test_lone_point_gets_a_marker()
  local root = parse_xml(plot.line{series = {{y = {1, 0 / 0, 3, 4}, markers = false}}})
  local lines, dots = series_points(by_class(root, "series")[1])
  lu.assertEquals(#lines, 1)
  lu.assertEquals(#lines[1], 2)
  lu.assertEquals(#dots, 1)
  lu.assertEquals(by_class(root, "series")[1].attrs["data-name"], "series 1")
end

function TestPlot:test_log_scale()
  local y = {10, 3, 1, 0.3, 0.1, 0.05}
  local root = parse_xml(plot.line{series = {{name = "loss", y = y}}, ylog = true})
  local lines = series_points(by_class(root, "series")[1])
  local ys = {}
  for i, p in ipairs(lines[1]) do ys[i] = {y[i], p[2]} end
  check_affine(ys, function(v) return math.log(v, 10) end, "log y")
  local labels = {}
  for _, t in ipairs(by_class(root, "yticks")[1].children) do labels[#labels + 1] = t.text end
  lu.assertStrContains(table.concat(labels, " "), "0.1 ")
  lu.assertStrContains(table.concat(labels, " "), "1 ")
  lu.assertErrorMsgContains("ylog needs positive values", plot.line, {series = {{y = {1, 0}}}, ylog = true})
end

function TestPlot:test_constant_series_and_limits()
  local root = parse_xml(plot.line{series = {{y = {5, 5, 5}}}})
  local lines = series_points(by_class(root, "series")[1])
  lu.assertEquals(#lines[1], 3)
  lu.assertTrue(#by_class(root, "yticks")[1].children >= 2)
  -- ylim cuts the view; the points are still there (clipped by the plot area)
  root = parse_xml(plot.line{series = {{y = {0, 10, 20}}}, ylim = {0, 5}, xlim = {1, 3}})
  lu.assertEquals(#series_points(by_class(root, "series")[1])[1], 3)
  lu.assertErrorMsgContains("ylim must be {lo, hi}", plot.line, {series = {{y = {1, 2}}}, ylim = {3, 1}})
end

function TestPlot:test_tensors_as_data()
  local root = parse_xml(plot.line{series = {{name = "t", x = nc.tensor({0.5, 1.5, 2.5}), y = nc.tensor({3, 1, 2})}}})
  local lines = series_points(by_class(root, "series")[1])
  local ys = {}
  for i, p in ipairs(lines[1]) do ys[i] = {({3, 1, 2})[i], p[2]} end
  check_affine(ys, function(v) return v end, "tensor y")
  lu.assertErrorMsgContains("expected a 1-D tensor", plot.line, {series = {{y = nc.zeros({2, 2})}}})
end

-- plot.grid takes what plot.line returns (documents), mixed with specs: the same cells as from
-- the specs, with clip-path ids kept unique.
function TestPlot:test_grid_of_documents()
  local a = {title = "loss", series = {{name = "train", y = LOSS}}}
  local b = {title = "accuracy", width = 400, series = {{name = "val", y = {0.5, 0.7, 0.8}}}}
  local from_specs = plot.grid({a, b, a}, {columns = 2, title = "run"})
  local from_docs = plot.grid({plot.line(a), plot.line(b), a}, {columns = 2, title = "run"})
  if xmllint_ok(from_docs) == false then lu.fail("xmllint rejects the grid SVG") end
  -- the same document but for the clip-path ids (a document's own id gets the cell's as prefix)
  local function ids_out(svg) return (svg:gsub("c[c%d]*%-area", "ID")) end
  lu.assertEquals(ids_out(from_docs), ids_out(from_specs))
  lu.assertNotEquals(from_docs, from_specs)
  -- a grid inside a grid: ids stay unique and resolve
  local nested = parse_xml(plot.grid({from_docs, plot.line(b)}))
  local ids = {}
  walk(nested, function(n)
    if n.attrs.id then
      lu.assertNil(ids[n.attrs.id], "duplicate id " .. n.attrs.id)
      ids[n.attrs.id] = true
    end
  end)
  local refs = 0
  walk(nested, function(n)
    local ref = n.attrs["clip-path"] and n.attrs["clip-path"]:match("^url%(#(.+)%)$")
    if ref then
      refs = refs + 1
      lu.assertTrue(ids[ref], "dangling " .. ref)
    end
  end)
  lu.assertTrue(refs >= 4)
end

function TestPlot:test_grid()
  local a = {title = "loss", series = {{name = "train", y = LOSS}}}
  local b = {title = "accuracy", width = 400, series = {{name = "val", y = {0.5, 0.7, 0.8}}}}
  local svg = plot.grid({a, b, a}, {columns = 2, title = "run & co"})
  local root = parse_xml(svg)
  if xmllint_ok(svg) == false then lu.fail("xmllint rejects the grid SVG") end
  local charts = by_class(root, "chart")
  lu.assertEquals(#charts, 3)
  lu.assertEquals(tonumber(root.attrs.width), 1280)
  lu.assertEquals(tonumber(root.attrs.height), 32 + 800)
  lu.assertEquals(charts[3].attrs.x, "0")
  lu.assertEquals(charts[3].attrs.y, tostring(32 + 400))
  -- clip-path ids are unique and every reference resolves
  local ids = {}
  walk(root, function(n)
    if n.attrs.id then
      lu.assertNil(ids[n.attrs.id], "duplicate id " .. n.attrs.id)
      ids[n.attrs.id] = true
    end
  end)
  walk(root, function(n)
    local ref = n.attrs["clip-path"] and n.attrs["clip-path"]:match("^url%(#(.+)%)$")
    if n.attrs["clip-path"] then lu.assertTrue(ids[ref], "dangling " .. n.attrs["clip-path"]) end
  end)
  lu.assertEquals(by_class(root, "title")[1].text, "run & co")
  lu.assertErrorMsgContains("columns must be a positive integer", plot.grid, {a}, {columns = 0})
  lu.assertErrorMsgContains("chart 2: expected a chart spec or an SVG document", plot.grid, {a, "<svg/>"})
  lu.assertErrorMsgContains("non-empty array", plot.grid, {})
end

function TestPlot:test_bad_input()
  local cases = {
    {"expected a chart table", 42},
    {"series must be a non-empty array", {}},
    {"series must be a non-empty array", {series = {}}},
    {"series[1] is a string", {series = {"x"}}},
    {"series 1 ('a') has no y values", {series = {{name = "a"}}}},
    {"x has 2 values but y has 3", {series = {{y = {1, 2, 3}, x = {1, 2}}}}},
    {"y[2] is a string, expected a number", {series = {{y = {1, "2"}}}}},
    {"y has a key", {series = {{y = {1, 2, foo = 3}}}}},
    {"y[2] is a nil", {series = {{y = {1, nil, 3}}}}},
    {"no finite (x, y) point", {series = {{y = {0 / 0, math.huge}}}}},
    {"width and height", {series = {{y = {1}}}, width = 10}},
  }
  for _, c in ipairs(cases) do
    local ok, err = pcall(plot.line, c[2])
    lu.assertFalse(ok)
    lu.assertStrMatches(err, "netcl%.plot%.line: .*")
    lu.assertStrContains(err, c[1])
  end
end

function TestPlot:test_save()
  local path = os.tmpname() .. ".svg"
  local svg = plot.line{series = {{y = {1, 2}}}}
  lu.assertEquals(plot.save(path, svg), path)
  local f = assert(io.open(path, "rb"))
  lu.assertEquals(f:read("a"), svg)
  f:close()
  os.remove(path)
  lu.assertNil(io.open(path .. ".tmp"))
  lu.assertErrorMsgContains("cannot write /nonexistent-dir/x.svg", plot.save, "/nonexistent-dir/x.svg", svg)
  lu.assertErrorMsgContains("expected an SVG document", plot.save, path, {series = {}})
end

os.exit(lu.LuaUnit.run())
