-- luajit_ffi_names.lua: builtins without a library table name, for
-- luajit-builtin-names.test: an FFI call (ffi.C.poll, blocking) made from
-- a coroutine.wrap function (LuaJIT's coroutine.wrap_aux builtin), and
-- ffi.C.qsort calling back into Lua. jit.off(): the FFI calls go through
-- the cdata __call builtin, as in the interpreter.
--   luajit luajit_ffi_names.lua poll|qsort [SECONDS]
local ffi = require("ffi")
jit.off()
ffi.cdef[[
int poll(void *fds, unsigned long nfds, int timeout);
void qsort(void *base, size_t n, size_t size, int (*cmp)(const void *, const void *));
]]
local mode, secs = arg[1] or "poll", tonumber(arg[2]) or 10
local function sleeper() while true do ffi.C.poll(nil, 0, 1000) end end
local function cmp(a, b)
  local x, y = ffi.cast("const int *", a)[0], ffi.cast("const int *", b)[0]
  return x < y and -1 or (x > y and 1 or 0)
end
local cb = ffi.cast("int (*)(const void *, const void *)", cmp)
local function sorter()
  local n = 5000
  local arr = ffi.new("int[?]", n)
  -- os.clock (a system call: under load ptrace stops land there out of
  -- proportion, docs/sampling.md §5.2) read once per 0.1 s of CPU
  local t0, k, c = os.clock(), 1, 0
  while c < secs do
    for _ = 1, k do
      for i = 0, n - 1 do arr[i] = (i * 7919) % n end
      ffi.C.qsort(arr, n, 4, cb)
    end
    local d = os.clock() - t0; if d - c < 0.1 then k = k * 2 end; c = d
  end
end
if mode == "poll" then coroutine.wrap(sleeper)() else sorter() end
