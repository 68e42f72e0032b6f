-- locals_hostile.lua: locals whose values carry terminal escapes: a
-- string with ESC [2J and a newline, a function from a chunk whose name
-- holds ESC [31m and a newline; paused in os.time for ARG[1] seconds
-- (default 60); prints "ready" once set.
local f = (loadstring or load)("return function() return 1 end", "=\27[31mred\nline")()
local function hold(s, g)
	local deadline = os.time() + (tonumber(arg and arg[1]) or 60)
	io.stdout:write("ready\n")
	io.stdout:flush()
	while os.time() < deadline do end
	return s, g
end
hold("\27[2Jclear\nnext", f)
