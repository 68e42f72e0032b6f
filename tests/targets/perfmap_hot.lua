-- perfmap_hot.lua: two hot loops compiled to two LuaJIT traces, `a`
-- doing twice the work of `b` (tests/perfmap-perf.test). Pure arithmetic:
-- the traces call no VM helper, so their machine code is the leaf.
local function a(n)
  local x = 0
  for i = 1, n do x = x + i * 3 end
  return x
end
local function b(n)
  local x = 0
  for i = 1, n do x = x + i * 5 end
  return x
end
-- arg[1]: seconds of CPU to run (os.clock: the wall clock may jump), 0 = until killed
local secs, k, c = tonumber(arg and arg[1]) or 60, 1, 0
while secs <= 0 or c < secs do  -- os.clock, a system call, read once per 0.1 s
  for _ = 1, k do a(2000000); b(1000000) end
  if secs > 0 then local d = os.clock(); if d - c < 0.1 then k = k * 2 end; c = d end
end
