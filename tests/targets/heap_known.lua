-- heap_known.lua OUT: a heap of known shape for tests/heap-*.test.
-- _G.cache holds 100 000 tables of 10 fields; _G.big a 10 MiB string;
-- registry-side: package.loaded["heapmod"].store a table of 2000 slots.
-- After two full collections it writes collectgarbage("count") (KiB) to
-- OUT, then blocks in io.read() (stdin: a FIFO nobody writes) so that
-- nothing allocates while luaspy heap walks it.
local out = assert(io.open(arg[1] .. ".tmp", "w"))
cache = {}
for i = 1, 100000 do
	cache[i] = { f1 = i, f2 = i, f3 = i, f4 = i, f5 = i, f6 = i, f7 = i, f8 = i, f9 = i, f10 = i }
end
big = string.rep("0123456789abcdef", 65536 * 10)
local mod = { store = {} }
for i = 1, 2000 do mod.store[i] = i end
package.loaded["heapmod"] = mod
collectgarbage("collect")
collectgarbage("collect")
local kb = collectgarbage("count")
out:write(string.format("%.0f\n", kb * 1024))
out:close()
os.rename(arg[1] .. ".tmp", arg[1])
io.read()
