-- netcl.ssl.views: a small augmentation that makes one random view of a batch of images
-- [N, C, H, W] on the batch's device, from existing ops, with its own draws per sample: a random
-- resized crop (nearest neighbour; scale and aspect drawn per sample) with a horizontal flip,
-- both as one gather, then a brightness/contrast jitter and Gaussian noise. ssl.Trainer takes any
-- callable view maker as `augment`; this one is its default (docs/ssl.md).
local nc = require "netcl"
local class = require "netcl.class"

local M = {}

local DEFAULTS = {min_scale = 0.35, flip = true, contrast = 0.4, brightness = 0.4, noise = 0.1}
local KEYS = "{brightness=, contrast=, flip=, min_scale=, noise=}"

--- views.Views{min_scale=0.35, flip=true, contrast=0.4, brightness=0.4, noise=0.1}: a callable;
-- v(x) -> a new Tensor of x's shape. Each sample: a crop covering a fraction in
-- [min_scale, 1] of each side (drawn per side), anywhere in the image, resized back to H x W;
-- flipped left-right with probability 1/2 (flip=true); x * a + b with a in [1 - contrast,
-- 1 + contrast] and b in [-brightness, brightness]; plus noise * N(0, 1) per pixel. Draws come
-- from the state's generator (nc.manual_seed).
local Views = class("ssl.views.Views")
M.Views = Views

function Views:init(opts)
  opts = opts or {}
  if type(opts) ~= "table" then error("ssl.views.Views: options must be a table, got " .. type(opts), 3) end
  for k, v in pairs(opts) do
    if DEFAULTS[k] == nil then
      error(string.format("ssl.views.Views: unknown option '%s' (accepted: %s)", tostring(k), KEYS), 3)
    end
    if type(v) ~= type(DEFAULTS[k]) then
      error(string.format("ssl.views.Views: option '%s' must be a %s, got %s", k, type(DEFAULTS[k]), type(v)), 3)
    end
  end
  for k, d in pairs(DEFAULTS) do
    if opts[k] == nil then self[k] = d else self[k] = opts[k] end
  end
  if not (self.min_scale > 0 and self.min_scale <= 1) then error("ssl.views.Views: min_scale must be in (0, 1]", 3) end
  for _, k in ipairs({"contrast", "brightness", "noise"}) do
    if self[k] < 0 then error("ssl.views.Views: " .. k .. " must not be negative", 3) end
  end
end

-- Source positions along one side of length L for each sample: floor(o + (i + 0.5) s) with
-- s = L * scale / L per output pixel, o the crop's start; [N, L] float.
local function positions(n, len, min_scale, dev)
  local scale = nc.rand({n, 1}, {device = dev}) * (1 - min_scale) + min_scale
  local start = nc.rand({n, 1}, {device = dev}) * (1 - scale) * len
  local i = nc.arange(len, {dtype = "float32", device = dev}):view({1, len}) + 0.5
  return (start + i * scale):floor():clamp(0, len - 1)
end

function Views:__call(x)
  if not nc.is_tensor(x) or #x.shape ~= 4 then
    error("ssl.views.Views: expected a batch of images [N, C, H, W] (a Tensor)", 2)
  end
  local n, c, h, w = x.shape[1], x.shape[2], x.shape[3], x.shape[4]
  local dev = x.device
  if x.dtype ~= "float32" and x.dtype ~= "float64" then x = x:to("float32") end
  local rows = positions(n, h, self.min_scale, dev) -- [N, H]
  local cols = positions(n, w, self.min_scale, dev) -- [N, W]
  if self.flip then
    local f = nc.rand({n, 1}, {device = dev}):lt(0.5)
    cols = nc.where(f, (w - 1) - cols, cols)
  end
  local idx = (rows:view({n, h, 1}) * w + cols:view({n, 1, w})):to("int64"):view({n, 1, h * w})
  local out = x:reshape({n, c, h * w}):gather(3, idx:expand({n, c, h * w}):contiguous()):view({n, c, h, w})
  if self.contrast > 0 or self.brightness > 0 then
    local a = nc.rand({n, 1, 1, 1}, {device = dev, dtype = out.dtype}) * (2 * self.contrast) + (1 - self.contrast)
    local b = nc.rand({n, 1, 1, 1}, {device = dev, dtype = out.dtype}) * (2 * self.brightness) - self.brightness
    out = out * a + b
  end
  if self.noise > 0 then out = out + nc.randn(out.shape, {device = dev, dtype = out.dtype}) * self.noise end
  return out
end

--- views.default(opts) -> the view maker ssl.Trainer uses when it is given no augment.
function M.default(opts) return Views(opts) end

return M
