-- Nested protected calls that block at their bottom: rec(DEPTH) calls
-- pcall(rec, n - 1) down to rec(0), which blocks in io.open on the fifo
-- FIFO (no writer). Each level is a C call into a new VM invocation, so
-- the native stack holds several frames per level (over 256 at DEPTH 60).
-- Used by native-walk-cut.test.
local depth, fifo = tonumber(arg[1]), arg[2]
local function rec(n)
	if n == 0 then
		io.write("ready\n")
		io.flush()
		return io.open(fifo)
	end
	local ok, r = pcall(rec, n - 1)
	return r
end
rec(depth)
