-- gc_finalizer.lua [SECONDS]: makes garbage whose finalizers (__gc) run
-- slow_finalizer, arithmetic only: nearly all of the program's time is
-- spent inside finalizers the collector calls (tests/record-gc-finalizer.test)
local function slow_finalizer()
  local s = 0
  for i = 1, 200000 do s = s + i % 7 end
  return s
end
local mt = { __gc = function() slow_finalizer() end }
local function make_garbage()
  for _ = 1, 50 do
    if newproxy then                     -- Lua 5.1 and LuaJIT: no __gc on tables
      local p = newproxy(true)
      getmetatable(p).__gc = function() slow_finalizer() end
    else
      setmetatable({}, mt)
    end
  end
  local t = {}
  for i = 1, 200 do t[i] = { i } end
end
local deadline = os.time() + (tonumber(arg and arg[1]) or 4)
while os.time() < deadline do make_garbage() end
