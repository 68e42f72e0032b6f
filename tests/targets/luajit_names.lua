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

-- each caller in turn for k calls, k doubled until a round of the five
-- takes 0.5 s of CPU; os.clock (a system call: under load ptrace stops
-- land there out of proportion, docs/sampling.md §5.2) is read once a round
local t0, k, c = os.clock(), 1, 0
while c < secs do
  for p = 0, 4 do for _ = 1, k do
  if p == 0 then local a = M.x()
  elseif p == 1 then local b = obj:m()
  elseif p == 2 then local c = gfun()
  elseif p == 3 then local d = loc()
  else local e = uses_up() end
  end end
  local d = os.clock() - t0; if d - c < 0.5 then k = k * 2 end; c = d
end
