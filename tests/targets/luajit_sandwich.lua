-- luajit_sandwich.lua: Lua calls C calls Lua, for luajit-sandwich.test.
--   luajit luajit_sandwich.lua CFIB_DIR [SECONDS] [joff]
-- Alternates a recursive C Fibonacci through a C module (sandwich_c) and
-- through the FFI (cfib), a recursive Lua Fibonacci (lfib), and a C
-- function that calls back into Lua (sandwich_cb -> lua_call -> lfib).
local dir, secs, mode = arg[1] or ".", tonumber(arg[2]) or 10, arg[3]
if mode == "joff" then jit.off() end
package.cpath = dir .. "/?.so;" .. package.cpath
local cfib = require("cfib")
local ffi = require("ffi")
ffi.cdef("int cfib(int n);")
local C = ffi.load(dir .. "/cfib.so")

local function lfib(n)
  if n < 2 then return n end
  return lfib(n - 1) + lfib(n - 2)
end

-- no tail calls: each via_* keeps its frame
local function via_module()
  local r = cfib.sandwich_c(25)
  return r
end

local function via_ffi()
  local r = C.cfib(25)
  return r
end

local function via_callback()
  local r = cfib.sandwich_cb(lfib, 21)
  return r
end

local function via_lua()
  local r = lfib(21)
  return r
end
-- os.clock (a system call: stops land there under load) once per 0.1 s
local t0, n, k, c = os.clock(), 0, 1, 0
while c < secs do
  for _ = 1, 10 * k do
    n = n + via_module() + via_ffi() + via_callback() + via_lua()
  end
  local d = os.clock() - t0; if d - c < 0.1 then k = k * 2 end; c = d
end
print("done", n)
