-- coro_gsub.lua [SECS]: the main thread in a string.gsub callback (cb,
-- line 9) that resumes one of three worker coroutines (line 6), each busy
-- in work (line 4) between yields (tests/dump-coroutines-moment.test).
local function work(n) local s = 0 for i = 1, n do s = (s + i * 7) % 1000003 end return s end
local function worker(id)
	while true do id = coroutine.yield(work(2000000 + id)) end
end
local cos = {} for i = 1, 3 do cos[i] = coroutine.create(worker) end
local function cb(c) local co = cos[c:byte() % 3 + 1] coroutine.resume(co, 1) return c end
local t0, secs, k = os.time(), tonumber(arg[1]) or 20, 0   -- the clock once in 64 rounds
while k % 64 ~= 0 or os.time() - t0 < secs do string.gsub("abc", "%a", cb) k = k + 1 end
