-- core_exec.lua: blocks in os.execute (libc's system, waiting in wait4
-- for a shell that reads the standard input) under two Lua calls, no
-- tail call among them (tests/dump-core-missing-lib.test).
local function runner() local ok = os.execute("read x") return ok end   -- line 4
local function outer() local ok = runner() return ok end                -- line 5
outer()                                                                  -- line 6
