-- fiber_work.lua: the Lua run on fiber stacks by fiber_ucontext and
-- fiber_boost (tests/native-fiber-*.test): leaf <- middle <- outer in
-- bursts, a yield_() to the host between bursts, for SECONDS seconds
-- (environment LUASPY_FIBER_SECONDS, default 20).
local secs = tonumber(os.getenv("LUASPY_FIBER_SECONDS") or "20")
local function leaf(n)
	local s = 0
	for i = 1, n do s = s + (i * 7) % 13 end
	return s
end
local function middle()
	local s = 0
	for _ = 1, 10 do s = s + leaf(20000) end
	return s
end
local function outer()
	local s = 0
	for _ = 1, 10 do s = s + middle() end
	return s
end
local t0 = os.time()
while os.time() - t0 < secs do
	outer()
	yield_()
end
