-- luajit_sort_cmp.lua: table.sort with a Lua comparator, for
-- luajit-sort-comparator.test. LuaJIT's table.sort (lib_table.c) calls cmp
-- through lua_call for every comparison: the VM is entered (lj_vm_call's
-- register saves) and left (vm_leave_unw's restores) tens of thousands
-- of times a second, so many samples stop in those sequences.
--   luajit luajit_sort_cmp.lua on|off [SECONDS]
local mode, secs = arg[1] or "off", tonumber(arg[2]) or 60
if mode == "off" then jit.off() end
local function cmp(a, b) return a > b end
local function sorter(t) table.sort(t, cmp) end
local n, t = 200, {}
local t0, k = os.time(), 0
while k % 64 ~= 0 or os.time() - t0 < secs do
  for i = 1, n do t[i] = (i * 7919) % n end k = k + 1
  sorter(t)
end
