-- Pooling layers over [N, C, H, W].
local ag = require "netcl.autograd"
local Module = require("netcl.nn.module").Module
local U = require "netcl.nn.util"

local M = {}

local function pair_str(p) return p[1] == p[2] and tostring(p[1]) or string.format("(%d, %d)", p[1], p[2]) end

M.MaxPool2d = Module:extend("MaxPool2d")

--- nn.MaxPool2d(kernel_size, {stride=kernel_size, padding=0, dilation=1, ceil_mode=false})
function M.MaxPool2d:init(kernel_size, opts)
  local fname = "nn.MaxPool2d"
  opts = U.options(fname, opts, {stride = true, padding = true, dilation = true, ceil_mode = true})
  self.kernel_size = U.pair(fname, "kernel_size", kernel_size, 1)
  self.stride = U.pair(fname, "stride", opts.stride or self.kernel_size, 1)
  self.padding = U.pair(fname, "padding", opts.padding or 0, 0)
  self.dilation = U.pair(fname, "dilation", opts.dilation or 1, 1)
  self.ceil_mode = U.bool(fname, "ceil_mode", opts.ceil_mode, false)
end

function M.MaxPool2d:forward(x)
  return ag.max_pool2d(x, self.kernel_size, {stride = self.stride, padding = self.padding,
                                             dilation = self.dilation, ceil_mode = self.ceil_mode})
end

function M.MaxPool2d:extra_repr()
  return string.format("kernel_size=%s, stride=%s, padding=%s", pair_str(self.kernel_size), pair_str(self.stride),
    pair_str(self.padding))
end

M.AvgPool2d = Module:extend("AvgPool2d")

--- nn.AvgPool2d(kernel_size, {stride=kernel_size, padding=0, ceil_mode=false, count_include_pad=true})
function M.AvgPool2d:init(kernel_size, opts)
  local fname = "nn.AvgPool2d"
  opts = U.options(fname, opts, {stride = true, padding = true, ceil_mode = true, count_include_pad = true})
  self.kernel_size = U.pair(fname, "kernel_size", kernel_size, 1)
  self.stride = U.pair(fname, "stride", opts.stride or self.kernel_size, 1)
  self.padding = U.pair(fname, "padding", opts.padding or 0, 0)
  self.ceil_mode = U.bool(fname, "ceil_mode", opts.ceil_mode, false)
  self.count_include_pad = U.bool(fname, "count_include_pad", opts.count_include_pad, true)
end

function M.AvgPool2d:forward(x)
  return ag.avg_pool2d(x, self.kernel_size, {stride = self.stride, padding = self.padding, ceil_mode = self.ceil_mode,
                                             count_include_pad = self.count_include_pad})
end

function M.AvgPool2d:extra_repr()
  return string.format("kernel_size=%s, stride=%s, padding=%s", pair_str(self.kernel_size), pair_str(self.stride),
    pair_str(self.padding))
end

M.AdaptiveAvgPool2d = Module:extend("AdaptiveAvgPool2d")

--- nn.AdaptiveAvgPool2d(output_size): an integer or {h, w}.
function M.AdaptiveAvgPool2d:init(output_size)
  self.output_size = U.pair("nn.AdaptiveAvgPool2d", "output_size", output_size, 1)
end

function M.AdaptiveAvgPool2d:forward(x)
  return ag.adaptive_avg_pool2d(x, self.output_size)
end

function M.AdaptiveAvgPool2d:extra_repr() return "output_size=" .. pair_str(self.output_size) end

return M
