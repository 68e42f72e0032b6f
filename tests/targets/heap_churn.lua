-- heap_churn.lua OUT: _G.cache holds 100 000 tables of 10 fields (they
-- never change), then OUT gets "ready" and the target churns its heap
-- for ever: _G.ring's 5000 slots get new tables and strings, the old
-- ones become garbage, the collector runs (tests/heap-nonblocking.test
-- walks it without stopping it and kills it).
cache = {}
for i = 1, 100000 do
	cache[i] = { f1 = i, f2 = i, f3 = i, f4 = i, f5 = i, f6 = i, f7 = i, f8 = i, f9 = i, f10 = i }
end
ring = {}
local out = assert(io.open(arg[1] .. ".tmp", "w"))
out:write("ready\n")
out:close()
os.rename(arg[1] .. ".tmp", arg[1])
local i = 0
while true do
	i = i + 1
	ring[i % 5000 + 1] = { i, i + 1, tostring(i), name = "n" .. i }
end
