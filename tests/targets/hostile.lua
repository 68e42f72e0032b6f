-- tests/targets/hostile.lua: functions whose chunkname holds markup,
-- quotes, ampersands, a ']]>', a ';', a newline, a NUL-free invalid
-- UTF-8 sequence: luaspy must escape them in every output format.
local evil = "=<script>alert(1)</script>&\"'; ]]>\n\255\254.lua"
local code = [[
local function busy()
  local s = 0
  for i = 1, 100000 do s = s + i end
  return s
end
return function(seconds)
  local t0 = os.clock()
  while os.clock() - t0 < seconds do busy() end
end
]]
local f = assert((loadstring or load)(code, evil))()
f(tonumber(arg and arg[1]) or 60)
