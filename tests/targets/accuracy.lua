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
local t0, n = os.clock(), 0
while os.clock() - t0 < seconds do
  for r = 1, 20 do n = n + fifty() + thirty() + twenty() end
end
print(n)
