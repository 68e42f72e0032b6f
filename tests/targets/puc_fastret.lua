-- puc_fastret.lua [SECONDS]: a 200-deep recursion that returns at once,
-- over and over: the CallInfo chain changes under a non-blocking sampler
-- all the time.
local function rec(n)
  if n > 0 then
    return 1 + rec(n - 1)
  end
  return 0
end
-- os.clock (a system call: under load ptrace stops land there out of
-- proportion, docs/sampling.md §5.2) is read once per k*100 rounds, k
-- doubled until they take 0.1 s of CPU
local t0, k, c = os.clock(), 1, 0
local s, secs = 0, tonumber(arg[1] or 20)
while c < secs do
  for _ = 1, 100 * k do s = s + rec(200) end
  local d = os.clock() - t0; if d - c < 0.1 then k = k * 2 end; c = d
end
