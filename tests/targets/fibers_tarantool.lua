-- fibers_tarantool.lua MODE: three fibers named by the script for
-- tests/dump-fibers.test: "alpha" and "beta" sleep in fiber.sleep
-- loops; "gamma" runs gamma_leaf and yields between bursts (MODE busy)
-- or sleeps too (MODE idle: the thread waits in epoll_wait). MODE pair
-- (tests/record-coroutines-tarantool.test): alpha runs alpha_leaf as
-- gamma runs gamma_leaf (bodies alpha_busy, gamma_busy). Prints
-- "ready" once the three are named; runs until killed (10 min at most).
local fiber = require('fiber')
local mode = arg[1] or 'busy'
local function sleeper(d)
  while true do fiber.sleep(d) end
end
local function gamma_leaf(n)
  local s = 0
  for i = 1, n do s = s + (i * 7) % 13 end
  return s
end
local function alpha_leaf(n)
  local s = 1
  for i = 1, n do s = s + (i * 5) % 11 end
  return s
end
local function gamma_busy()
  local x = 0
  while true do
    x = x + gamma_leaf(200000)
    fiber.yield()
  end
end
local function alpha_busy()
  local x = 0
  while true do
    x = x + alpha_leaf(200000)
    fiber.yield()
  end
end
local a = mode == 'pair' and fiber.create(alpha_busy) or fiber.create(sleeper, 0.05)
a:name('alpha')
local b = fiber.create(sleeper, 0.07)
b:name('beta')
local c = mode ~= 'idle' and fiber.create(gamma_busy) or fiber.create(sleeper, 0.09)
c:name('gamma')
io.write('ready\n')
io.flush()
fiber.sleep(600)
os.exit(0)
