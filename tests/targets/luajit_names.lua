-- luajit_names.lua: function names as debug.getinfo(level, "n") infers
-- them from the caller's bytecode, for luajit-names.test.
--   luajit luajit_names.lua [SECONDS] [joff]
local secs = tonumber(arg[1]) or 10
if arg[2] == "joff" then jit.off() end
local function spin() local s = 0 for i = 1, 100000 do s = s + i % 7 end return s end

local M = {}
function M.x() local r = spin() return r end            -- field 'x'
local obj = {}
function obj:m() local r = spin() return r end          -- method 'm'
function gfun() local r = spin() return r end           -- global 'gfun'
local function loc() local r = spin() return r end      -- local 'loc'
local up = function() local r = spin() return r end     -- upvalue 'up' in uses_up
local function uses_up() local r = up() return r end

local t0 = os.clock()
while os.clock() - t0 < secs do
  local k = math.floor((os.clock() - t0) * 10) % 5
  if k == 0 then local a = M.x()
  elseif k == 1 then local b = obj:m()
  elseif k == 2 then local c = gfun()
  elseif k == 3 then local d = loc()
  else local e = uses_up() end
end
