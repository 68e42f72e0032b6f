-- stackgen reproducer: Lua 5.1, CallInfo array exactly full.
-- base CallInfo, pmain, main chunk, rec(3) .. rec(0), sgmod.stop = 8
-- entries = BASIC_CI_SIZE, so L->ci == L->end_ci (valid in 5.1: lstate.c
-- sets end_ci = base_ci + size_ci - 1). luaspy: "torn read of a running
-- target". run.py --prog repro/puc51-ci-end.lua --runtime lua5.1 --seed 1
package.cpath = os.getenv("SG_CPATH") .. ";" .. package.cpath
local sgmod = require("sgmod")
local function rec(n)
  if n > 0 then
    local r = rec(n - 1)
    return r
  end
  sgmod.stop()
  return 0
end
rec(3)
rec(11)   -- 16 entries after the array grew
