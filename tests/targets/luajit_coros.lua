-- luajit_coros.lua [SECONDS]: a coroutine-heavy LuaJIT program (issue 13,
-- "errors stay rare under load"): 64 worker coroutines resumed and
-- yielding in a tight loop, each running a hot loop that compiles into
-- traces (co_work) between yields, for SECONDS (default 60).
local secs = tonumber(arg[1]) or 60
local function co_work(n)
  local s = 0
  for i = 1, n do s = s + (i * 7) % 13 end
  return s
end
local function worker(id)
  local acc = 0
  while true do
    acc = acc + co_work(200 + id)
    coroutine.yield(acc)
  end
end
local function scheduler(cos)
  local total = 0
  for i = 1, #cos do
    local ok, v = coroutine.resume(cos[i])
    total = total + v
  end
  return total
end
local cos = {}
for i = 1, 64 do
  cos[i] = coroutine.create(worker)
  coroutine.resume(cos[i], i)
end
local t1 = os.time() + secs
local x = 0
while os.time() < t1 do
  for _ = 1, 100 do x = x + scheduler(cos) end
end
print(x)
