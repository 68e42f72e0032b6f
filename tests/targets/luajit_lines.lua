-- luajit_lines.lua: one hot line for luajit-lines.test.
--   luajit luajit_lines.lua [SECONDS] [joff]
local secs = tonumber(arg[1]) or 10
if arg[2] == "joff" then jit.off() end

local function hot(n)
  local s = 0
  for i = 1, n do
    s = s + (i * 7) % 13 + (s % 3) * (i % 5) -- HOT
  end
  return s
end

-- The clock is read once in 64 calls of hot: on a loaded machine ptrace
-- stops land in clock reads out of all proportion (CI saw 13 of 25 with
-- os.clock; docs/sampling.md §5.2).
-- SECONDS are wall seconds, in which a loaded machine gives the target
-- little CPU: tests ask for far more than they need and kill it.
local N = arg[2] == "joff" and 200000 or 4000000
local t0, n, k = os.time(), 0, 0
while k % 64 ~= 0 or os.time() - t0 < secs do
  n = n + hot(N)
  k = k + 1
end
print("done", n)
