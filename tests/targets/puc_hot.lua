-- puc_hot.lua [SECS]: one known hot line. The only call in the loop is
-- os.clock() on line 5; a stale savedpc (5.1, 5.4) would report line 5.
local function hot(dur)
  local t0, x = os.clock(), 0
  while os.clock() - t0 < dur do             -- line 5: the only call
    for i = 1, 20000000 do x = x + i end     -- line 6: HOT
  end
  return x
end
hot(tonumber(arg[1]) or 10)
