-- stackgen reproducer: LuaJIT with the JIT on. h() is inlined into the
-- trace of the loop in hot(); the FFI stop runs inside that trace. The
-- true stack is h (line 16) <- hot (line 22) <- main chunk; the dump shows
-- hot and main chunk only (with -joff it shows h too). The truth past the
-- FFI call comes from sgmod.prepare() (line 20) and
-- luajit-trace-inlined.ffistops.json (h's frame, hot's line).
-- run.py --prog repro/luajit-trace-inlined.lua --runtime luajit --seed 1
package.cpath = os.getenv("SG_CPATH") .. ";" .. package.cpath
local sgmod = require("sgmod")
local ffi = require("ffi")
ffi.cdef("int sgmod_ffi_stop(int id, int i, int at);")
local C = ffi.load(os.getenv("SG_SO"))
local function hot()
  local function h(i)
    local v = i * 2
    v = v + C.sgmod_ffi_stop(1, i, 300)
    return v
  end
  local x = 0
  sgmod.prepare()
  for i = 1, 400 do
    x = x + h(i)
  end
  return x
end
hot()
