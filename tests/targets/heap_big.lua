-- heap_big.lua OUT N: N tables of 10 fields in _G.cache, then "ready" in
-- OUT and a block in io.read() (tests/heap-target-exits.test: a walk long
-- enough to kill the target in its middle).
cache = {}
for i = 1, tonumber(arg[2]) do
	cache[i] = { f1 = i, f2 = i, f3 = i, f4 = i, f5 = i, f6 = i, f7 = i, f8 = i, f9 = i, f10 = i }
end
local out = assert(io.open(arg[1], "w"))
out:write("ready\n")
out:close()
io.read()
