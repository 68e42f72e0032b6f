-- one_name.lua: one function reached three ways, for one-function-one-name.test:
-- called as global `leaf`, as a tail call from an anonymous callback, and
-- as the `__index` metamethod. Runs with luajit and lua5.1..5.4.
--   LUA one_name.lua [SECONDS]
local secs = tonumber(arg[1]) or 10
function leaf(t, k)                                   -- line 6: the prototype
  local s = 0
  for i = 1, 20000 do s = s + i % 7 end
  return s
end
local mt = setmetatable({}, { __index = leaf })
local cbs = { function(x) return leaf(x, 1) end }    -- a tail call
local function via_global() local r = leaf({}, 1) return r end
local function via_tail() local r = cbs[1]({}) return r end
local function via_index() local r = mt.missing return r end
-- os.clock (a system call: under load ptrace stops land there out of
-- proportion, docs/sampling.md §5.2) is read once per k rounds, k doubled
-- until they take 0.1 s of CPU
local t0, k, c = os.clock(), 1, 0
while c < secs do
  for _ = 1, k do via_global(); via_global(); via_tail(); via_index() end
  local d = os.clock() - t0; if d - c < 0.1 then k = k * 2 end; c = d
end
