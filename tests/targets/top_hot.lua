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
local t0, acc = os.clock(), 0
while os.clock() - t0 < seconds do
  for r = 1, 10 do acc = acc + hot(400000) + warm(100000, 3) end
end
print(acc > 0)
