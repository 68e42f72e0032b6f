-- heap_osexit.lua OUT: _G.cache holds 20 000 tables; OUT gets "ready",
-- then the target blocks in io.read() (stdin: a FIFO) and, once a line
-- comes, leaves by os.exit(3): no lua_close, the heap is never freed
-- (tests/heap-command.test, the snapshot at the exit stop).
cache = {}
for i = 1, 20000 do
	cache[i] = { a = i, b = i }
end
local out = assert(io.open(arg[1] .. ".tmp", "w"))
out:write("ready\n")
out:close()
os.rename(arg[1] .. ".tmp", arg[1])
io.read()
os.exit(3)
