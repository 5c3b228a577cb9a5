-- netcl.data.transforms and the image ops under them (resized_crop, adjust_color, gaussian_blur)
-- on the device under test: values against independent float64 references written here from the
-- published formulas (torch's bilinear interpolation, torchvision's color adjustments and
-- Gaussian blur), seeded determinism, the CPU backend against the device within 1e-5, crop and
-- flip fused by Compose, errors, and torchvision itself where python3-torchvision is installed.
local lu = require "luaunit"
local nc = require "netcl"
local data = require "netcl.data"
local H = require "helpers"

local T = data.transforms
local ops = nc.nn_ops
local dev = H.device()
local cpu = nc.device("cpu")

local function rand_images(shape, seed)
  nc.manual_seed(seed)
  return nc.rand(shape, {device = cpu})
end

local function max_diff(a, b)
  return (a:to(cpu):to("float64") - b:to(cpu):to("float64")):abs():max():item()
end

-- ---- float64 references -----------------------------------------------------------------------

local function ref_resized_crop(x, boxes, oh, ow, fill)
  local xs, out = x:to(cpu):to("float64"):tolist(), {}
  local function src(o, n, m)
    local s = math.max((o + 0.5) * n / m - 0.5, 0)
    local i = math.min(math.floor(s), n - 1)
    return i, i < n - 1 and i + 1 or i, s - i
  end
  for j, img in ipairs(xs) do
    local top, left, bh, bw, flip = table.unpack(boxes[j])
    out[j] = {}
    for c, plane in ipairs(img) do
      local h, w = #plane, #plane[1]
      local function at(r, q)
        if r < 0 or r >= h or q < 0 or q >= w then return fill end
        return plane[r + 1][q + 1]
      end
      out[j][c] = {}
      for oy = 0, oh - 1 do
        local row = {}
        for ox0 = 0, ow - 1 do
          local ox = flip ~= 0 and ow - 1 - ox0 or ox0
          local y0, y1, ly = src(oy, bh, oh)
          local x0, x1, lx = src(ox, bw, ow)
          row[ox0 + 1] = (1 - ly) * ((1 - lx) * at(top + y0, left + x0) + lx * at(top + y0, left + x1))
            + ly * ((1 - lx) * at(top + y1, left + x0) + lx * at(top + y1, left + x1))
        end
        out[j][c][oy + 1] = row
      end
    end
  end
  return nc.tensor(out, {dtype = "float64", device = cpu})
end

local function clamp(v) return math.min(1, math.max(0, v)) end
local function gray(r, g, b) return 0.2989 * r + 0.587 * g + 0.114 * b end

-- torchvision.transforms.functional: _rgb2hsv, (h + hue) % 1, _hsv2rgb.
local function ref_hue(r, g, b, hue)
  local maxc, minc = math.max(r, g, b), math.min(r, g, b)
  local eqc, cr = maxc == minc, maxc - minc
  local s = cr / (eqc and 1 or maxc)
  local d = eqc and 1 or cr
  local rc, gc, bc = (maxc - r) / d, (maxc - g) / d, (maxc - b) / d
  local h
  if maxc == r then h = bc - gc elseif maxc == g then h = 2 + rc - bc else h = 4 + gc - rc end
  h = math.fmod(h / 6 + 1, 1)
  h = (h + hue) % 1
  local i = math.floor(h * 6)
  local f = h * 6 - i
  i = i % 6
  local p, q, t = clamp(maxc * (1 - s)), clamp(maxc * (1 - s * f)), clamp(maxc * (1 - s * (1 - f)))
  local v = maxc
  local rgb = {{v, t, p}, {q, v, p}, {p, v, t}, {p, q, v}, {t, p, v}, {v, p, q}}
  return table.unpack(rgb[i + 1])
end

-- factors per sample: {brightness, contrast, saturation, hue, order, grayscale}
local function ref_adjust(x, factors)
  local xs = x:to(cpu):to("float64"):tolist()
  for j, img in ipairs(xs) do
    local f = factors[j]
    local h, w = #img[1], #img[1][1]
    for step = 0, 3 do
      local op = (f[5] >> (2 * step)) & 3
      local mean = 0
      if op == 1 then
        for y = 1, h do for q = 1, w do mean = mean + gray(img[1][y][q], img[2][y][q], img[3][y][q]) end end
        mean = mean / (h * w)
      end
      for y = 1, h do
        for q = 1, w do
          local r, g, b = img[1][y][q], img[2][y][q], img[3][y][q]
          if op == 0 and f[1] ~= 1 then
            r, g, b = clamp(r * f[1]), clamp(g * f[1]), clamp(b * f[1])
          elseif op == 1 and f[2] ~= 1 then
            local c = f[2]
            r, g, b = clamp(c * r + (1 - c) * mean), clamp(c * g + (1 - c) * mean), clamp(c * b + (1 - c) * mean)
          elseif op == 2 and f[3] ~= 1 then
            local s, l = f[3], gray(r, g, b)
            r, g, b = clamp(s * r + (1 - s) * l), clamp(s * g + (1 - s) * l), clamp(s * b + (1 - s) * l)
          elseif op == 3 and f[4] ~= 0 then
            r, g, b = ref_hue(r, g, b, f[4])
          end
          img[1][y][q], img[2][y][q], img[3][y][q] = r, g, b
        end
      end
    end
    if f[6] ~= 0 then
      for y = 1, h do
        for q = 1, w do
          local l = gray(img[1][y][q], img[2][y][q], img[3][y][q])
          img[1][y][q], img[2][y][q], img[3][y][q] = l, l, l
        end
      end
    end
  end
  return nc.tensor(xs, {dtype = "float64", device = cpu})
end

-- torchvision's gaussian_blur: 1-d pdf normalized, 2-d kernel = outer product, reflect padding.
local function ref_blur(x, sigmas, k)
  local xs, out = x:to(cpu):to("float64"):tolist(), {}
  local hk = k // 2
  for j, img in ipairs(xs) do
    local wt, norm = {}, 0
    for i = 0, k - 1 do
      wt[i] = math.exp(-0.5 * ((i - hk) / sigmas[j]) ^ 2)
      norm = norm + wt[i]
    end
    out[j] = {}
    for c, plane in ipairs(img) do
      local h, w = #plane, #plane[1]
      local function refl(i, n)
        if i < 0 then i = -i end
        if i >= n then i = 2 * n - 2 - i end
        return i
      end
      out[j][c] = {}
      for y = 0, h - 1 do
        local row = {}
        for q = 0, w - 1 do
          local acc = 0
          for a = 0, k - 1 do
            for b = 0, k - 1 do
              acc = acc + wt[a] * wt[b] / (norm * norm) * plane[refl(y + a - hk, h) + 1][refl(q + b - hk, w) + 1]
            end
          end
          row[q + 1] = acc
        end
        out[j][c][y + 1] = row
      end
    end
  end
  return nc.tensor(out, {dtype = "float64", device = cpu})
end

local function on(x, params) return x:to(dev), nc.tensor(params, {dtype = x.dtype, device = dev}) end

TestImageOps = {}

function TestImageOps:test_resized_crop_against_the_reference()
  local x = rand_images({4, 3, 7, 9}, 1)
  -- inside, partly outside (fill), upscaled, downscaled, flipped
  local boxes = {{0, 0, 7, 9, 0}, {-2, 3, 5, 8, 1}, {1, 1, 3, 4, 0}, {2, -1, 5, 10, 1}}
  for _, size in ipairs({{7, 9}, {12, 5}, {3, 16}}) do
    local xd, bd = on(x, boxes)
    local got = ops.resized_crop(xd, bd, size[1], size[2], {fill = 0.5})
    lu.assertEquals(got.shape, {4, 3, size[1], size[2]})
    lu.assertTrue(max_diff(got, ref_resized_crop(x, boxes, size[1], size[2], 0.5)) < 1e-5)
  end
  -- a same-size box is an exact copy; a flip exactly mirrors
  local xd, bd = on(x, {{0, 0, 7, 9, 0}, {0, 0, 7, 9, 1}, {0, 0, 7, 9, 0}, {0, 0, 7, 9, 1}})
  local y = ops.resized_crop(xd, bd, 7, 9)
  lu.assertEquals(y[1]:to(cpu):tolist(), x[1]:tolist())
  local row, flipped = x[2][1][1]:tolist(), y[2][1][1]:to(cpu):tolist()
  for i = 1, 9 do lu.assertEquals(flipped[i], row[10 - i]) end
end

function TestImageOps:test_adjust_color_against_the_reference()
  local x = rand_images({5, 3, 6, 5}, 2)
  local id = 0 + 4 * 1 + 16 * 2 + 64 * 3
  local factors = {
    {1.3, 1, 1, 0, id, 0}, {1, 0.6, 1, 0, id, 0}, {1, 1, 1.7, 0, id, 0}, {1, 1, 1, -0.23, id, 0},
    {0.8, 1.25, 0.4, 0.31, 3 + 4 * 1 + 16 * 0 + 64 * 2, 1},
  }
  local xd, fd = on(x, factors)
  lu.assertTrue(max_diff(ops.adjust_color(xd, fd), ref_adjust(x, factors)) < 1e-5)
  -- identity factors change nothing; grayscale puts one value in all three channels
  xd, fd = on(x, {{1, 1, 1, 0, id, 0}, {1, 1, 1, 0, id, 1}, {1, 1, 1, 0, id, 0}, {1, 1, 1, 0, id, 0}, {1, 1, 1, 0, id, 0}})
  local y = ops.adjust_color(xd, fd):to(cpu)
  lu.assertEquals(y[1]:tolist(), x[1]:tolist())
  lu.assertEquals(y[2][1]:tolist(), y[2][3]:tolist())
end

function TestImageOps:test_gaussian_blur_against_the_reference()
  local x = rand_images({3, 2, 8, 6}, 3)
  for _, k in ipairs({1, 3, 7}) do
    local sig = {0.3, 1.1, 2.5}
    local xd, sd = on(x, sig)
    lu.assertTrue(max_diff(ops.gaussian_blur(xd, sd, k), ref_blur(x, sig, k)) < 1e-5, "k = " .. k)
  end
  -- a constant image stays constant
  local c = nc.full({1, 1, 5, 5}, 0.25, {device = dev})
  lu.assertTrue(max_diff(ops.gaussian_blur(c, nc.tensor({1.5}, {device = dev}), 5), c) < 1e-6)
end

function TestImageOps:test_errors()
  local x = nc.zeros({2, 3, 4, 4}, {device = dev})
  H.assert_error(function() ops.resized_crop(x:to("uint8"), nc.zeros({2, 5}, {device = dev}), 2, 2) end,
    "expected float32 or float64 images, got uint8")
  H.assert_error(function() ops.resized_crop(x, nc.zeros({3, 5}, {device = dev}), 2, 2) end, "boxes must have shape [2, 5]")
  H.assert_error(function() ops.adjust_color(x:narrow(2, 1, 2), nc.zeros({2, 6}, {device = dev})) end,
    "expected RGB images (3 channels), got 2")
  H.assert_error(function() ops.gaussian_blur(x, nc.ones({2}, {device = dev}), 4) end, "kernel_size must be odd")
  H.assert_error(function() ops.gaussian_blur(x, nc.ones({2}, {device = dev}), 9) end, "too large for 4 x 4 images")
end

TestTransforms = {}

local function pipeline(seed)
  return T.Compose{T.RandomCrop(8, {padding = 2, seed = seed}), T.RandomHorizontalFlip(0.5, {seed = seed + 1}),
                   T.ColorJitter{brightness = 0.4, contrast = 0.4, saturation = 0.4, hue = 0.1, seed = seed + 2},
                   T.RandomGrayscale(0.3, {seed = seed + 3}), T.GaussianBlur(3, {seed = seed + 4}),
                   T.RandomResizedCrop(6, {seed = seed + 5}), T.Normalize({0.5, 0.4, 0.3}, {0.2, 0.25, 0.3})}
end

function TestTransforms:test_seeded_and_the_same_on_every_backend()
  local x = rand_images({16, 3, 8, 8}, 4)
  local a, b, c = pipeline(10), pipeline(10), pipeline(20)
  for call = 1, 2 do
    local ya, yb, yc = a(x:to(dev)), b(x:to(dev)), c(x:to(dev))
    lu.assertEquals(ya.shape, {16, 3, 6, 6})
    lu.assertEquals(ya:to(cpu):tolist(), yb:to(cpu):tolist(), "same seed, call " .. call)
    lu.assertTrue(max_diff(ya, yc) > 0.1, "another seed")
    if dev ~= cpu then
      local ref = pipeline(10)
      if call == 2 then ref(x) end
      lu.assertTrue(max_diff(ya, ref(x)) < 1e-5, "CPU backend against " .. dev.spec)
    end
  end
  -- nc.manual_seed fixes transforms made without a seed
  nc.manual_seed(5)
  local p = T.RandomHorizontalFlip()
  nc.manual_seed(5)
  local q = T.RandomHorizontalFlip()
  lu.assertEquals(p(x):tolist(), q(x):tolist())
end

function TestTransforms:test_crops_and_flips()
  local x = rand_images({6, 3, 5, 5}, 5)
  local xs = x:tolist()
  -- each output is a window of the zero-padded image at some offset in [-2, 2]
  local y = T.RandomCrop(5, {padding = 2, seed = 1})(x:to(dev)):to(cpu):tolist()
  local offsets = {}
  for j = 1, 6 do
    local found
    for dy = -2, 2 do
      for dx = -2, 2 do
        local ok = true
        for c = 1, 3 do
          for r = 1, 5 do
            for q = 1, 5 do
              local sr, sq = r + dy, q + dx
              local v = (sr >= 1 and sr <= 5 and sq >= 1 and sq <= 5) and xs[j][c][sr][sq] or 0
              ok = ok and y[j][c][r][q] == v
            end
          end
        end
        if ok then found = dy * 5 + dx end
      end
    end
    lu.assertNotNil(found, "sample " .. j .. " is no window of the padded image")
    offsets[found] = true
  end
  local distinct = 0
  for _ in pairs(offsets) do distinct = distinct + 1 end
  lu.assertTrue(distinct >= 3)
  -- flips: p = 1 mirrors every image, p = 0 none
  local f = T.RandomHorizontalFlip(1)(x:to(dev)):to(cpu):tolist()
  for i = 1, 5 do lu.assertEquals(f[3][2][4][i], xs[3][2][4][6 - i]) end
  lu.assertEquals(T.RandomHorizontalFlip(0)(x:to(dev)):to(cpu):tolist(), xs)
  -- a full-image box of ratio 1 is the image itself
  lu.assertEquals(T.RandomResizedCrop(5, {scale = {1, 1}, ratio = {1, 1}})(x:to(dev)):to(cpu):tolist(), xs)
  -- Compose runs a crop and a flip in one call, with the same result as two
  local fused = T.Compose{T.RandomCrop(4, {padding = 1, seed = 3}), T.RandomHorizontalFlip(0.5, {seed = 4})}
  local crop, flip = T.RandomCrop(4, {padding = 1, seed = 3}), T.RandomHorizontalFlip(0.5, {seed = 4})
  lu.assertEquals(fused(x:to(dev)):to(cpu):tolist(), flip(crop(x:to(dev))):to(cpu):tolist())
end

function TestTransforms:test_to_float_normalize_and_errors()
  local u8 = nc.tensor({{{{0, 255}, {51, 102}}}}, {dtype = "uint8", device = dev})
  local f = T.ToFloat()(u8)
  lu.assertEquals(f.dtype, "float32")
  H.assert_close(f:to(cpu), {{{{0, 1}, {0.2, 0.4}}}}, 1e-7)
  local x = nc.ones({2, 3, 2, 2}, {device = dev})
  local y = T.Normalize({0.5, 0.25, 1}, {0.5, 0.25, 2})(x):to(cpu):tolist()
  lu.assertEquals({y[2][1][1][1], y[2][2][2][2], y[1][3][1][2]}, {1, 3, 0})
  H.assert_error(function() T.RandomCrop(4)(u8) end, "RandomCrop: expected float images, got uint8 (put T.ToFloat() first)")
  H.assert_error(function() T.RandomCrop(4, {pad = 2}) end, "RandomCrop: unknown option 'pad' (accepted: {fill=, padding=, seed=})")
  H.assert_error(function() T.RandomCrop(9)(x) end, "a 9x9 crop does not fit 2x2 images padded by 0")
  H.assert_error(function() T.ColorJitter{hue = 0.7} end, "hue must lie in [-0.5, 0.5]")
  H.assert_error(function() T.GaussianBlur(4) end, "kernel_size must be an odd integer")
  H.assert_error(function() T.Normalize({1, 2}, {1, 2})(x) end, "3 channels, but mean and std have 2 and 2 values")
  H.assert_error(function() T.Compose{T.ToFloat(), 3} end, "item 2 is a number, not a transform")
  -- a transform is the DataLoader's transform
  local loader = data.DataLoader(data.TensorDataset(nc.zeros({4, 3, 4, 4}, {dtype = "uint8"})),
    {batch_size = 2, device = dev, transform = T.Compose{T.ToFloat(), T.RandomHorizontalFlip()}})
  for xb in loader:iter() do lu.assertEquals(xb.dtype, "float32") end
end

-- torchvision's deterministic transforms on the same batch, where it is installed. Tolerance:
-- 1e-5 (float32 on both sides; the blur and the bilinear weights round in another order).
function TestTransforms:test_torchvision()
  local py = H.python("numpy", "torch", "torchvision")
  if not py then
    lu.skip("torchvision is not installed for python3 (Debian: python3-torchvision): the torchvision comparison did not run")
  end
  local dir = H.tmpdir()
  local x = rand_images({2, 3, 9, 7}, 6)
  local f = assert(io.open(dir .. "/x.bin", "wb"))
  f:write(x:bytes())
  f:close()
  local script = dir .. "/tv.py"
  f = assert(io.open(script, "w"))
  f:write([[
import sys, numpy as np, torch
import torchvision.transforms.functional as F
d = sys.argv[1]
x = torch.from_numpy(np.fromfile(d + "/x.bin", dtype=np.float32).reshape(2, 3, 9, 7))
outs = [F.normalize(x, [0.5, 0.4, 0.3], [0.2, 0.25, 0.3]), F.hflip(x), F.pad(x, [2])[..., 1:8, 3:8],
        F.resize(F.crop(x, 2, 1, 5, 4), [11, 6], antialias=False), F.resize(x, [4, 3], antialias=False),
        F.rgb_to_grayscale(x, 3), F.gaussian_blur(x, [5, 5], [1.3, 1.3]), F.adjust_brightness(x, 1.3),
        F.adjust_contrast(x, 0.7), F.adjust_saturation(x, 1.5), F.adjust_hue(x, 0.15)]
for i, o in enumerate(outs):
    o.contiguous().numpy().astype(np.float32).tofile(d + "/o%d.bin" % i)
print("ok")
]])
  f:close()
  local p = io.popen(py .. " " .. script .. " " .. dir .. " 2>&1")
  local out = p:read("a")
  p:close()
  lu.assertEquals(out, "ok\n", "torchvision script failed: " .. out)
  local id = 0 + 4 * 1 + 16 * 2 + 64 * 3
  local xd = x:to(dev)
  local function boxes(b) return nc.tensor({b, b}, {device = dev}) end
  local function col(fac) return nc.tensor({fac, fac}, {device = dev}) end
  local mine = {
    T.Normalize({0.5, 0.4, 0.3}, {0.2, 0.25, 0.3})(xd),
    T.RandomHorizontalFlip(1)(xd),
    ops.resized_crop(xd, boxes({-1, 1, 7, 5, 0}), 7, 5),
    ops.resized_crop(xd, boxes({2, 1, 5, 4, 0}), 11, 6),
    ops.resized_crop(xd, boxes({0, 0, 9, 7, 0}), 4, 3),
    ops.adjust_color(xd, col({1, 1, 1, 0, id, 1})),
    ops.gaussian_blur(xd, nc.tensor({1.3, 1.3}, {device = dev}), 5),
    ops.adjust_color(xd, col({1.3, 1, 1, 0, id, 0})),
    ops.adjust_color(xd, col({1, 0.7, 1, 0, id, 0})),
    ops.adjust_color(xd, col({1, 1, 1.5, 0, id, 0})),
    ops.adjust_color(xd, col({1, 1, 1, 0.15, id, 0})),
  }
  for i, m in ipairs(mine) do
    f = assert(io.open(dir .. "/o" .. (i - 1) .. ".bin", "rb"))
    local ref = nc.from_bytes(f:read("a"), m.shape, "float32")
    f:close()
    lu.assertTrue(max_diff(m, ref) < 1e-5, "torchvision output " .. i)
  end
  os.execute("rm -rf " .. dir)
end

os.exit(lu.LuaUnit.run())
