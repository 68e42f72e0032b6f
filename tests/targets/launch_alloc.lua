-- launch_alloc.lua [SECONDS]: allocates in one function and computes in
-- another until SECONDS (os.time, 5 by default) have passed
-- (tests/record-launch-puc.test)
local function alloc_work()
  local t = {}
  for i = 1, 2000 do t[i] = { i, tostring(i) .. "x" } end
  return #t
end
local function calc_work()
  local s = 0
  for i = 1, 200000 do s = s + i % 7 end
  return s
end
local deadline = os.time() + (tonumber(arg and arg[1]) or 5)
while os.time() < deadline do alloc_work(); calc_work() end
