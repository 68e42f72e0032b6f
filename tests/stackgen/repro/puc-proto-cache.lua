-- stackgen reproducer: PUC Lua 5.1-5.4, 200 distinct functions on one
-- stack. Two of their Protos almost surely share a slot of the walker's
-- direct-mapped Proto cache (1024 slots): proto_get() frees the first
-- while walk_once() still uses it. Shows as line 0, a garbage line, a lost
-- name or a SIGSEGV in getobjname; valgrind always sees it:
-- run.py --prog repro/puc-proto-cache.lua --runtime lua5.4 --seed 1 --valgrind
package.cpath = os.getenv("SG_CPATH") .. ";" .. package.cpath
local sgmod = require("sgmod")
local F = {}
local src = {}
for i = 0, 199 do
  -- one chunk per function: a distinct Proto each
  src[i] = string.format("local F, sgmod = ... return function() local x = %s return x end",
    i == 199 and "sgmod.stop()" or string.format("F[%d]()", i + 1))
  F[i] = assert(loadstring or load)(src[i], "=f" .. i)
end
for i = 0, 199 do F[i] = F[i](F, sgmod) end
F[0]()
