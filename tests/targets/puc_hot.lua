-- puc_hot.lua [SECS]: one known hot line. The last call before the loop
-- is on line 5; the loop has no call and (5.4) no instruction that saves
-- pc, so a stale savedpc would report line 5.
local function hot(limit)
  local x = 0 io.write("")                   -- line 5: last call
  while x < limit do x = x + 1 end           -- line 6: HOT
  return x
end
hot((tonumber(arg[1]) or 10) * 5e7)
