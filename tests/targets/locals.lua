-- locals.lua: one function with known locals and an upvalue, paused in
-- a busy loop (os.time, not os.clock: under load os.clock's system call
-- is where dumps land) for ARG[1] seconds (default 60). Prints "ready"
-- once the locals are set. Read by tests/dump-locals-*.test: keep the
-- names, values and lines in step with them.
local counter = 7
local mt = { __name = "Point" }
local function work(n, s)
	local f = 1.5
	local t = setmetatable({ 10, 20, 30, x = { y = 1 }, z = "w" }, mt)
	local long = string.rep("x", 300)
	local flag = true
	local nothing = nil
	counter = counter + 1
	local deadline = os.time() + (tonumber(arg and arg[1]) or 60)
	io.stdout:write("ready\n")
	io.stdout:flush()
	while os.time() < deadline do end
	return n, s, f, t, long, flag, nothing
end
work(42, "a\"<>&\n\255z")
