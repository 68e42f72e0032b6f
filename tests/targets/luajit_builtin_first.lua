-- luajit_builtin_first.lua: every moment inside builtins, for
-- luajit-builtin-names.test: main chunk -> pcall -> work, which tail-calls
-- string.gsub, whose callback spin burns the time. The first sample of any
-- record therefore holds pcall and string.gsub: their names must be known
-- by then (no "[builtin#N]"). jit.off(): builtins called from the
-- interpreter, frames on the Lua stack.
--   luajit luajit_builtin_first.lua [SECONDS]
jit.off()
local secs = tonumber(arg[1]) or 60
local function spin(c)
  local x = 0
  for i = 1, 200 do x = x + i end
  return c
end
local function work() return (("x"):rep(50)):gsub("x", spin) end
local t0, k = os.time(), 0
while k % 64 ~= 0 or os.time() - t0 < secs do pcall(work) k = k + 1 end
