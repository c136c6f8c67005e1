-- examples/03-copies.lua: moving data between the host and a device: a:to, copy_from, cd.copy with offsets,
-- Lua tables and binary strings as sources, and pinned host memory for asynchronous copies. On the cpu
-- device every "device" array is host memory, and the same calls still work.
--
--   make build && build/luacuda examples/03-copies.lua
local cd = require "cudadev"

local dev = cd.get_device()
print("device:", dev.alias)

-- a:to(device) returns a copy on that device, or the array itself when it is already there.
local host = cd.array({ 1, 2, 3, 4, 5, 6, 7, 8 }, { device = "cpu" })
local d = host:to(dev)
local back = d:to("cpu")
print(d, back)
assert(host:to("cpu") == host)                      -- no copy when nothing moves

-- copy_from fills an existing array from an Array, a Lua table or a string of the same element count.
local d2 = cd.empty(8)
d2:copy_from(d)                                     -- device to device
d2:copy_from({ 8, 7, 6, 5, 4, 3, 2, 1 })            -- straight from a table
print(d2)

-- cd.copy(dst, src, {count=, dst_offset=, src_offset=}) copies part of an array: offsets and count are in
-- elements and start at 0, like the driver's byte offsets (a[1] is offset 0).
local dst = cd.zeros(10)
cd.copy(dst, host, { src_offset = 2, dst_offset = 5, count = 3 })   -- host[3..5] into dst[6..8]
cd.copy(dst, { 9, 9 })                                             -- a table: dst[1..2]
cd.copy(dst, string.pack("<ff", 0.5, 0.25), { dst_offset = 8 })     -- packed float32 bytes: dst[9..10]
print(dst)
assert(dst[6] == 3 and dst[8] == 5 and dst[1] == 9 and dst[10] == 0.25)

-- Copies check what they are given.
print(pcall(cd.copy, dst, cd.zeros(3, "int32")))   -- dtypes must match (a:view reinterprets bytes)
print(pcall(cd.copy, cd.zeros(2), host))            -- the destination must be large enough

-- Pinned (page-locked) host arrays let copies to and from a GPU run asynchronously on the stream, at full
-- speed. They live on the cpu device; without a CUDA driver they are ordinary host memory (is_pinned false).
local n = 1 << 20
local pinned = cd.empty(n, "float32", { pinned = true })
pinned:fill(1.5)
print(pinned, "is_pinned:", pinned.is_pinned)
local big = cd.empty(n)
cd.copy(big, pinned)                  -- returns at once on a GPU: the copy is queued on the current stream
big:fill(2.5)                         -- queued behind the copy, on the same stream
cd.copy(pinned, big)                  -- and the copy back, after that
-- Reading host memory that a queued copy still writes waits for that copy first, so this is safe:
print("pinned[1], pinned[n]:", pinned[1], pinned[n])
assert(pinned[n] == 2.5)

-- Copies take a stream (the default is the device's current stream) and keep every array they use alive
-- until they have run, so dropping `pinned` right after queueing a copy is fine.
local s = cd.stream()
s:wait_stream(cd.get_stream())        -- a new stream does not wait for the default one, where big was filled
local big2 = cd.empty_like(big)
cd.copy(big2, big, { stream = s })
s:synchronize()
print("big2[n]:", big2[n])

-- Freeing early keeps memory use down; the copies above finished or will finish before it is reused.
for _, a in ipairs { pinned, big, big2 } do a:free() end
