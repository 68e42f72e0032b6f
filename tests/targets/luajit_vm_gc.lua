-- luajit_vm_gc.lua: time in the VM's own code, for luajit-vm-labels.test:
-- churn() allocates hard (the GC runs under it), modloop() uses % in a
-- hot loop (a trace calls the VM's modulo helper).
--   luajit luajit_vm_gc.lua [SECONDS]
local secs = tonumber(arg[1]) or 10
local keep = {}
local function churn()
  for i = 1, 2000 do keep[i % 500 + 1] = { i, { i }, tostring(i) .. "x" } end
end
local function modloop()
  local s = 0
  for i = 1, 200000 do s = (s + i * 3) % 1000003 end
  return s
end
-- os.clock (a system call: under load ptrace stops land there out of
-- proportion, docs/sampling.md §5.2) is read once per k rounds, k doubled
-- until they take 0.1 s of CPU
local t0, k, c = os.clock(), 1, 0
while c < secs do
  for _ = 1, k do churn(); modloop() end
  local d = os.clock() - t0; if d - c < 0.1 then k = k * 2 end; c = d
end
