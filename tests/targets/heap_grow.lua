-- heap_grow.lua OUT: a steady heap (_G.base: 20 000 tables), then
-- "1" in OUT and a wait on stdin; each line read grows _G.grow by 10 000
-- tables of 3 fields and writes the next number to OUT
-- (tests/heap-diff.test: one table grows between two snapshots).
base = {}
for i = 1, 20000 do base[i] = { a = i, b = i, c = i } end
grow = {}
local function mark(n)
	collectgarbage("collect")
	collectgarbage("collect")
	local f = assert(io.open(arg[1] .. ".tmp", "w"))
	f:write(n, "\n")
	f:close()
	os.rename(arg[1] .. ".tmp", arg[1])
end
local n = 1
mark(n)
while io.read() do
	for i = #grow + 1, #grow + 10000 do grow[i] = { a = i, b = i, c = i } end
	n = n + 1
	mark(n)
end
