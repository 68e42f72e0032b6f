-- puc_sandwich.lua CFIB_SO [SECS]: Lua -> C (cfib.call) -> Lua callback
-- (lua_call) -> C recursion (cfib.fib). Line numbers are asserted by
-- tests/puc-sandwich.test: keep them.
package.cpath = arg[1] .. ";" .. package.cpath
local cfib = require("cfib")
local function callback(n)
  return cfib.fib(n)                         -- line 7: Lua callback -> C recursion
end
local function sandwich(n)
  return cfib.call(callback, n) + 0          -- line 10: Lua -> C -> Lua
end
local t0, dur, k, c = os.clock(), tonumber(arg[2]) or 10, 1, 0
while c < dur do  -- os.clock, a system call, once per 0.1 s (docs/sampling.md §5.2)
  for _ = 1, 20 * k do sandwich(25) end      -- line 14: main chunk
  local d = os.clock() - t0; if d - c < 0.1 then k = k * 2 end; c = d
end
