-- tests/targets/top_wide.lua: three busy functions with names a narrow
-- `top` must fit: a long ASCII name and two non-ASCII ones (Cyrillic,
-- 1 column a character; Japanese, 2 columns), each defined on its own
-- line 5, 6, 7 (tests/top-tmux-fit.test). Runs arg[1] seconds (default 60).
function a_really_really_long_function_name_that_goes_on_and_on(n) local s = 0 for i = 1, n do s = s + i end return s end
_G["функция_с_юникод"] = function(n) local s = 0 for i = 1, n do s = s + i end return s end
_G["日本語の関数名"] = function(n) local s = 0 for i = 1, n do s = s + i end return s end
local t0, secs = os.time(), tonumber(arg and arg[1]) or 60
while os.time() - t0 < secs do
  a_really_really_long_function_name_that_goes_on_and_on(3e5)
  _G["функция_с_юникод"](2e5)
  _G["日本語の関数名"](2e5)
end
