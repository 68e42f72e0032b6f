-- heap_known.lua OUT: a heap of known shape for tests/heap-*.test.
--   _G.cache    100 000 tables of 10 fields
--   _G.big      a 10 MiB string
--   package.loaded["heapmod"].store  a table of 2000 slots (reached
--               through the registry only)
--   _G.handler  a closure whose upvalue 'upcache' alone holds a table
--               of 50 000 slots
--   _G.worker   a suspended coroutine whose local 'buf' alone holds a
--               table of 30 000 slots
--   _G.makers   1234 closures of the function defined on the line
--               marked MAKER
--   _G.points   567 tables whose metatable is _G.Point (a class)
-- Each part's cost is measured by collectgarbage("count") around its
-- creation (after full collections). Then OUT gets lines "NAME BYTES"
-- (total, cache, upcache, buf) and the target blocks in io.read()
-- (stdin: a FIFO nobody writes), so nothing allocates during the walk.
local out = assert(io.open(arg[1] .. ".tmp", "w"))
local function count()
	collectgarbage("collect")
	collectgarbage("collect")
	return collectgarbage("count") * 1024
end
local cost = {}
local c0 = count()
cache = {}
for i = 1, 100000 do
	cache[i] = { f1 = i, f2 = i, f3 = i, f4 = i, f5 = i, f6 = i, f7 = i, f8 = i, f9 = i, f10 = i }
end
cost.cache = count() - c0
package.loaded["heapmod"] = (function()
	local mod = { store = {} }
	for i = 1, 2000 do mod.store[i] = i end
	return mod
end)()
local function make_handler()
	local upcache = {}
	for i = 1, 50000 do upcache[i] = i end
	return function() return upcache end
end
c0 = count()
handler = make_handler()
cost.upcache = count() - c0
c0 = count()
worker = coroutine.create(function()
	local buf = {}
	for i = 1, 30000 do buf[i] = i end
	coroutine.yield()
	return buf
end)
coroutine.resume(worker)
cost.buf = count() - c0
makers = {}
for i = 1, 1234 do
	makers[i] = function() return i end -- MAKER
end
Point = {}
Point.__index = Point
points = {}
for i = 1, 567 do
	points[i] = setmetatable({ x = i, y = i }, Point)
end
-- last: string.rep grows the VM's buffer, which each collection then halves
big = string.rep("0123456789abcdef", 65536 * 10)
local total = count()
out:write(string.format("total %.0f\ncache %.0f\nupcache %.0f\nbuf %.0f\n", total, cost.cache,
	cost.upcache, cost.buf))
out:close()
os.rename(arg[1] .. ".tmp", arg[1])
io.read()
