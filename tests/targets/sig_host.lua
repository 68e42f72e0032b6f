-- sig_host.lua: spins in Lua until SIGALRM's handler (sig_host.c) takes
-- the thread; the handler never returns
local function work(n)
  local x = 0
  while true do
    x = x + n                                  -- line 6
  end
end
local function start()
  arm()
  work(1)                                      -- line 11
end
start()                                        -- line 13
