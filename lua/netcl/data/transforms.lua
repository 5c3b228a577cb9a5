-- netcl.data.transforms: augmentations that run on the device, on whole batches [N, C, H, W]
-- (the DataLoader's transform= option). The random ones draw each sample's parameters on the
-- host from its own Philox stream (netcl/shuffle.h: key = the transform's seed, counter = {draw,
-- sample, call}), so a seed gives the same draws on every backend and whatever the DataLoader's
-- worker count; the pixels are computed by the op-table kernels resized_crop, adjust_color and
-- gaussian_blur (docs/data.md).
local nc = require "netcl"
local class = require "netcl.class"

local T = {}
local ops = nc.nn_ops

local function transform_class(name)
  local C = class("netcl.data.transforms." .. name)
  C.__call = function(self, x) return self:forward(x) end
  T[name] = C
  return C
end

-- Option checks raise at the user's line: level 4 from these helpers (helper <- init <- class
-- <- user).
local function fail(fname, msg) error(string.format("netcl.data.transforms.%s: %s", fname, msg), 4) end

local function check_opts(fname, opts, keys)
  if opts == nil then return {} end
  if type(opts) ~= "table" then fail(fname, "options must be a table, got " .. type(opts)) end
  for k in pairs(opts) do
    if not keys[k] then
      local names = {}
      for n in pairs(keys) do names[#names + 1] = n .. "=" end
      table.sort(names)
      fail(fname, string.format("unknown option '%s' (accepted: {%s})", tostring(k), table.concat(names, ", ")))
    end
  end
  return opts
end

local function check_size(fname, size)
  if math.type(size) == "integer" and size >= 1 then return size, size end
  if type(size) == "table" and math.type(size[1]) == "integer" and math.type(size[2]) == "integer" and size[1] >= 1
      and size[2] >= 1 and #size == 2 then
    return size[1], size[2]
  end
  fail(fname, "size must be an integer >= 1 or {height, width}, got " .. tostring(size))
end

local function check_prob(fname, p)
  if type(p) ~= "number" or not (p >= 0 and p <= 1) then fail(fname, "p must be a number in [0, 1], got " .. tostring(p)) end
  return p
end

local function check_seed(fname, seed)
  if seed == nil then return nc._data.next_seed() end -- nc.manual_seed fixes it
  if math.type(seed) ~= "integer" then fail(fname, "seed must be an integer, got " .. tostring(seed)) end
  return seed
end

-- Images the kernels take: a float Tensor [N, C, H, W].
local function check_images(fname, x, channels)
  if not nc.is_tensor(x) then error(string.format("netcl.data.transforms.%s: expected a Tensor, got %s", fname, type(x)), 3) end
  if x.ndim ~= 4 then
    error(string.format("netcl.data.transforms.%s: expected a batch of images [N, C, H, W], got %d dims", fname, x.ndim), 3)
  end
  if x.dtype ~= "float32" and x.dtype ~= "float64" then
    error(string.format("netcl.data.transforms.%s: expected float images, got %s (put T.ToFloat() first)", fname,
      x.dtype), 3)
  end
  if channels and x.shape[2] ~= channels then
    error(string.format("netcl.data.transforms.%s: expected %d channels, got %d", fname, channels, x.shape[2]), 3)
  end
end

-- The next call's draws: k uniforms per sample.
local function draws(self, n, k)
  self.calls = self.calls + 1
  return nc._data.uniforms(self.seed, self.calls, n, k)
end

local function params(values, n, cols, x)
  return nc.tensor(values, {dtype = x.dtype, device = x.device}):view(cols > 0 and {n, cols} or {n})
end

local function round(v) return math.floor(v + 0.5) end

--- T.ToFloat(): uint8 images to float32 in [0, 1] (divided by 255); float images unchanged.
local ToFloat = transform_class("ToFloat")
function ToFloat:forward(x)
  if not nc.is_tensor(x) then error("netcl.data.transforms.ToFloat: expected a Tensor, got " .. type(x), 2) end
  if x.dtype == "float32" or x.dtype == "float64" then return x end
  if x.dtype ~= "uint8" then
    error("netcl.data.transforms.ToFloat: expected uint8 or float images, got " .. x.dtype, 2)
  end
  return x:to("float32") / 255
end

--- T.Normalize(mean, std): (x - mean[c]) / std[c] per channel (numbers: every channel).
local Normalize = transform_class("Normalize")
function Normalize:init(mean, std)
  local function list(v, what)
    if type(v) == "number" then return {v} end
    if type(v) ~= "table" or #v == 0 then fail("Normalize", what .. " must be a number or a list of numbers") end
    for i = 1, #v do
      if type(v[i]) ~= "number" then fail("Normalize", what .. " must be a number or a list of numbers") end
    end
    return v
  end
  self.mean, self.std = list(mean, "mean"), list(std, "std")
  if #self.mean ~= #self.std and #self.mean ~= 1 and #self.std ~= 1 then
    fail("Normalize", string.format("mean has %d values and std %d", #self.mean, #self.std))
  end
  for _, s in ipairs(self.std) do if s == 0 then fail("Normalize", "std must not be 0") end end
  self.cache = {}
end
function Normalize:forward(x)
  check_images("Normalize", x)
  local c = x.shape[2]
  local key = x.device.spec .. x.dtype .. c
  local mt = self.cache[key]
  if not mt then
    local m, s = {}, {}
    for i = 1, c do
      local mi, si = self.mean[#self.mean == 1 and 1 or i], self.std[#self.std == 1 and 1 or i]
      if not mi or not si then
        error(string.format("netcl.data.transforms.Normalize: %d channels, but mean and std have %d and %d values", c,
          #self.mean, #self.std), 2)
      end
      m[i], s[i] = mi, si
    end
    mt = {nc.tensor(m, {dtype = x.dtype, device = x.device}):view({1, c, 1, 1}),
          nc.tensor(s, {dtype = x.dtype, device = x.device}):view({1, c, 1, 1})}
    self.cache[key] = mt
  end
  return (x - mt[1]) / mt[2]
end

-- Crops: boxes(x) -> {top, left, height, width, flip} per sample (flip 0), and the output size.
-- Compose hands a following RandomHorizontalFlip's flags to the same kernel call.

--- T.RandomCrop(size, {padding=0, fill=0, seed=}): a size crop at a uniform position of the
-- image padded by padding pixels of fill on every side.
local RandomCrop = transform_class("RandomCrop")
function RandomCrop:init(size, opts)
  opts = check_opts("RandomCrop", opts, {padding = true, fill = true, seed = true})
  self.height, self.width = check_size("RandomCrop", size)
  self.padding = opts.padding or 0
  if math.type(self.padding) ~= "integer" or self.padding < 0 then
    fail("RandomCrop", "padding must be an integer >= 0, got " .. tostring(opts.padding))
  end
  self.fill = opts.fill or 0
  if type(self.fill) ~= "number" then fail("RandomCrop", "fill must be a number, got " .. type(opts.fill)) end
  self.seed, self.calls = check_seed("RandomCrop", opts.seed), 0
end
function RandomCrop:boxes(x)
  check_images("RandomCrop", x)
  local n, h, w, p = x.shape[1], x.shape[3], x.shape[4], self.padding
  if h + 2 * p < self.height or w + 2 * p < self.width then
    error(string.format("netcl.data.transforms.RandomCrop: a %dx%d crop does not fit %dx%d images padded by %d",
      self.height, self.width, h, w, p), 3)
  end
  local u, b = draws(self, n, 2), {}
  for j = 0, n - 1 do
    local top = math.floor(u[2 * j + 1] * (h + 2 * p - self.height + 1)) - p
    local left = math.floor(u[2 * j + 2] * (w + 2 * p - self.width + 1)) - p
    b[#b + 1], b[#b + 2], b[#b + 3], b[#b + 4], b[#b + 5] = top, left, self.height, self.width, 0
  end
  return b, self.height, self.width, self.fill
end

--- T.RandomResizedCrop(size, {scale={0.08, 1}, ratio={3/4, 4/3}, seed=}): torchvision's box
-- (area a uniform share of the image's in scale, log-uniform aspect ratio in ratio, 10 tries,
-- then the central crop), resized bilinearly to size.
local RandomResizedCrop = transform_class("RandomResizedCrop")
function RandomResizedCrop:init(size, opts)
  opts = check_opts("RandomResizedCrop", opts, {scale = true, ratio = true, seed = true})
  self.height, self.width = check_size("RandomResizedCrop", size)
  local function range(v, def, what)
    v = v or def
    if type(v) ~= "table" or type(v[1]) ~= "number" or type(v[2]) ~= "number" or v[1] > v[2] or v[1] <= 0 then
      fail("RandomResizedCrop", what .. " must be {lo, hi} with 0 < lo <= hi")
    end
    return v
  end
  self.scale = range(opts.scale, {0.08, 1}, "scale")
  self.ratio = range(opts.ratio, {3 / 4, 4 / 3}, "ratio")
  self.seed, self.calls = check_seed("RandomResizedCrop", opts.seed), 0
end
function RandomResizedCrop:boxes(x)
  check_images("RandomResizedCrop", x)
  local n, h, w = x.shape[1], x.shape[3], x.shape[4]
  local area, lr0, lr1 = h * w, math.log(self.ratio[1]), math.log(self.ratio[2])
  local u, b = draws(self, n, 40), {}
  for j = 0, n - 1 do
    local base, top, left, bh, bw = 40 * j
    for t = 0, 9 do
      local d = base + 4 * t
      local target = area * (self.scale[1] + (self.scale[2] - self.scale[1]) * u[d + 1])
      local aspect = math.exp(lr0 + (lr1 - lr0) * u[d + 2])
      local cw, ch = round(math.sqrt(target * aspect)), round(math.sqrt(target / aspect))
      if cw > 0 and cw <= w and ch > 0 and ch <= h then
        top, left = math.floor(u[d + 3] * (h - ch + 1)), math.floor(u[d + 4] * (w - cw + 1))
        bh, bw = ch, cw
        break
      end
    end
    if not top then -- the central crop of the nearest allowed ratio
      local r = w / h
      if r < self.ratio[1] then
        bw, bh = w, round(w / self.ratio[1])
      elseif r > self.ratio[2] then
        bh, bw = h, round(h * self.ratio[2])
      else
        bw, bh = w, h
      end
      top, left = (h - bh) // 2, (w - bw) // 2
    end
    b[#b + 1], b[#b + 2], b[#b + 3], b[#b + 4], b[#b + 5] = top, left, bh, bw, 0
  end
  return b, self.height, self.width, 0
end

local function crop_forward(self, x)
  local b, oh, ow, fill = self:boxes(x)
  return ops.resized_crop(x, params(b, x.shape[1], 5, x), oh, ow, {fill = fill})
end
RandomCrop.forward, RandomResizedCrop.forward = crop_forward, crop_forward

--- T.RandomHorizontalFlip(p=0.5): each image mirrored left-right with probability p.
local RandomHorizontalFlip = transform_class("RandomHorizontalFlip")
function RandomHorizontalFlip:init(p, opts)
  opts = check_opts("RandomHorizontalFlip", opts, {seed = true})
  self.p = check_prob("RandomHorizontalFlip", p == nil and 0.5 or p)
  self.seed, self.calls = check_seed("RandomHorizontalFlip", opts.seed), 0
end
function RandomHorizontalFlip:flags(n)
  local u, f = draws(self, n, 1), {}
  for j = 1, n do f[j] = u[j] < self.p and 1 or 0 end
  return f
end
function RandomHorizontalFlip:forward(x)
  check_images("RandomHorizontalFlip", x)
  local n, h, w = x.shape[1], x.shape[3], x.shape[4]
  local f, b = self:flags(n), {}
  for j = 1, n do b[#b + 1], b[#b + 2], b[#b + 3], b[#b + 4], b[#b + 5] = 0, 0, h, w, f[j] end
  return ops.resized_crop(x, params(b, n, 5, x), h, w)
end

--- T.ColorJitter{brightness=, contrast=, saturation=, hue=, seed=}: per image, factors drawn
-- uniformly (a number v means [max(0, 1 - v), 1 + v]; hue h means [-h, h], h <= 0.5; {lo, hi}
-- gives the range), applied in a random order, as torchvision's ColorJitter. RGB images.
local ColorJitter = transform_class("ColorJitter")
function ColorJitter:init(opts)
  opts = check_opts("ColorJitter", opts, {brightness = true, contrast = true, saturation = true, hue = true, seed = true})
  local function range(name, center, bound)
    local v = opts[name]
    if v == nil then return nil end
    local lo, hi
    if type(v) == "number" then
      if v < 0 then fail("ColorJitter", name .. " must be >= 0, got " .. v) end
      lo, hi = center - v, center + v
      if center == 1 then lo = math.max(0, lo) end
    elseif type(v) == "table" and type(v[1]) == "number" and type(v[2]) == "number" and v[1] <= v[2] then
      lo, hi = v[1], v[2]
    else
      fail("ColorJitter", name .. " must be a number or {lo, hi}")
    end
    if bound and (lo < -bound or hi > bound) then fail("ColorJitter", name .. " must lie in [-0.5, 0.5]") end
    if not bound and lo < 0 then fail("ColorJitter", name .. " factors must be >= 0") end
    return {lo, hi}
  end
  self.ranges = {range("brightness", 1), range("contrast", 1), range("saturation", 1), range("hue", 0, 0.5)}
  self.seed, self.calls = check_seed("ColorJitter", opts.seed), 0
end
function ColorJitter:forward(x)
  check_images("ColorJitter", x, 3)
  local n = x.shape[1]
  local u, f = draws(self, n, 7), {}
  local identity = {1, 1, 1, 0}
  for j = 0, n - 1 do
    local d = 7 * j
    -- draws 1..4: the factors; 5..7: the order, a Fisher-Yates shuffle of the four steps
    local perm = {0, 1, 2, 3}
    for i = 4, 2, -1 do
      local k = math.floor(u[d + 9 - i] * i) + 1
      perm[i], perm[k] = perm[k], perm[i]
    end
    for s = 1, 4 do
      local r = self.ranges[s]
      f[#f + 1] = r and r[1] + (r[2] - r[1]) * u[d + s] or identity[s]
    end
    f[#f + 1] = perm[1] + 4 * perm[2] + 16 * perm[3] + 64 * perm[4]
    f[#f + 1] = 0
  end
  return ops.adjust_color(x, params(f, n, 6, x))
end

--- T.RandomGrayscale(p=0.1): each RGB image turned to gray (in all three channels) with
-- probability p.
local RandomGrayscale = transform_class("RandomGrayscale")
function RandomGrayscale:init(p, opts)
  opts = check_opts("RandomGrayscale", opts, {seed = true})
  self.p = check_prob("RandomGrayscale", p == nil and 0.1 or p)
  self.seed, self.calls = check_seed("RandomGrayscale", opts.seed), 0
end
function RandomGrayscale:forward(x)
  check_images("RandomGrayscale", x, 3)
  local n = x.shape[1]
  local u, f = draws(self, n, 1), {}
  for j = 1, n do
    f[#f + 1], f[#f + 2], f[#f + 3], f[#f + 4], f[#f + 5], f[#f + 6] = 1, 1, 1, 0, 0, u[j] < self.p and 1 or 0
  end
  return ops.adjust_color(x, params(f, n, 6, x))
end

--- T.GaussianBlur(kernel_size, {sigma={0.1, 2}, seed=}): each image blurred with a Gaussian of
-- odd size kernel_size and a sigma drawn uniformly from the range (a number: fixed), borders
-- reflected.
local GaussianBlur = transform_class("GaussianBlur")
function GaussianBlur:init(k, opts)
  opts = check_opts("GaussianBlur", opts, {sigma = true, seed = true})
  if math.type(k) ~= "integer" or k < 1 or k % 2 == 0 or k > 63 then
    fail("GaussianBlur", "kernel_size must be an odd integer in 1..63, got " .. tostring(k))
  end
  self.k = k
  local s = opts.sigma or {0.1, 2}
  if type(s) == "number" then s = {s, s} end
  if type(s) ~= "table" or type(s[1]) ~= "number" or type(s[2]) ~= "number" or not (s[1] > 0) or s[1] > s[2] then
    fail("GaussianBlur", "sigma must be a number > 0 or {lo, hi} with 0 < lo <= hi")
  end
  self.sigma = s
  self.seed, self.calls = check_seed("GaussianBlur", opts.seed), 0
end
function GaussianBlur:forward(x)
  check_images("GaussianBlur", x)
  local n = x.shape[1]
  local u, s = draws(self, n, 1), {}
  for j = 1, n do s[j] = self.sigma[1] + (self.sigma[2] - self.sigma[1]) * u[j] end
  return ops.gaussian_blur(x, params(s, n, 0, x), self.k)
end

--- T.Compose{t1, t2, ...}: each transform in turn. A crop followed by RandomHorizontalFlip runs
-- as one kernel call (the same draws and pixels as two).
local Compose = transform_class("Compose")
function Compose:init(list)
  if type(list) ~= "table" then fail("Compose", "expected a list of transforms, got " .. type(list)) end
  for i, t in ipairs(list) do
    if not (type(t) == "function" or (getmetatable(t) or {}).__call) then
      fail("Compose", string.format("item %d is a %s, not a transform", i, type(t)))
    end
  end
  self.list = list
end
function Compose:forward(x)
  local list, i = self.list, 1
  while i <= #list do
    local t, nxt = list[i], list[i + 1]
    if type(t) == "table" and t.boxes and getmetatable(nxt) == RandomHorizontalFlip then
      local b, oh, ow, fill = t:boxes(x)
      local n = x.shape[1]
      local f = nxt:flags(n)
      for j = 1, n do b[5 * j] = f[j] end
      x = ops.resized_crop(x, params(b, n, 5, x), oh, ow, {fill = fill})
      i = i + 2
    else
      x = t(x)
      i = i + 1
    end
  end
  return x
end

return T
