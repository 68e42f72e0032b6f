-- fork_child.lua LOG: a short-lived child of forker.sh: burns 0.15 to
-- 0.3 s of CPU in child_work (so it lives at least that long), then
-- appends its pid to LOG. os.clock (a system call: under load ptrace stops
-- land there out of proportion, docs/sampling.md §5.2) is read once per k
-- rounds, k doubled until they take 0.1 s of CPU.
local ffi = require("ffi")
ffi.cdef("int getpid(void);")
local function child_work(s)
	local t0, x, k, c = os.clock(), 0, 1, 0
	while c < s do
		for _ = 1, k do for i = 1, 1000 do x = x + i % 7 end end
		local d = os.clock() - t0; if d - c < 0.1 then k = k * 2 end; c = d
	end
	return x
end
child_work(0.15)
local f = assert(io.open(arg[1], "a"))
f:write(ffi.C.getpid(), "\n")
f:close()
