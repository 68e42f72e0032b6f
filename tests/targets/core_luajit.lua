-- core_luajit.lua [SECS]: the shape dump --core is checked on (tests/dump-core-gcore.test):
-- two coroutines suspended inside nested calls, the main thread in a hot
-- loop that runs as a JIT trace (LuaJIT) or in the interpreter (PUC Lua).
local function park(i) coroutine.yield(i) end               -- line 4
local function nest(i) park(i) return i end                 -- line 5
local cos = {}
for i = 1, 2 do cos[i] = coroutine.create(nest) coroutine.resume(cos[i], i) end
local function hot(n)
  local x = 0
  for i = 1, n do x = x + i % 7 end                         -- line 10
  return x
end
local t0, k = os.time(), 0   -- the clock once in 64 rounds (docs/sampling.md §5.2)
while k % 64 ~= 0 or os.time() - t0 < (tonumber(arg[1]) or 30) do hot(1e6) k = k + 1 end   -- line 14
