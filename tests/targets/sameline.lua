-- sameline.lua: two functions defined on one line (A does 1/4 of the work,
-- B 3/4): one name per function must not merge them into one row
-- (tests/one-name-same-line.test). Runs 60 s.
local A, B = function(n) local s=0 for i=1,n do s=s+i%3 end return s end, function(n) local s=0 for i=1,n do s=s+i%5 end return s end
local t0 = os.time()
while os.time() - t0 < 60 do local x = A(300000) for j=1,3 do x = B(300000) end end
