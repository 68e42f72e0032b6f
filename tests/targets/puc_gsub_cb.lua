-- puc_gsub_cb.lua [SECONDS]: most of the time in a Lua callback of
-- string.gsub, a C function named only through package.loaded when the
-- interpreter is stripped.
local function cb(s) local x = 0 for i = 1, 20000 do x = x + i end return s end
local t0 = os.clock()
while os.clock() - t0 < tonumber(arg[1] or 20) do string.gsub("abcabc", "b", cb) end
