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

-- timed by os.time (the vDSO, no system call): os.clock's system call is
-- where a loaded machine preempts the target, so ptrace stops land there
-- out of proportion (CI saw 13 of 25; docs/sampling.md §5.2)
-- SECONDS are wall seconds, in which a loaded machine gives the target
-- little CPU: tests ask for far more than they need and kill it.
local N = arg[2] == "joff" and 200000 or 4000000
local t0, n = os.time(), 0
while os.time() - t0 < secs do
  n = n + hot(N)
end
print("done", n)
