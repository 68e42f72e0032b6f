-- puc_coros.lua [SECS]: three coroutines suspended inside nested calls,
-- one dead, and a busy main thread (tests/puc-coroutines.test).
local function inner(i) coroutine.yield(i) end          -- line 3
local function outer(i) inner(i) return i end           -- line 4
local cos = {}
for i = 1, 3 do cos[i] = coroutine.create(outer) coroutine.resume(cos[i], i) end
local dead = coroutine.create(function() end)
coroutine.resume(dead)
local function spin() local x = 0 for i = 1, 2e7 do x = x + i end return x end   -- line 9
-- os.time, not os.clock: os.clock is a system call, and on a loaded
-- machine a stop lands where the kernel preempts, at its return, far more
-- often than its share of the time (the dump then rightly shows os.clock)
local t0 = os.time()
while os.time() - t0 < (tonumber(arg[1]) or 10) do spin() end
