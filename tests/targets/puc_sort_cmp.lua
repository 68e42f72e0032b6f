-- puc_sort_cmp.lua [SECONDS]: table.sort with a Lua comparator in a loop,
-- for tests/puc-precall-window.test: every comparison enters
-- luaD_precall through lua_call, so many stops land between next_ci
-- linking a reused CallInfo and luaD_precall filling it in.
local secs = tonumber(arg and arg[1]) or 60
local function cmp(a, b) return a > b end         -- line 6
local function sorter(t) table.sort(t, cmp) end   -- line 7
local n, t = 200, {}
local t0, k = os.time(), 0
while k % 64 ~= 0 or os.time() - t0 < secs do
  for i = 1, n do t[i] = (i * 7919) % n end k = k + 1
  sorter(t)                                        -- line 12
end
