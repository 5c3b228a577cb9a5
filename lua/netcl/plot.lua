-- netcl.plot: SVG line charts from Lua tables (training curves and the like), with no
-- dependency beyond Lua: the files open in any browser.
--
--   local plot = require "netcl.plot"
--   local svg = plot.line{
--     title = "MNIST", xlabel = "epoch", ylabel = "loss", ylog = false,
--     series = {{name = "train", y = train_loss}, {name = "test", x = epochs, y = test_loss}},
--   }
--   plot.save("loss.svg", svg)
--   local acc = plot.line{title = "accuracy", series = {{name = "test", y = test_acc}}}
--   plot.save("curves.svg", plot.grid({svg, acc}, {columns = 2}))   -- documents or chart specs
--
-- Series values are numbers (or 1-D tensors); NaN and infinities leave a gap in the line.
local plot = {}

local PALETTE = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd",
                 "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"}
local FONT_SIZE = 12
local CHAR_WIDTH = 7          -- rough advance of a 12 px sans-serif glyph, for layout only
local MARKERS_UP_TO = 40      -- series this short get a dot at each point by default

-- Errors name the function and the offending value, like the C bindings' errors.
local function fail(fname, fmt, ...)
  error("netcl.plot." .. fname .. ": " .. string.format(fmt, ...), 0)
end

local function escape(s)
  return (tostring(s):gsub("[&<>\"']", {["&"] = "&amp;", ["<"] = "&lt;", [">"] = "&gt;",
                                         ['"'] = "&quot;", ["'"] = "&apos;"}))
end

local function finite(v) return v == v and v ~= math.huge and v ~= -math.huge end

local function fmt_coord(v) return string.format("%.2f", v) end

-- A Lua array of numbers from a table or a 1-D tensor.
local function numbers(fname, v, what)
  -- plot.lua does not load netcl; a value can only be a Tensor or a Node when netcl is loaded
  local nc = package.loaded["netcl.core"]
  if nc and (nc.is_tensor(v) or nc.is_node(v)) then
    local list = v:tolist()
    if type(list) ~= "table" then fail(fname, "%s: expected a table of numbers or a 1-D tensor", what) end
    if #list > 0 and type(list[1]) == "table" then fail(fname, "%s: expected a 1-D tensor", what) end
    v = list
  end
  if type(v) ~= "table" then fail(fname, "%s: expected a table of numbers, got %s", what, type(v)) end
  local out = {}
  for i = 1, #v do
    local x = v[i]
    if type(x) == "boolean" then x = x and 1 or 0 end
    if type(x) ~= "number" then fail(fname, "%s[%d] is a %s, expected a number", what, i, type(x)) end
    out[i] = x
  end
  for k in pairs(v) do
    if math.type(k) ~= "integer" or k < 1 or k > #v then
      fail(fname, "%s has a key %s outside 1..%d (use 0/0 for a gap, not nil)", what, tostring(k), #v)
    end
  end
  return out
end

-- ---- scales and ticks ------------------------------------------------------------------------

local function nice_step(span, target)
  local raw = span / target
  local mag = 10 ^ math.floor(math.log(raw, 10))
  local f = raw / mag
  local m = (f < 1.5 and 1) or (f < 3 and 2) or (f < 7 and 5) or 10
  return m * mag
end

local function tick_label(v, step)
  if v == 0 then return "0" end
  local a = math.abs(v)
  local s
  if a >= 1e6 or a < 1e-4 then
    s = string.format("%.3g", v)
  else
    local decimals = math.max(0, -math.floor(math.log(step, 10) + 1e-9))
    s = string.format("%." .. decimals .. "f", v)
  end
  return s == "-0" and "0" or s
end

-- Linear ticks inside [lo, hi]; integer_only keeps steps >= 1 (epochs, iterations).
local function linear_ticks(lo, hi, target, integer_only)
  local step = nice_step(hi - lo, target)
  if integer_only and step < 1 then step = 1 end
  local ticks = {}
  local first = math.ceil(lo / step - 1e-9)
  for k = first, first + 1000 do
    local v = k * step
    if v > hi + step * 1e-9 then break end
    if math.abs(v) < step * 1e-9 then v = 0 end
    ticks[#ticks + 1] = {value = v, label = tick_label(v, step)}
  end
  return ticks
end

local function log_ticks(lo, hi)
  local d0, d1 = math.floor(math.log(lo, 10) + 1e-9), math.ceil(math.log(hi, 10) - 1e-9)
  local span = math.log(hi, 10) - math.log(lo, 10)
  -- within a decade or so every digit is worth a tick; over many decades, every few decades
  local mults = (span < 1.5 and {1, 2, 3, 4, 5, 6, 7, 8, 9}) or (span <= 3 and {1, 2, 5}) or {1}
  local every = math.max(1, math.ceil((d1 - d0) / 8))
  local ticks = {}
  for d = d0, d1 do
    if (d - d0) % every == 0 then
      for _, m in ipairs(mults) do
        local v = m * 10 ^ d
        if v >= lo * (1 - 1e-9) and v <= hi * (1 + 1e-9) then
          ticks[#ticks + 1] = {value = v, label = string.format("%g", v)}
        end
      end
    end
  end
  return ticks
end

-- [lo, hi] with room around the data; a single value gets a unit-wide window.
local function padded(lo, hi, frac, log)
  if log then
    if lo == hi then return lo / 2, hi * 2 end
    local r = (math.log(hi, 10) - math.log(lo, 10)) * frac
    return lo / 10 ^ r, hi * 10 ^ r
  end
  if lo == hi then
    local d = lo == 0 and 1 or math.abs(lo) * 0.1
    return lo - d, hi + d
  end
  local d = (hi - lo) * frac
  return lo - d, hi + d
end

-- ---- validation ---------------------------------------------------------------------------------

local function check_spec(fname, spec)
  if type(spec) ~= "table" then fail(fname, "expected a chart table, got %s", type(spec)) end
  if type(spec.series) ~= "table" or #spec.series == 0 then
    fail(fname, "series must be a non-empty array of {name=, y=, x=}")
  end
  local width, height = spec.width or 640, spec.height or 400
  if type(width) ~= "number" or type(height) ~= "number" or width < 160 or height < 120 then
    fail(fname, "width and height must be numbers of at least 160 x 120 pixels")
  end
  local out = {}
  local integer_x = true
  for i, s in ipairs(spec.series) do
    if type(s) ~= "table" then fail(fname, "series[%d] is a %s, expected a table", i, type(s)) end
    local name = s.name ~= nil and tostring(s.name) or ("series " .. i)
    local what = string.format("series %d ('%s')", i, name)
    if s.y == nil then fail(fname, "%s has no y values", what) end
    local y = numbers(fname, s.y, what .. ": y")
    local x
    if s.x ~= nil then
      x = numbers(fname, s.x, what .. ": x")
      if #x ~= #y then fail(fname, "%s: x has %d values but y has %d", what, #x, #y) end
    else
      x = {}
      for k = 1, #y do x[k] = k end
    end
    for k = 1, #x do
      if finite(x[k]) and math.floor(x[k]) ~= x[k] then integer_x = false end
    end
    out[i] = {name = name, x = x, y = y, color = s.color or PALETTE[(i - 1) % #PALETTE + 1],
              dash = s.dash, markers = s.markers}
  end
  return out, width, height, integer_x
end

local function limits(fname, series, key, lim, log)
  local lo, hi = math.huge, -math.huge
  for _, s in ipairs(series) do
    for k = 1, #s.x do
      local x, y = s.x[k], s.y[k]
      if finite(x) and finite(y) then
        local v = s[key][k]
        if log and v <= 0 then
          fail(fname, "ylog needs positive values; series '%s' has %s at index %d", s.name, tostring(v), k)
        end
        lo, hi = math.min(lo, v), math.max(hi, v)
      end
    end
  end
  if lo > hi then fail(fname, "no finite (x, y) point to plot") end
  if lim ~= nil then
    if type(lim) ~= "table" or type(lim[1]) ~= "number" or type(lim[2]) ~= "number" or lim[1] >= lim[2] then
      fail(fname, "%slim must be {lo, hi} with lo < hi", key)
    end
    if log and lim[1] <= 0 then fail(fname, "ylim must be positive with ylog") end
    return lim[1], lim[2], true
  end
  return lo, hi, false
end

-- ---- rendering ---------------------------------------------------------------------------------

-- The chart's SVG elements (no <svg> wrapper); id keeps clip-path ids unique in a grid.
local function render(fname, spec, id)
  local series, W, H, integer_x = check_spec(fname, spec)
  local log = spec.ylog and true or false
  local xlo, xhi, xfixed = limits(fname, series, "x", spec.xlim, false)
  local ylo, yhi, yfixed = limits(fname, series, "y", spec.ylim, log)
  if not xfixed then xlo, xhi = padded(xlo, xhi, 0.02, false) end
  if not yfixed then ylo, yhi = padded(ylo, yhi, 0.05, log) end

  local yticks = log and log_ticks(ylo, yhi) or linear_ticks(ylo, yhi, 6, false)
  local xticks = linear_ticks(xlo, xhi, 7, integer_x)
  local label_w = 0
  for _, t in ipairs(yticks) do label_w = math.max(label_w, #t.label * CHAR_WIDTH) end

  local left = 16 + label_w + 8 + (spec.ylabel and FONT_SIZE + 8 or 0)
  local right, top = 16, spec.title and 36 or 16
  local bottom = 16 + FONT_SIZE + 8 + (spec.xlabel and FONT_SIZE + 8 or 0)
  local pw, ph = W - left - right, H - top - bottom
  if pw < 40 or ph < 40 then fail(fname, "the chart is too small for its labels (%dx%d)", W, H) end

  local function px(x) return left + (x - xlo) / (xhi - xlo) * pw end
  local function py(y)
    if log then
      local l0, l1 = math.log(ylo, 10), math.log(yhi, 10)
      return top + ph - (math.log(y, 10) - l0) / (l1 - l0) * ph
    end
    return top + ph - (y - ylo) / (yhi - ylo) * ph
  end

  local o = {}
  local function add(...) o[#o + 1] = string.format(...) end
  add('<rect class="background" width="%d" height="%d" fill="white"/>', W, H)
  if spec.title then
    add('<text class="title" x="%s" y="%d" text-anchor="middle" font-size="%d" font-weight="bold">%s</text>',
        fmt_coord(left + pw / 2), 22, FONT_SIZE + 2, escape(spec.title))
  end

  -- grid lines and ticks
  add('<g class="grid" stroke="#e6e6e6" stroke-width="1">')
  for _, t in ipairs(yticks) do
    add('<line x1="%s" y1="%s" x2="%s" y2="%s"/>', fmt_coord(left), fmt_coord(py(t.value)),
        fmt_coord(left + pw), fmt_coord(py(t.value)))
  end
  for _, t in ipairs(xticks) do
    add('<line x1="%s" y1="%s" x2="%s" y2="%s"/>', fmt_coord(px(t.value)), fmt_coord(top),
        fmt_coord(px(t.value)), fmt_coord(top + ph))
  end
  add('</g>')
  add('<g class="axes" stroke="#333333" stroke-width="1" fill="none">')
  add('<rect x="%d" y="%d" width="%d" height="%d"/>', left, top, pw, ph)
  for _, t in ipairs(yticks) do
    add('<line x1="%s" y1="%s" x2="%d" y2="%s"/>', fmt_coord(left - 5), fmt_coord(py(t.value)), left,
        fmt_coord(py(t.value)))
  end
  for _, t in ipairs(xticks) do
    add('<line x1="%s" y1="%d" x2="%s" y2="%d"/>', fmt_coord(px(t.value)), top + ph,
        fmt_coord(px(t.value)), top + ph + 5)
  end
  add('</g>')
  add('<g class="yticks" text-anchor="end" fill="#333333">')
  for _, t in ipairs(yticks) do
    add('<text x="%d" y="%s">%s</text>', left - 8, fmt_coord(py(t.value) + 4), escape(t.label))
  end
  add('</g>')
  add('<g class="xticks" text-anchor="middle" fill="#333333">')
  for _, t in ipairs(xticks) do
    add('<text x="%s" y="%d">%s</text>', fmt_coord(px(t.value)), top + ph + 8 + FONT_SIZE, escape(t.label))
  end
  add('</g>')
  if spec.xlabel then
    add('<text class="xlabel" x="%s" y="%d" text-anchor="middle">%s</text>', fmt_coord(left + pw / 2),
        H - 12, escape(spec.xlabel))
  end
  if spec.ylabel then
    local cx, cy = 16 + FONT_SIZE / 2, top + ph / 2
    add('<text class="ylabel" x="%s" y="%s" text-anchor="middle" transform="rotate(-90 %s %s)">%s</text>',
        fmt_coord(cx), fmt_coord(cy), fmt_coord(cx), fmt_coord(cy), escape(spec.ylabel))
  end

  -- data, clipped to the plot area (xlim/ylim may cut lines)
  local drawn = {}   -- pixel points and segment midpoints, for placing the legend
  add('<clipPath id="%s-area"><rect x="%d" y="%d" width="%d" height="%d"/></clipPath>', id, left, top, pw, ph)
  for _, s in ipairs(series) do
    add('<g class="series" data-name="%s" stroke="%s" fill="none" stroke-width="1.75" clip-path="url(#%s-area)"%s>',
        escape(s.name), escape(s.color), id, s.dash and ' stroke-dasharray="6 4"' or "")
    local segment, lone = {}, {}
    local function flush()
      if #segment == 1 then lone[#lone + 1] = segment[1] end
      if #segment > 1 then add('<polyline points="%s"/>', table.concat(segment, " ")) end
      segment = {}
    end
    local points = {}
    for k = 1, #s.x do
      local x, y = s.x[k], s.y[k]
      if finite(x) and finite(y) then
        local cx, cy = px(x), py(y)
        local prev = drawn[#drawn]
        if #segment > 0 and prev then drawn[#drawn + 1] = {(prev[1] + cx) / 2, (prev[2] + cy) / 2} end
        drawn[#drawn + 1] = {cx, cy}
        local p = fmt_coord(cx) .. "," .. fmt_coord(cy)
        segment[#segment + 1] = p
        points[#points + 1] = p
      else
        flush()
      end
    end
    flush()
    local markers = s.markers
    if markers == nil then markers = #points <= MARKERS_UP_TO end
    local dots = markers and points or lone
    for _, p in ipairs(dots) do
      local x, y = p:match("([^,]+),(.+)")
      add('<circle cx="%s" cy="%s" r="2.5" fill="%s" stroke="none"/>', x, y, escape(s.color))
    end
    add('</g>')
  end

  -- legend: in the corner of the plot area that hides the fewest points
  if spec.legend ~= false then
    local longest = 0
    for _, s in ipairs(series) do longest = math.max(longest, utf8.len(s.name) or #s.name) end
    local lw, lh = 34 + longest * CHAR_WIDTH + 8, 8 + #series * 18
    local corners = {{left + pw - lw - 8, top + 8}, {left + 8, top + 8},
                     {left + pw - lw - 8, top + ph - lh - 8}, {left + 8, top + ph - lh - 8}}
    local best, best_hidden = corners[1], math.huge
    for _, c in ipairs(corners) do
      local hidden = 0
      for _, p in ipairs(drawn) do
        if p[1] >= c[1] - 4 and p[1] <= c[1] + lw + 4 and p[2] >= c[2] - 4 and p[2] <= c[2] + lh + 4 then
          hidden = hidden + 1
        end
      end
      if hidden < best_hidden then best, best_hidden = c, hidden end
    end
    local lx, ly = best[1], best[2]
    add('<g class="legend">')
    add('<rect x="%s" y="%s" width="%s" height="%d" fill="white" fill-opacity="0.85" stroke="#cccccc"/>',
        fmt_coord(lx), fmt_coord(ly), fmt_coord(lw), lh)
    for i, s in ipairs(series) do
      local cy = ly + 4 + (i - 1) * 18 + 9
      add('<line x1="%s" y1="%s" x2="%s" y2="%s" stroke="%s" stroke-width="2"%s/>', fmt_coord(lx + 8), fmt_coord(cy),
          fmt_coord(lx + 28), fmt_coord(cy), escape(s.color), s.dash and ' stroke-dasharray="6 4"' or "")
      add('<text x="%s" y="%s" fill="#333333">%s</text>', fmt_coord(lx + 34), fmt_coord(cy + 4), escape(s.name))
    end
    add('</g>')
  end
  return table.concat(o, "\n"), W, H
end

local function document(body, W, H)
  return table.concat({
    '<?xml version="1.0" encoding="UTF-8"?>',
    string.format('<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" '
                  .. 'font-family="sans-serif" font-size="%d">', W, H, W, H, FONT_SIZE),
    body,
    "</svg>",
    "",
  }, "\n")
end

-- An SVG document with one line chart. spec: series (required; each {name=, y=, x=, color=,
-- dash=, markers=}), title, xlabel, ylabel, width (640), height (400), xlim, ylim ({lo, hi}),
-- ylog, legend (false hides it).
function plot.line(spec)
  local body, W, H = render("line", spec, "c1")
  return document(body, W, H)
end

-- A document made by plot.line (or plot.grid) as grid cell i: its body, width and height, with
-- its clip-path ids prefixed by id so that they stay unique in the grid. Text in a document is
-- escaped, so the id patterns only match attributes.
local function from_document(svg, i, id)
  local W, H, body = svg:match('^<%?xml[^\n]*\n<svg [^\n]-width="(%d+)" height="(%d+)"[^\n]*>\n(.*)\n</svg>\n$')
  if not body then
    fail("grid", "chart %d: expected a chart spec or an SVG document from plot.line, got a string that is not one", i)
  end
  body = body:gsub('(id=")(c[c%d]*%-)', "%1" .. id .. "%2"):gsub("(url%(#)(c[c%d]*%-)", "%1" .. id .. "%2")
  return body, tonumber(W), tonumber(H)
end

-- Several charts in one SVG document, laid out row by row: each a chart spec (as plot.line
-- takes) or a document plot.line made. opts: columns (2), title.
function plot.grid(charts, opts)
  opts = opts or {}
  if type(charts) ~= "table" or #charts == 0 then fail("grid", "expected a non-empty array of chart tables") end
  local columns = opts.columns or 2
  if math.type(columns) ~= "integer" or columns < 1 then fail("grid", "columns must be a positive integer") end
  local parts, rendered = {}, {}
  local cell_w, cell_h = 0, 0
  for i, spec in ipairs(charts) do
    local body, W, H
    if type(spec) == "string" then
      body, W, H = from_document(spec, i, "c" .. i)
    else
      body, W, H = render("grid", spec, "c" .. i)
    end
    rendered[i] = {body = body, w = W, h = H}
    cell_w, cell_h = math.max(cell_w, W), math.max(cell_h, H)
  end
  local head = opts.title and 32 or 0
  local rows = (#charts + columns - 1) // columns
  local W, H = cell_w * math.min(columns, #charts), head + cell_h * rows
  if opts.title then
    parts[#parts + 1] = string.format('<rect width="%d" height="%d" fill="white"/>', W, head)
    parts[#parts + 1] = string.format('<text class="title" x="%s" y="22" text-anchor="middle" font-size="%d" '
                                      .. 'font-weight="bold">%s</text>', fmt_coord(W / 2), FONT_SIZE + 4, escape(opts.title))
  end
  for i, r in ipairs(rendered) do
    local col, row = (i - 1) % columns, (i - 1) // columns
    parts[#parts + 1] = string.format('<svg class="chart" x="%d" y="%d" width="%d" height="%d">',
                                      col * cell_w, head + row * cell_h, r.w, r.h)
    parts[#parts + 1] = r.body
    parts[#parts + 1] = "</svg>"
  end
  return document(table.concat(parts, "\n"), W, H)
end

-- Writes an SVG document (from plot.line or plot.grid) to path, replacing the file only once
-- the new one is complete. Returns path.
function plot.save(path, svg)
  if type(path) ~= "string" then fail("save", "path must be a string, got %s", type(path)) end
  if type(svg) ~= "string" or not svg:find("^<%?xml") then
    fail("save", "expected an SVG document from plot.line or plot.grid, got %s", type(svg))
  end
  local tmp = path .. ".tmp"
  local f, err = io.open(tmp, "wb")
  if not f then fail("save", "cannot write %s: %s", path, err) end
  local ok, werr = f:write(svg)
  local closed, cerr = f:close()
  if not ok or not closed then
    os.remove(tmp)
    fail("save", "cannot write %s: %s", path, werr or cerr)
  end
  local renamed, rerr = os.rename(tmp, path)
  if not renamed then
    os.remove(tmp)
    fail("save", "cannot write %s: %s", path, rerr)
  end
  return path
end

return plot
