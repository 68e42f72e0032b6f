-- A deep recursion that blocks at its bottom: rec(DEPTH) calls itself down
-- to rec(1), which blocks in io.open on the fifo FIFO (no writer), so
-- the DEPTH Lua frames stay on the stack. Used by luajit-deep-stack.test.
local depth, fifo = tonumber(arg[1]), arg[2]
local function rec(n)
	if n == 1 then
		io.write("ready\n")
		io.flush()
		local f = io.open(fifo)
		return f
	end
	local r = rec(n - 1)
	return r
end
rec(depth)
