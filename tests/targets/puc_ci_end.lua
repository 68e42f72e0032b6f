-- puc_ci_end.lua DEPTH: rec(DEPTH) .. rec(0), then block in io.read on
-- stdin (the test gives a FIFO nobody writes). Under lua5.1 the stack has
-- DEPTH + 5 CallInfos: base, pmain, main chunk, DEPTH + 1 x rec, io.read.
local depth = tonumber(arg[1])
local function rec(n)
  if n > 0 then
    local r = rec(n - 1)
    return r
  end
  io.stdout:write("ready\n")
  io.stdout:flush()
  return io.read()
end
rec(depth)
