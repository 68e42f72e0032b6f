-- fork_child.lua LOG: a short-lived child of forker.sh: burns 0.15 s of
-- CPU in child_work (so it lives at least that long), then appends its
-- pid to LOG.
local ffi = require("ffi")
ffi.cdef("int getpid(void);")
local function child_work(s)
	local t0, x = os.clock(), 0
	while os.clock() - t0 < s do
		for i = 1, 1000 do x = x + i % 7 end
	end
	return x
end
child_work(0.15)
local f = assert(io.open(arg[1], "a"))
f:write(ffi.C.getpid(), "\n")
f:close()
