-- core_crash.lua: run by core_crash (core_crash.c): nested Lua calls down
-- to the C function crash(), which aborts (tests/dump-core-kernel.test).
local function boom(n)
  if n > 0 then boom(n - 1) return n end
  crash()                                                   -- line 5
end
local function start() boom(2) return 0 end                 -- line 7
start()                                                     -- line 8
