-- gaps.lua MODDIR [WINDOW_S [THRESH_NS]]: the in-target gap meter (bench 2).
-- Spins in C (lsbench.gaps) for WINDOW_S (0.25) s at a time and prints per
-- window "G <start ns> <end ns> <stops> <sum ns> <others> <sum ns> <stop
-- gaps> <other gaps>" (gaps in ns, comma separated, "-" for none): stops
-- are gaps with a voluntary context switch (ptrace stops), others are
-- preemption and interrupts.
package.cpath = arg[1] .. "/?.so;" .. package.cpath
local gaps = require("lsbench").gaps
local window = tonumber(arg[2]) or 0.25
local thresh = tonumber(arg[3]) or 1000

io.stdout:setvbuf("line")
print("ready")
local function meter()           -- a Lua frame above the C one
  return gaps(window, thresh)
end
while true do
  local t0, t1, ns, sums, no, sumo, ls, lo = meter()
  io.stdout:write(string.format("G %.0f %.0f %.0f %.0f %.0f %.0f %s %s\n", t0, t1, ns, sums, no, sumo, ls, lo))
end
