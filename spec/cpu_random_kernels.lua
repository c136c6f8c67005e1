-- Random valid CUDA kernels for the cpu device's fast paths (issue #29): every kernel is run on its fast path
-- and on the fibers (a dead `if (0) __syncwarp();` forces them) with the same inputs, and the integer results
-- are compared exactly. Valid CUDA only: conditions around barriers are block-uniform (parameters, blockIdx,
-- loop counters), shared memory is written and read on opposite sides of a barrier, warp operations use the
-- full mask with every lane present (blocks are whole warps), atomics give order-independent results
-- (unsigned sums). Arithmetic is unsigned, so wrapping is defined. Device functions with barriers called as
-- statements (written into the kernel: NOTE [inlined helpers]), warp operations in declarations and larger
-- expressions, loops of shuffles (NOTE [warp chains]), and 32- and 64-bit indices are among what it writes.
--
-- gen(seed, count) returns the source, the entries to ask for (name_expressions for templates) and, per
-- entry, its launch: { name =, block = {x, y}, nt = threads per block }.
local M = {}

local function lcg(seed)
  local s = seed & 0x7fffffff
  return function(n) -- 1 .. n
    s = (s * 1103515245 + 12345) & 0x7fffffff
    return (s >> 8) % n + 1
  end
end

-- statements that change v (the thread's value), each valid anywhere in the kernel's body
local function stmts(r, depth, ctx)
  local out = {}
  local function add(s) out[#out + 1] = s end
  local function exchange()
    local off = r(ctx.nt) - 1
    add(("s[t] = v; %s; v += s[(t + %du) %% %du] * %du; %s;"):format(ctx.sync(), off, ctx.nt, r(7), ctx.sync()))
  end
  local n = r(4) + 1
  for _ = 1, n do
    local kind = r(depth > 0 and 13 or 6)
    local id = ctx.next()
    if kind == 1 then
      add(("v = v * %du + %du;"):format(r(9), r(1000)))
    elseif kind == 2 then
      add(("if (t %% %du == 0) v ^= %du;"):format(r(5) + 1, r(255))) -- divergent, no barrier
    elseif kind == 3 then
      exchange()
    elseif kind == 4 then -- a local that lives across a barrier and changes after it
      add(("unsigned w%d = v ^ %du;"):format(id, r(99)))
      exchange()
      if r(2) == 1 then
        add(("w%d += v; v = w%d * 3u;"):format(id, id))
      else -- read as ?:'s last operand too
        add(("w%d += v; v = (v & 1u) ? w%d * 3u : w%d + 1u;"):format(id, id, id))
      end
    elseif kind == 5 and ctx.warp then -- a warp operation of some kind and width
      local widths = { 32, 16, 8, 4 }
      local wdt = widths[r(4)]
      local ops = {
        ("__shfl_sync(0xffffffffu, v, %d, %d)"):format(r(wdt) - 1, wdt),
        ("__shfl_up_sync(0xffffffffu, v, %d, %d)"):format(r(wdt) - 1, wdt),
        ("__shfl_down_sync(0xffffffffu, v, %d, %d)"):format(r(wdt) - 1, wdt),
        ("__shfl_xor_sync(0xffffffffu, v, %d, %d)"):format(r(wdt) - 1, wdt),
        "__ballot_sync(0xffffffffu, v & 1u)",
        "__any_sync(0xffffffffu, (v & 7u) == 0u)",
        "__all_sync(0xffffffffu, v != 12345u)",
      }
      local op = ops[r(#ops)]
      local form = r(6)
      if form == 1 then -- a declaration (NOTE [warp fission])
        add(("unsigned x%d = (unsigned)%s; v += x%d;"):format(id, op, id))
      elseif form == 5 then -- a declaration with a larger expression around the operation
        add(("unsigned x%d = %s * %du + v; v = x%d;"):format(id, op, r(9), id))
      elseif form == 6 then -- an assignment with a larger expression around it
        add(("v = (v ^ %du) + %s * %du;"):format(r(99), op, r(9)))
      elseif form == 2 then -- a cast around it
        add(("v += (unsigned)%s;"):format(op))
      else
        local sym, kind_ = r(2) == 1 and "+" or "^", form == 3 and op:match("^__shfl_(%a+)_sync")
        if kind_ then -- a loop of them, a chain (NOTE [warp chains])
          add(("for (int o%d = %d; o%d > 0; o%d >>= 1) v %s= __shfl_%s_sync(0xffffffffu, v, o%d, %d);"):format(id,
            wdt // 2, id, id, sym, kind_, id, wdt))
        else
          add(("v %s= %s;"):format(sym, op))
        end
      end
    elseif kind == 5 or kind == 6 then -- an atomic sum, read by all after a barrier
      add(("if (t == 0) acc = 0u; %s; atomicAdd(&acc, v & 15u); %s; v += acc; %s;"):format(ctx.sync(), ctx.sync(),
        ctx.sync()))
    elseif kind == 7 then -- a barrier loop
      add(("for (int r%d = 0; r%d < %d; r%d++) {"):format(id, id, r(3), id))
      for _, s in ipairs(stmts(r, depth - 1, ctx)) do add("  " .. s) end
      add(("  v += (unsigned)r%d;"):format(id))
      add("}")
    elseif kind == 8 then -- a block-uniform if / else around barriers
      local conds = { "n > %d", "blockIdx.x %% 2u == %du", "(int)blockIdx.x < n - %d" }
      add(("if (" .. conds[r(#conds)] .. ") {"):format(r(3) - 1))
      for _, s in ipairs(stmts(r, depth - 1, ctx)) do add("  " .. s) end
      if r(2) == 1 then
        add("} else {")
        for _, s in ipairs(stmts(r, depth - 1, ctx)) do add("  " .. s) end
      end
      add("}")
    elseif kind == 9 then -- a do loop with barriers, its counter changed in its body
      add(("int c%d = 0;"):format(id))
      add("do {")
      for _, s in ipairs(stmts(r, depth - 1, ctx)) do add("  " .. s) end
      add(("  c%d++;"):format(id))
      add(("} while (c%d < %d);"):format(id, r(2)))
    elseif kind == 10 then -- a while loop with barriers
      add(("int q%d = %d;"):format(id, r(3)))
      add(("while (q%d > 0) {"):format(id))
      for _, s in ipairs(stmts(r, depth - 1, ctx)) do add("  " .. s) end
      add(("  q%d--;"):format(id))
      add("}")
    elseif kind == 11 then -- a helper taking a value, a reference and a pointer
      add(("v = mix(v, v, &s[0]) + %du;"):format(r(50)))
    elseif kind == 12 then -- a device function holding barriers, called as a statement (NOTE [inlined helpers])
      add(("s[t] = v; %s; rot(s, t, %du, %du); v ^= s[t]; %s;"):format(ctx.sync(), ctx.nt, r(9), ctx.sync()))
    else -- one that changes the thread's local through a pointer
      add(("step(s, t, %du, &v);"):format(ctx.nt))
    end
  end
  return out
end

function M.gen(seed, count)
  local r = lcg(seed)
  local src = {
    "#define SYNC() __syncthreads()",
    "__device__ unsigned mix(unsigned a, unsigned &b, const unsigned *p) { b += 1u; return a * 33u + b + (p != 0); }",
    "__device__ void rot(unsigned *s, unsigned t, unsigned nt, unsigned k)",
    "{",
    -- both reads before the barrier: a read of s[t + 1] after it would race with thread t + 1's store (the GPU
    -- run found it: another warp's s[0] read old or new)
    "  unsigned m = s[t] * k, r = s[(t + 1u) % nt]; // m and t are names the kernels use too",
    "  __syncthreads();",
    "  s[t] = m + r;",
    "  __syncthreads();",
    "}",
    "__device__ void step(unsigned *s, unsigned t, unsigned nt, unsigned *v)",
    "{",
    "  s[t] = *v;",
    "  SYNC();",
    "  *v += s[(t + 3u) % nt] ^ 5u;",
    "  __syncthreads();",
    "}",
  }
  local entries, launches = {}, {}
  local id = 0
  for i = 1, count do
    local nts = { 32, 64, 96, 128 }
    local nt = nts[r(#nts)]
    local two_d = r(3) == 1
    local bx = two_d and nt // 4 or nt
    local ctx = { nt = nt, warp = true, next = function() id = id + 1 return id end,
      sync = function() return r(4) == 1 and "SYNC()" or "__syncthreads()" end }
    local tmpl, cxx = r(3) == 1, r(2) == 1
    local name = "k" .. i
    local body = stmts(r, 2, ctx)
    local head
    if tmpl then
      head = ("template <unsigned NT>\n__global__ void %s(const unsigned *in, unsigned *out, int n)"):format(name)
    else
      head = ("%s__global__ void %s(const unsigned *in, unsigned *out, int n)"):format(cxx and "" or 'extern "C" ', name)
    end
    local dyn = r(3) == 1
    src[#src + 1] = head
    src[#src + 1] = "{"
    src[#src + 1] = "  FORCE"
    src[#src + 1] = dyn and "  extern __shared__ unsigned s[];" or ("  __shared__ unsigned s[%d];"):format(nt)
    src[#src + 1] = "  __shared__ unsigned acc;"
    src[#src + 1] = two_d and "  unsigned t = threadIdx.x + threadIdx.y * blockDim.x;" or "  unsigned t = threadIdx.x;"
    src[#src + 1] = (r(2) == 1 and "  unsigned g = blockIdx.x * %du + t;" -- or a 64-bit index
      or "  size_t g = blockIdx.x * (size_t)%d + t;"):format(nt)
    src[#src + 1] = "  unsigned v = in[g];"
    for _, s in ipairs(body) do src[#src + 1] = "  " .. s end
    src[#src + 1] = tmpl and "  out[g] = v + NT;" or "  out[g] = v;"
    src[#src + 1] = "}"
    local entry = tmpl and ("%s<%d>"):format(name, nt) or name
    entries[#entries + 1] = entry
    launches[#launches + 1] = { name = entry, block = two_d and { bx, 4 } or { bx, 1 }, nt = nt,
      shared = dyn and nt * 4 or nil }
  end
  return table.concat(src, "\n") .. "\n", entries, launches
end

return M
