-- work.lua MODDIR [REPORT_MS]: the slowdown workload (bench 1, 3, 4).
-- Recursive fib(20) in a loop, counting completed fib calls; every
-- REPORT_MS (100) ms prints "W <monotonic ns> <calls so far>" so the
-- harness can take the work rate over any window. Runs until killed.
package.cpath = arg[1] .. "/?.so;" .. package.cpath
local now_ns = require("lsbench").now_ns
local report_ns = (tonumber(arg[2]) or 100) * 1e6

local calls = 0
local function fib(n)
  calls = calls + 1
  if n < 2 then return n end
  return fib(n - 1) + fib(n - 2)
end

io.stdout:setvbuf("line")
print("ready")
local next_report = now_ns() + report_ns
while true do
  fib(20)
  local t = now_ns()
  if t >= next_report then
    io.stdout:write(string.format("W %.0f %.0f\n", t, calls))
    next_report = t + report_ns
  end
end
