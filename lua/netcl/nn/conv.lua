-- nn.Conv2d: 2-D convolution over [N, C, H, W] with weight [out, in/groups, kh, kw].
local ag = require "netcl.autograd"
local Module = require("netcl.nn.module").Module
local U = require "netcl.nn.util"

local Conv2d = Module:extend("Conv2d")

--- nn.Conv2d(in_channels, out_channels, kernel_size, {stride=1, padding=0, dilation=1,
-- groups=1, bias=true, device=, dtype=}). kernel_size, stride, padding and dilation are an
-- integer or a pair {h, w}; padding may also be "valid" (0) or "same" (stride 1 only, and the
-- padding must come out symmetric). Initialized as PyTorch: weight and bias uniform in
-- ±1/sqrt(fan_in), fan_in = in_channels/groups * kh * kw.
function Conv2d:init(in_channels, out_channels, kernel_size, opts)
  local fname = "nn.Conv2d"
  opts = U.options(fname, opts, {stride = true, padding = true, dilation = true, groups = true, bias = true,
                                 device = true, dtype = true})
  self.in_channels = U.int(fname, "in_channels", in_channels, 1)
  self.out_channels = U.int(fname, "out_channels", out_channels, 1)
  self.kernel_size = U.pair(fname, "kernel_size", kernel_size, 1)
  self.stride = U.pair(fname, "stride", opts.stride or 1, 1)
  self.dilation = U.pair(fname, "dilation", opts.dilation or 1, 1)
  self.groups = U.int(fname, "groups", opts.groups or 1, 1)
  if in_channels % self.groups ~= 0 or out_channels % self.groups ~= 0 then
    error(string.format("%s: in_channels (%d) and out_channels (%d) must be divisible by groups (%d)", fname,
      in_channels, out_channels, self.groups), 3)
  end
  local padding = opts.padding or 0
  if padding == "valid" then
    padding = 0
  elseif padding == "same" then
    if self.stride[1] ~= 1 or self.stride[2] ~= 1 then
      error(fname .. ": padding=\"same\" needs stride 1", 3)
    end
    local p = {}
    for i = 1, 2 do
      local total = self.dilation[i] * (self.kernel_size[i] - 1)
      if total % 2 ~= 0 then
        error(string.format("%s: padding=\"same\" with kernel %d and dilation %d needs asymmetric padding, which " ..
          "is not supported; pad the input instead", fname, self.kernel_size[i], self.dilation[i]), 3)
      end
      p[i] = total // 2
    end
    padding = p
  elseif type(padding) == "string" then
    error(string.format("%s: padding must be an integer, a pair, \"valid\" or \"same\", got \"%s\"", fname, padding), 3)
  end
  self.padding = U.pair(fname, "padding", padding, 0)
  local kh, kw = self.kernel_size[1], self.kernel_size[2]
  local topts = U.tensor_opts(opts)
  local bound = 1 / math.sqrt(in_channels // self.groups * kh * kw)
  self.weight = ag.param(U.uniform({out_channels, in_channels // self.groups, kh, kw}, bound, topts))
  if U.bool(fname, "bias", opts.bias, true) then
    self.bias = ag.param(U.uniform({out_channels}, bound, topts))
  end
end

function Conv2d:forward(x)
  return ag.conv2d(x, self.weight, self.bias, {stride = self.stride, padding = self.padding,
                                               dilation = self.dilation, groups = self.groups})
end

local function pair_str(p) return p[1] == p[2] and tostring(p[1]) or string.format("(%d, %d)", p[1], p[2]) end

function Conv2d:extra_repr()
  local s = string.format("%d -> %d, kernel_size=%s", self.in_channels, self.out_channels, pair_str(self.kernel_size))
  if self.stride[1] ~= 1 or self.stride[2] ~= 1 then s = s .. ", stride=" .. pair_str(self.stride) end
  if self.padding[1] ~= 0 or self.padding[2] ~= 0 then s = s .. ", padding=" .. pair_str(self.padding) end
  if self.dilation[1] ~= 1 or self.dilation[2] ~= 1 then s = s .. ", dilation=" .. pair_str(self.dilation) end
  if self.groups ~= 1 then s = s .. ", groups=" .. self.groups end
  if not self.bias then s = s .. ", bias=false" end
  return s
end

return Conv2d
