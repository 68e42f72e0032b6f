-- examples/sandwich.lua: Lua calls C calls Lua, for luaspy's README demo.
--   luajit examples/sandwich.lua [SECONDS]
-- Loads the C module built next to this file by `make example`.
local dir = arg and arg[0] and arg[0]:match("^(.*)/[^/]*$") or "."
package.cpath = dir .. "/?.so;" .. package.cpath
local sandwich = require("sandwich")

local function lua_fib(n)
  if n < 2 then return n end
  return lua_fib(n - 1) + lua_fib(n - 2)
end

local function callback(i)
  return sandwich.fib(18) + i        -- C, called from Lua, called from C
end

local function c_side()
  return sandwich.fib(24)            -- recursive Fibonacci in C
end

local function lua_side()
  return lua_fib(24)                 -- recursive Fibonacci in Lua
end

local function callbacks()
  return sandwich.each(20, callback) -- C calls back into Lua
end

local seconds = tonumber(arg and arg[1]) or 10
local t0, n = os.clock(), 0
while os.clock() - t0 < seconds do
  n = n + c_side() + lua_side() + callbacks()
end
print("done", n)
