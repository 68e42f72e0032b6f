-- fibers_coros.lua [SECONDS]: two coroutines of distinct bodies and the
-- main thread, each with its own leaf function, for record --coroutines
-- (tests/record-coroutines.test): per round the main thread resumes
-- alpha (body on line 19, leaf alpha_work, 2 units of work), then beta
-- (body on line 26, leaf beta_work, 1 unit), then runs main_work (1
-- unit) itself. Runs SECONDS (default 60; os.time, never os.clock); the
-- test kills it. Prints "ready" once both coroutines exist.
local secs = tonumber(arg[1]) or 60
local function alpha_work(n)
  local s = 0
  for i = 1, 2 * n do s = s + (i * 7) % 13 end
  return s
end
local function beta_work(n)
  local s = 1
  for i = 1, n do s = s + (i * 5) % 11 end
  return s
end
local function alpha(n)
  local acc = 0
  while true do
    acc = acc + alpha_work(n)
    n = coroutine.yield(acc)
  end
end
local function beta(n)
  local acc = 0
  while true do
    acc = acc + beta_work(n)
    n = coroutine.yield(acc)
  end
end
local function main_work(n)
  local s = 2
  for i = 1, n do s = s + (i * 3) % 7 end
  return s
end
local a, b = coroutine.create(alpha), coroutine.create(beta)
local N = 20000
io.write("ready\n")
io.flush()
local t1, x = os.time() + secs, 0
while os.time() < t1 do
  for _ = 1, 20 do
    local _, va = coroutine.resume(a, N)
    local _, vb = coroutine.resume(b, N)
    x = x + va + vb + main_work(N)
  end
end
print(x)
