-- coro_deep.lua DEPTH [SECS]: a coroutine suspended in coroutine.yield at
-- the bottom of a DEPTH-deep recursion of rec (line 4), resumed from the
-- function of line 5; a busy main thread (tests/dump-coroutine-deep.test).
local function rec(n) if n > 0 then rec(n - 1) else coroutine.yield() end return n end
local co = coroutine.create(function(d) rec(d) end)
assert(coroutine.resume(co, tonumber(arg[1]) or 10000))
assert(coroutine.status(co) == "suspended", "the recursion did not reach its yield")
local function spin() local x = 0 for i = 1, 1e7 do x = x + i end return x end
-- os.clock (a system call: under load ptrace stops land there out of
-- proportion, docs/sampling.md §5.2) is read once per k spins, k doubled
-- until they take 0.1 s of CPU
local t0, secs, k, c = os.clock(), tonumber(arg[2]) or 20, 1, 0
while c < secs do
  for _ = 1, k do spin() end
  local d = os.clock() - t0; if d - c < 0.1 then k = k * 2 end; c = d
end
