-- puc_gsub_cb.lua [SECONDS]: most of the time in a Lua callback of
-- string.gsub, a C function named only through package.loaded when the
-- interpreter is stripped.
local function cb(s) local x = 0 for i = 1, 20000 do x = x + i end return s end
-- os.clock (a system call: under load ptrace stops land there out of
-- proportion, docs/sampling.md §5.2) is read once per k calls, k doubled
-- until they take 0.1 s of CPU
local t0, k, c, secs = os.clock(), 1, 0, tonumber(arg[1] or 20)
while c < secs do
  for _ = 1, k do string.gsub("abcabc", "b", cb) end
  local d = os.clock() - t0; if d - c < 0.1 then k = k * 2 end; c = d
end
