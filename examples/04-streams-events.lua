-- examples/04-streams-events.lua: streams (ordered queues of work), events (markers on them), timing with
-- events, making one stream wait for another, and the current stream. Work is asynchronous: a call queues
-- it and returns; synchronize, or read the results, to wait. The cpu device keeps the same ordering rules.
--
--   make build && build/luacuda examples/04-streams-events.lua
local cd = require "cudadev"

local dev = cd.get_device()
local n = 1 << 22

-- Each device starts with its default stream current; new streams run independently of each other.
print("current stream:", cd.get_stream())
local s1 = cd.stream()                                   -- on the default device
local s2 = cd.stream(dev, { priority = -1 })             -- lower numbers run first where the device has priorities
print(s1, s2, "priority", s2.priority, "on", s2.device.alias)

-- Work on a stream: most calls take {stream=}. Arrays made with a stream are allocated in its order.
local a = cd.full(n, 3.0)                                -- filled on the current (default) stream
local b = cd.empty(n, "float32", { stream = s1 })
s1:wait_stream(cd.get_stream())                          -- new streams do not wait for the default one: ask

-- Timing: two events recorded on the stream around the work; elapsed gives milliseconds between them once
-- the later one has happened.
local start, stop = cd.event(), cd.event()
start:record(s1)
for _ = 1, 10 do cd.copy(b, a, { stream = s1 }) end
stop:record(s1)
stop:synchronize()                                       -- wait for the event, not for the whole device
print(("10 copies of %d MiB: %.3f ms (cd.elapsed_time says %.3f)"):format(n * 4 >> 20, start:elapsed(stop),
  cd.elapsed_time(start, stop)))

-- Ordering between streams, without blocking the host: s2 waits for what s1 has queued so far.
local done_on_s1 = s1:record_event()                     -- a new event, recorded on s1
s2:wait_event(done_on_s1)                                -- later work on s2 waits for it
local c = cd.empty(n, "float32", { stream = s2 })
cd.copy(c, b, { stream = s2 })                           -- runs after the copies on s1
s2:wait_stream(s1)                                       -- the same in one call (an event in between)
s2:synchronize()
print("c[n] after the wait:", c[n], "idle:", s1:query(), s2:query(), done_on_s1:query())
assert(c[n] == 3.0)

-- The current stream is where work goes when no stream is named. with_stream makes a stream current for
-- the length of a function, and restores the previous one afterwards, also on error.
cd.with_stream(s2, function()
  assert(cd.get_stream() == s2)
  c:fill(4.0)                                            -- fill takes no stream: it uses the current one
end)
assert(cd.get_stream() ~= s2)
s2:synchronize()
print("c[1] after with_stream:", c[1])

-- set_stream changes it until changed back.
local previous = cd.get_stream()
cd.set_stream(s1)
c:zero()
cd.set_stream(previous)
s1:synchronize()

-- Events made with timing = false are cheaper markers for ordering only; they cannot be timed.
local marker = cd.event({ timing = false })
marker:record(s1)
s2:wait_event(marker)
print(pcall(start.elapsed, start, marker))

-- Wait for everything on every device.
cd.synchronize()
