-- locals_coros.lua: three coroutines suspended in worker() (defined on
-- line 4) and one dead, while the main thread spins in os.time for
-- ARG[1] seconds (default 60). Prints "ready" once they are set up.
local function worker(n)
	local acc = n
	while true do
		acc = acc + coroutine.yield(acc)
	end
end
local cos = {}
for i = 1, 3 do
	local co = coroutine.create(worker)
	coroutine.resume(co, i)
	cos[i] = co
end
local dead = coroutine.create(function() return 1 end)
coroutine.resume(dead)
local deadline = os.time() + (tonumber(arg and arg[1]) or 60)
io.stdout:write("ready\n")
io.stdout:flush()
while os.time() < deadline do end
