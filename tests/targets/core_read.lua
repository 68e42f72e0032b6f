-- core_read.lua: blocks in io.read (a C function of the Lua library in
-- libc's read) under two Lua calls (tests/dump-core-missing-lib.test).
local function waitin() local l = io.read() return l end    -- line 3
local function outer() local l = waitin() return l end       -- line 4
outer()                                                       -- line 5
