-- tests/targets/accuracy.lua: CPU shares known by construction.
-- Each round does 5, 3 and 2 units of the same work in fifty(), thirty()
-- and twenty(): 50 %, 30 % and 20 % of the time spent in them.
local function unit()
  local s = 0
  for i = 1, 2000 do s = s + i * 3 end
  return s
end
local function fifty() local s = 0 for i = 1, 5 do s = s + unit() end return s end
local function thirty() local s = 0 for i = 1, 3 do s = s + unit() end return s end
local function twenty() local s = 0 for i = 1, 2 do s = s + unit() end return s end
local seconds = tonumber(arg and arg[1]) or 60
-- os.clock is a system call, where a loaded machine preempts the target:
-- ptrace stops land there out of proportion (docs/sampling.md §5.2). It
-- is read once per k*20 rounds, k doubled until they take 0.1 s of CPU.
local t0, n, k, c = os.clock(), 0, 1, 0
while c < seconds do
  for r = 1, 20 * k do n = n + fifty() + thirty() + twenty() end
  local d = os.clock() - t0; if d - c < 0.1 then k = k * 2 end; c = d
end
print(n)
