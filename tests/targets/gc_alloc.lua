-- gc_alloc.lua: two hot functions in alternation, for record-gc.test:
-- alloc_work() allocates tables and strings in a loop (the collector's
-- steps run under it), calc_work() does arithmetic on numbers only (it
-- allocates nothing, so no GC step starts under it). Any Lua 5.1-5.4 or
-- LuaJIT.
--   lua gc_alloc.lua [SECONDS]
local secs = tonumber(arg and arg[1]) or 10
local keep = {}
local function alloc_work()
  for i = 1, 3000 do
    keep[i % 700 + 1] = { i, { i, i + 1 }, tostring(i) .. "x" }
  end
end
local function calc_work()
  local s = 0
  for i = 1, 60000 do s = (s + i * 7) % 1000003 end
  return s
end
-- os.clock (a system call: under load ptrace stops land there out of
-- proportion, docs/sampling.md §5.2) is read once per k rounds, k doubled
-- until they take 0.1 s of CPU
local t0, k, c = os.clock(), 1, 0
while c < secs do
  for _ = 1, k do alloc_work(); calc_work() end
  local d = os.clock() - t0; if d - c < 0.1 then k = k * 2 end; c = d
end
