-- puc_shapes.lua SCENARIO [SECS]: stack shapes for tests/puc-shapes.test.
-- Each scenario loops until SECS of CPU with work() innermost, reading
-- os.clock (a system call: under load ptrace stops land there,
-- docs/sampling.md §5.2) once per 0.1 s; line numbers are asserted: keep them.
local scen, secs, unpack = arg[1], tonumber(arg[2]) or 10, table.unpack or unpack
local t0, k, c = os.clock(), 1, 0
local function work(n)                       -- line 7
  local s = 0
  for i = 1, n do s = s + i % 7 end          -- line 9: hot
  return s
end                                          -- line 11
local function tail_b(n) return work(n) end  -- line 12
local function tail_a(n) return tail_b(n) end
local function va(...)                       -- line 14
  local n = select('#', ...)
  return work(...) + n                       -- line 16
end
local mt = setmetatable({}, { __index = function(t, k)   -- line 18
  local r = work(200000) return r            -- line 19
end })
local function cmp(a, b)                     -- line 21
  work(2000)                                 -- line 22
  return a < b
end
local function gsub_cb(c)                    -- line 25
  work(20000)                                -- line 26
  return c
end
local function co3() while true do work(200000) coroutine.yield() end end  -- line 29
local function co2()                         -- line 30
  local c = coroutine.wrap(co3)
  while true do c() coroutine.yield() end    -- line 32
end
local function co1()                         -- line 34
  local c = coroutine.create(co2)
  while true do coroutine.resume(c) coroutine.yield() end  -- line 36
end
local c1 = coroutine.create(co1)
local arr = {}
for i = 1, 300 do arr[i] = (i * 7919) % 301 end
while c < secs do for _ = 1, 10 * k do      -- line 41
  if scen == "tail" then tail_a(200000)      -- line 42
  elseif scen == "vararg" then va(200000, 1, 2)
  elseif scen == "pcall" then pcall(work, 200000)
  elseif scen == "meta" then local _ = mt.foo
  elseif scen == "sort" then local a = { unpack(arr) } table.sort(a, cmp)
  elseif scen == "gsub" then string.gsub(string.rep("a", 20), "a", gsub_cb)
  elseif scen == "coro" then coroutine.resume(c1)   -- line 48
  end
end local d = os.clock() - t0; if d - c < 0.1 then k = k * 2 end; c = d end
