-- examples/sandwich.lua: Lua calls C calls Lua, for luaspy's README demo.
--   luajit examples/sandwich.lua [SECONDS]
-- Loads the C module built next to this file by `make example`.
local dir = arg and arg[0] and arg[0]:match("^(.*)/[^/]*$") or "."
package.cpath = dir .. "/?.so;" .. package.cpath
local csandwich = require("csandwich")

local function lua_fib(n)
  if n < 2 then return n end
  return lua_fib(n - 1) + lua_fib(n - 2)
end

-- (no tail calls below: each function keeps its own frame in the profile)
local function callback(i)
  local r = csandwich.fib(18) + i    -- C, called from Lua, called from C
  return r
end

local function c_side()
  local r = csandwich.fib(24)        -- recursive Fibonacci in C
  return r
end

local function lua_side()
  local r = lua_fib(24)              -- recursive Fibonacci in Lua
  return r
end

local function callbacks()
  local r = csandwich.each(20, callback) -- C calls back into Lua
  return r
end

local seconds = tonumber(arg and arg[1]) or 10
local t0, n = os.clock(), 0
while os.clock() - t0 < seconds do
  n = n + c_side() + lua_side() + callbacks()
end
print("done", n)
