-- coro_deep.lua DEPTH [SECS]: a coroutine suspended in coroutine.yield at
-- the bottom of a DEPTH-deep recursion of rec (line 4), resumed from the
-- function of line 5; a busy main thread (tests/dump-coroutine-deep.test).
local function rec(n) if n > 0 then rec(n - 1) else coroutine.yield() end return n end
local co = coroutine.create(function(d) rec(d) end)
assert(coroutine.resume(co, tonumber(arg[1]) or 10000))
assert(coroutine.status(co) == "suspended", "the recursion did not reach its yield")
local function spin() local x = 0 for i = 1, 1e7 do x = x + i end return x end
local t0, secs = os.clock(), tonumber(arg[2]) or 20
while os.clock() - t0 < secs do spin() end
