-- coro_many.lua N [SECS [GARBAGE]]: N coroutines suspended in
-- coroutine.yield, then GARBAGE small tables kept alive (newer than the
-- coroutines, so an allgc walk meets them first), and a busy main thread
-- (tests/dump-coroutines-cut.test). Says "ready" once all exist.
local n = tonumber(arg[1]) or 5000
local cos = {}
for i = 1, n do cos[i] = coroutine.create(function() coroutine.yield() end) coroutine.resume(cos[i]) end
local keep = {}
for i = 1, tonumber(arg[3]) or 0 do keep[i] = {} end io.write("ready\n") io.flush()
local t0, secs, k = os.time(), tonumber(arg[2]) or 20, 0
while k % 64 ~= 0 or os.time() - t0 < secs do local x = 0 for i = 1, 1e6 do x = x + i end k = k + 1 end
