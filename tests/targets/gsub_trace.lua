-- gsub_trace.lua [SECS]: a string.gsub callback (cb, line 5) calling hot
-- (line 4), a loop LuaJIT compiles into a trace (its % calls a VM helper
-- on some builds); nearly all time is in hot (tests/dump-gsub-trace.test).
local function hot(n) local s = 0 for i = 1, n do s = (s + i * 7) % 1000003 end return s end
local function cb(c) return tostring(hot(3000000) + #c) end
-- the clock once in 64 rounds: a system call draws ptrace stops to itself
local t0, secs, k = os.time(), tonumber(arg[1]) or 20, 0
while k % 64 ~= 0 or os.time() - t0 < secs do string.gsub("abcabc", "b", cb) k = k + 1 end
