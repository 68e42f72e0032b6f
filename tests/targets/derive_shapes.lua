-- derive_shapes.lua: a known chain for the luajit-derive*.test, on any
-- LuaJIT build (Debian's, luajit2, Tarantool, TeX Live's through
-- derive_texhost): leaf calls the builtin string.format, whose name comes
-- from the registry's _LOADED tables (the derived GCstr header).
--   LUAJIT derive_shapes.lua [SECONDS] [joff]
local secs = tonumber(arg[1]) or 10
if arg[2] == "joff" then jit.off() end

local function leaf(n)
  local s = 0
  for i = 1, n do s = s + #string.format("%d %s %.3f %q", i, "x", i / 7, "y") end -- LEAF
  return s
end

local function middle(n)
  local r = leaf(n)
  return r
end

local function outer(n)
  local r = middle(n)
  return r
end

-- os.time is the vDSO, no system call (docs/sampling.md §5.2); one call
-- per outer() of several ms; the test kills the target
local t0, n, k = os.time(), 0, 0
while k % 64 ~= 0 or os.time() - t0 < secs do
  n = n + outer(2000) k = k + 1
end
print("done", n)
