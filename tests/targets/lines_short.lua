-- lines_short.lua: a fixed amount of Lua work (about 1 s of CPU),
-- then exits: a target that is gone before luaspy writes its profile
-- (tests/record-lines-exited.test)
local function f(n) local s = 0 for i = 1, n do s = s + i % 7 end return s end
for _ = 1, 600 do f(200000) end
