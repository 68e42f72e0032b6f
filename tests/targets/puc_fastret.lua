-- puc_fastret.lua [SECONDS]: a 200-deep recursion that returns at once,
-- over and over: the CallInfo chain changes under a non-blocking sampler
-- all the time.
local function rec(n)
  if n > 0 then
    return 1 + rec(n - 1)
  end
  return 0
end
local t0 = os.clock()
local s = 0
while os.clock() - t0 < tonumber(arg[1] or 20) do
  for _ = 1, 100 do s = s + rec(200) end
end
