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
local t0, dur = os.clock(), tonumber(arg[2]) or 10
while os.clock() - t0 < dur do
  for _ = 1, 20 do sandwich(25) end          -- line 14: main chunk
end
