-- netcl.cluster.lobpcg (LOBPCG on the device) and netcl.cluster._eigh (the dense Jacobi
-- eigensolver of its Rayleigh-Ritz step) (docs/cluster.md).
local nc = require "netcl"

local M = {}

-- ---- dense symmetric eigen-decomposition on the host (cyclic Jacobi), for the small matrices of LOBPCG's
-- Rayleigh-Ritz step. A: Lua table of rows; returns eigenvalues (ascending) and eigenvectors (columns).
local function jacobi_eigh(A, n)
  local a, v = {}, {}
  for i = 1, n do
    a[i], v[i] = {}, {}
    for j = 1, n do a[i][j], v[i][j] = (A[i][j] + A[j][i]) / 2, i == j and 1 or 0 end
  end
  for _ = 1, 100 do
    local off = 0
    for i = 1, n do for j = i + 1, n do off = off + a[i][j] * a[i][j] end end
    if off < 1e-30 then break end
    for p = 1, n - 1 do
      for q = p + 1, n do
        if math.abs(a[p][q]) > 1e-300 then
          local theta = (a[q][q] - a[p][p]) / (2 * a[p][q])
          local t = (theta >= 0 and 1 or -1) / (math.abs(theta) + math.sqrt(theta * theta + 1))
          local c = 1 / math.sqrt(t * t + 1)
          local sn = t * c
          for k = 1, n do
            local akp, akq = a[k][p], a[k][q]
            a[k][p], a[k][q] = c * akp - sn * akq, sn * akp + c * akq
          end
          for k = 1, n do
            local apk, aqk = a[p][k], a[q][k]
            a[p][k], a[q][k] = c * apk - sn * aqk, sn * apk + c * aqk
          end
          for k = 1, n do
            local vkp, vkq = v[k][p], v[k][q]
            v[k][p], v[k][q] = c * vkp - sn * vkq, sn * vkp + c * vkq
          end
        end
      end
    end
  end
  local order = {}
  for i = 1, n do order[i] = i end
  table.sort(order, function(x, y) return a[x][x] < a[y][y] end)
  local w, vec = {}, {}
  for i = 1, n do vec[i] = {} end
  for c, o in ipairs(order) do
    w[c] = a[o][o]
    for i = 1, n do vec[i][c] = v[i][o] end
  end
  return w, vec
end
M._eigh = jacobi_eigh

-- Orthonormal basis of the columns of S (with AS = op(S) carried along): through the eigenvectors
-- of the Gram matrix, dropping directions below 1e-10 of the largest (converged residuals).
local function orthonormalize_once(S, AS)
  local g = S:transpose(1, 2):matmul(S):to("float64"):tolist()
  local m = S.shape[2]
  local w, V = jacobi_eigh(g, m)
  local cols = {}
  for c = 1, m do
    if w[c] > 1e-10 * w[m] then
      local col = {}
      for i = 1, m do col[i] = V[i][c] / math.sqrt(w[c]) end
      cols[#cols + 1] = col
    end
  end
  local T = nc.tensor(cols, {device = S.device, dtype = S.dtype}):transpose(1, 2)   -- [m, r]
  return S:matmul(T), AS and AS:matmul(T)
end

-- Twice: the Gram route squares the condition number, and a second pass restores orthogonality.
local function orthonormalize(S, AS)
  S, AS = orthonormalize_once(S, AS)
  return orthonormalize_once(S, AS)
end

-- LOBPCG (Knyazev 2001) for the m largest eigenpairs of the symmetric operator op ([N, m] -> [N, m])
-- on the device: the block X, residuals R and search directions P, Rayleigh-Ritz on [X, R, P] on
-- the host (3m x 3m). Returns eigenvalues (descending, Lua table), eigenvectors [N, m], iterations.
function M.lobpcg(op, X, opts)
  opts = opts or {}
  local max_iter, tol = opts.max_iter or 200, opts.tol or 1e-6
  local m = X.shape[2]
  local nconv = opts.nconv or m
  local AX
  X, AX = orthonormalize(X, op(X))
  local P, AP
  local lambda, it = nil, 0
  for i = 1, max_iter do
    it = i
    local S, AS
    if lambda then
      local L = nc.tensor(lambda, {device = X.device, dtype = X.dtype}):view({1, m})
      local R = AX - X * L
      local rn = R:narrow(2, 1, nconv):norm(1, {p = 2}):max():item()
      if rn < tol then break end
      -- unit columns, so that small residuals are not taken for dependent directions
      local rs = R:norm(1, {p = 2, keepdim = true}):clamp(1e-300, nil)
      R = R / rs
      local parts, aparts = {X, R}, {AX, op(R)}
      if P then
        local ps = P:norm(1, {p = 2, keepdim = true}):clamp(1e-300, nil)
        parts[3], aparts[3] = P / ps, AP / ps
      end
      S, AS = orthonormalize(nc.cat(parts, 2), nc.cat(aparts, 2))
    else
      S, AS = X, AX
    end
    local Hm = S:transpose(1, 2):matmul(AS):to("float64"):tolist()
    local r = S.shape[2]
    local w, V = jacobi_eigh(Hm, r)
    local cols, vals = {}, {}
    for c = 1, m do
      vals[c] = w[r - c + 1]
      local col = {}
      for j = 1, r do col[j] = V[j][r - c + 1] end
      cols[c] = col
    end
    local Cm = nc.tensor(cols, {device = X.device, dtype = X.dtype}):transpose(1, 2)   -- [r, m]
    local Xn = S:matmul(Cm)
    if r > m then -- P: the part of the new block outside the old X
      local Cp = Cm:clone()
      Cp:narrow(1, 1, m):fill_(0)
      P, AP = S:matmul(Cp), AS:matmul(Cp)
    end
    X, AX, lambda = Xn, op(Xn), vals  -- AX afresh: combinations of AS drift from op(X)
  end
  return lambda, X, it
end

return M
