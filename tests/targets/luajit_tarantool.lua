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
-- os.clock (a system call: stops land there under load) once per 0.1 s
local t0, n, k, c = os.clock(), 0, 1, 0
while c < secs do
  for _ = 1, k do n = n + outer(20) end
  local d = os.clock() - t0; if d - c < 0.1 then k = k * 2 end; c = d
end
print("done", n)
os.exit(0)
