-- heap.lua MODDIR MIB: attach-time target (bench 5). Grows the Lua heap
-- to MIB MiB of small tables (many objects, as a real server's heap),
-- prints "ready <heap KiB>", then runs recursive fib until killed.
package.cpath = arg[1] .. "/?.so;" .. package.cpath
local want_kib = (tonumber(arg[2]) or 1024) * 1024

io.stdout:setvbuf("line")
local keep, n = {}, 0
while collectgarbage("count") < want_kib do
  local chunk = {}
  for i = 1, 4096 do
    chunk[i] = { i, n, tostring(i) }
  end
  n = n + 1
  keep[n] = chunk
end
print(string.format("ready %.0f", collectgarbage("count")))

local function fib(n)
  if n < 2 then return n end
  return fib(n - 1) + fib(n - 2)
end
while true do fib(25) end
