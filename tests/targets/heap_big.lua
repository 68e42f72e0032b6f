-- heap_big.lua OUT N: N tables in _G.cache, each holding an empty table
-- (2 N small objects: the walk's time goes by objects), then "ready" in
-- OUT and a block in io.read() (tests/heap-target-exits.test: a walk long
-- enough to kill the target in its middle).
cache = {}
for i = 1, tonumber(arg[2]) do
	cache[i] = { {} }
end
local out = assert(io.open(arg[1], "w"))
out:write("ready\n")
out:close()
io.read()
