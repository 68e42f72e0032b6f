-- gc_redis.lua: gc_alloc.lua as a Redis script (EVAL, Redis's Lua 5.1,
-- no globals): alloc_work builds tables and strings, calc_work does
-- arithmetic only, for ARGV[1] seconds (record-gc-redis.test). The
-- clock is Redis's TIME, read once per 4 rounds.
local function alloc_work(keep)
  for i = 1, 3000 do keep[i % 700 + 1] = { i, { i, i + 1 }, tostring(i) .. "x" } end
end
local function calc_work()
  local s = 0
  for i = 1, 60000 do s = (s + i * 7) % 1000003 end
  return s
end
local function now() local t = redis.call("TIME") return tonumber(t[1]) + tonumber(t[2]) / 1e6 end
local keep, t0 = {}, now()
while now() - t0 < tonumber(ARGV[1]) do
  for _ = 1, 4 do alloc_work(keep); calc_work() end
end
return 1
