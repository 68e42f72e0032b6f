-- tests/targets/top_hot.lua: a busy loop for `luaspy top` where hot()
-- does 80 % of the work and warm() 20 %, the latter at the bottom of a
-- 4-deep recursion (a function must count once per sample in %Total).
-- Each loop body is one line, so per-line rows are "hot (top_hot.lua:8)"
-- and "warm (top_hot.lua:13)", per-function rows "hot (top_hot.lua:7)"
-- and "warm (top_hot.lua:11)". Runs for arg[1] seconds of CPU (default 20).
function hot(n)
  local s = 0 for i = 1, n do s = s + i * 0.5 end
  return s
end
function warm(n, depth)
  if depth > 0 then local s = warm(n, depth - 1) return s end
  local s = 0 for i = 1, n do s = s + i * 0.5 end
  return s
end
local seconds = tonumber(arg and arg[1]) or 20
-- os.clock (a system call: under load ptrace stops land there out of
-- proportion, docs/sampling.md §5.2) is read once per k*10 rounds, k
-- doubled until they take 0.1 s of CPU
local t0, acc, k, c = os.clock(), 0, 1, 0
while c < seconds do
  for r = 1, 10 * k do acc = acc + hot(400000) + warm(100000, 3) end
  local d = os.clock() - t0; if d - c < 0.1 then k = k * 2 end; c = d
end
print(acc > 0)
