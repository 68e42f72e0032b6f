-- luajit_tarantool.lua: busy named chain for luajit-tarantool.test.
--   tarantool luajit_tarantool.lua [SECONDS]
local secs = tonumber(arg[1]) or 10

local function fib(n)
  if n < 2 then return n end
  return fib(n - 1) + fib(n - 2)
end

local function leaf(n)
  local r = fib(n)
  return r
end

local function middle(n)
  local s = 0
  for _ = 1, 3 do s = s + leaf(n) end
  return s
end

local function outer(n)
  local s = 0
  for _ = 1, 3 do s = s + middle(n) end
  return s
end

local t0, n = os.clock(), 0
while os.clock() - t0 < secs do
  n = n + outer(20)
end
print("done", n)
os.exit(0)
