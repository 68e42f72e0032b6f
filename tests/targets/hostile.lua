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
return function(seconds) -- os.clock (a system call) read once per 0.1 s
  local t0, k, c = os.clock(), 1, 0
  while c < seconds do
    for _ = 1, k do busy() end
    local d = os.clock() - t0; if d - c < 0.1 then k = k * 2 end; c = d
  end
end
]]
local f = assert((loadstring or load)(code, evil))()
f(tonumber(arg and arg[1]) or 60)
