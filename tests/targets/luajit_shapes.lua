-- luajit_shapes.lua: frame shapes for luajit-shapes.test: tail calls,
-- varargs, pcall/xpcall, metamethods, table.sort with a Lua comparator,
-- string.gsub with a Lua callback, coroutines three deep.
--   luajit luajit_shapes.lua [SECONDS] [joff]
local secs = tonumber(arg[1]) or 10
if arg[2] == "joff" then jit.off() end

local function spin()
  local s = 0
  for i = 1, 30000 do s = s + i % 7 end
  return s
end

local function tail_b()
  local r = spin()
  return r
end

local function tail_a()
  return tail_b()
end

local function do_tail()
  local r = tail_a()
  return r
end

local function va(...)
  local n = select("#", ...)
  local r = spin()
  return r + n
end

local function do_va()
  local r = va(1, 2, 3)
  return r
end

local function in_pcall()
  local r = spin()
  return r
end

local function do_pcall()
  local ok, r = pcall(in_pcall)
  return r
end

local function do_xpcall()
  local ok, r = xpcall(in_pcall, debug.traceback)
  return r
end

local mt = {}
mt.__index = function(t, k)
  local r = spin()
  return r
end
local obj = setmetatable({}, mt)

local function do_index()
  local r = obj.missing
  return r
end

local function cmp(a, b)
  spin()
  return a < b
end

local function do_sort()
  local t = { 2, 1 }
  table.sort(t, cmp)
  return t[1]
end

local function do_gsub()
  local s = ("xy"):gsub("x", function(c)
    spin()
    return c
  end)
  return s
end

local function lvl3()
  local r = spin()
  coroutine.yield(r)
end

local function lvl2()
  local co = coroutine.create(lvl3)
  local ok, r = coroutine.resume(co)
  coroutine.yield(r)
end

local function lvl1()
  local co = coroutine.create(lvl2)
  local ok, r = coroutine.resume(co)
  coroutine.yield(r)
end

local function do_co()
  local co = coroutine.create(lvl1)
  local ok, r = coroutine.resume(co)
  return r
end

-- each phase runs for about 1/8 s in turn, so dumps at any rate see them
-- all. Phases are counted in calls (measured once, at the start) and the
-- run is timed by os.time (the vDSO, no system call): os.clock's system
-- call is where a loaded machine preempts the target, and ptrace stops
-- land there out of proportion (docs/sampling.md §5.2)
-- SECONDS are wall seconds, in which a loaded machine gives the target
-- little CPU: tests ask for far more than they need and kill it.
local phases = { do_tail, do_va, do_pcall, do_xpcall, do_index, do_sort, do_gsub, do_co }
local c0, calls = os.clock(), 0
repeat do_tail(); calls = calls + 1 until os.clock() - c0 >= 0.125
local t0, n = os.time(), 0
while os.time() - t0 < secs do
  for i = 1, #phases do
    local f = phases[i]
    for _ = 1, calls do
      local r = f()
      n = n + (tonumber(r) or 0)
    end
  end
end
print("done", n)
