-- NumPy's sorting, scans, joining and indexing functions (cd.sort, cd.argsort, cd.unique, cd.searchsorted,
-- cd.cumsum, cd.cumprod, cd.concatenate, cd.stack, cd.split, cd.take, cd.put, cd.nonzero, cd.count_nonzero,
-- a:item(), and a[idx] / a[mask] through array.c's NOTE [array indices]), on every device through generated
-- kernels (ops.lua's NOTE [generated kernels]): the cpu device runs the same CUDA C. Built into the library; run
-- once by luaopen_cudadev after ops.lua with the module table, the Array metatable and the parts' internals.
--
-- Positions seen from Lua are 1-based, as argmin/argmax give them: argsort, nonzero, searchsorted and unique's
-- index answer 1-based positions, and take, put and a[idx] take them (negative ones count from the end).
local cd, array_mt, internal = ...
local methods = array_mt.methods
local DT, kernel_for, grid_for, header = internal.DT, internal.kernel_for, internal.grid_for, internal.header
local raise, argerror, typename, check_opts = internal.raise, internal.argerror, internal.typename, internal.check_opts
local dtype_of_name, sum_dtype, result_type = internal.dtype_of_name, internal.sum_dtype, internal.result_type
local prod, BLOCK, hash = internal.shape_size, internal.BLOCK, internal.hash
local fmt, concat = string.format, table.concat

local function is_array(v) return cd.type(v) == "Array" end

local function check_array(v, fname, n)
  if not is_array(v) then argerror(fname, n, "Array expected, got " .. typename(v), 1) end
  return v
end

-- An axis (1-based, negative from the end) of an array of nd dimensions as 1..nd.
local function check_axis(axis, nd, fname, n)
  if math.type(axis) ~= "integer" then argerror(fname, n, "axis (integer) expected, got " .. typename(axis), 1) end
  local ax = axis < 0 and nd + 1 + axis or axis
  if ax < 1 or ax > nd then
    argerror(fname, n, fmt("axis %d is out of range for an array of %d dimensions (1..%d, or -1..-%d)", axis, nd,
      nd, nd), 1)
  end
  return ax
end

-- The unsigned C type of each element size, which the sort reads the elements' bits as.
local UINT = { [1] = "unsigned char", [2] = "unsigned short", [4] = "unsigned int", [8] = "unsigned long long" }
local UNAME = { [1] = "uint8", [2] = "uint16", [4] = "uint32", [8] = "uint64" }

-- a moved so that axis ax is its last, contiguous, and the permutation that moved it (nil when it was last)
local function axis_last(a, ax)
  local nd = a.ndim
  if ax == nd then return a:contiguous(), nil end
  local perm = {}
  for i = 1, nd do if i ~= ax then perm[#perm + 1] = i end end
  perm[nd] = ax
  return a:transpose(perm):contiguous(), perm
end

-- r (of the moved shape) back in a's order, contiguous as NumPy's results are
local function axis_back(r, perm)
  if perm == nil then return r end
  local inv = {}
  for i, p in ipairs(perm) do inv[p] = i end
  return r:transpose(inv):contiguous()
end

-- ------------------------------------------------------------------------------------------ scans
-- NOTE [sort tuning]: the radix sort's and the scans' shapes, which the generated sources take as numbers: block
-- (threads of a scatter block, a multiple of 32 from 256 to 1024), items (elements a thread ranks without a
-- payload), pitems (with one), rank ("match": __match_any_sync per element, "ballot": nine ballots), hist
-- (histogram blocks per multiprocessor), look (tiles a scatter's look-back reads at once: NOTE [radix look-back]),
-- occ (scatter blocks a multiprocessor holds at least: ptxas keeps to 65536 / (occ * block) registers a thread),
-- hpart (copies of the histogram's counts a block keeps, lanes spread over them: 1, 2, 4, 8, 16 or 32; fewer where
-- 48 KiB do not hold them), status (bits of a look-back status word: 32, or 64; 64 where n >= 2^30), scan
-- (elements a scan thread takes, 256 threads a block). Internal:
-- CUDADEV_SORT_TUNE="block=384,items=15" (read at load) or cd._sort_tune(text) set them, for bench/sort_sweep.
-- The defaults are the fastest of bench/sort_sweep's grid on an H200 (2026-11-28 06:53 UTC): sort of 2^24 float32
-- 765 µs and argsort 909 µs where the first tunable default (384, 15, 15, match, 4, 4, 2) took 986 and 1145
local TUNE = { block = 512, items = 12, pitems = 8, rank = "ballot", hist = 4, look = 8, occ = 3, hpart = 8,
  status = 32, scan = 16 }
local TUNE_KEYS = { block = true, items = true, pitems = true, rank = true, hist = true, look = true, occ = true,
  hpart = true, status = true, scan = true }

-- The tuning text "k=v,k=v" over the defaults: a table, or nil and what is wrong.
local function parse_tune(text)
  local t = {}
  for k, v in pairs(TUNE) do t[k] = v end
  for k, v in text:gmatch("([%w_]+)=([%w_]+)") do
    if not TUNE_KEYS[k] then return nil, fmt("unknown key %q", k) end
    t[k] = k == "rank" and v or math.tointeger(tonumber(v))
    if t[k] == nil then return nil, fmt("%s must be an integer, got %q", k, v) end
  end
  if t.block % 32 ~= 0 or t.block < 256 or t.block > 1024 then return nil, "block must be a multiple of 32 in 256..1024" end
  if t.rank ~= "match" and t.rank ~= "ballot" then return nil, "rank must be \"match\" or \"ballot\"" end
  for _, k in ipairs({ "items", "pitems", "hist" }) do
    if t[k] < 1 or t[k] > 64 then return nil, k .. " must be in 1..64" end
  end
  if t.look < 1 or t.look > 16 then return nil, "look must be in 1..16" end
  if t.occ < 1 or t.occ * t.block > 2048 then return nil, "occ must be at least 1, and occ * block at most 2048" end
  if t.status ~= 32 and t.status ~= 64 then return nil, "status must be 32 or 64" end
  if t.hpart < 1 or t.hpart > 32 or t.hpart & (t.hpart - 1) ~= 0 then return nil, "hpart must be 1, 2, 4, 8, 16 or 32" end
  -- a scan's tile of 8-byte values, padded, stays under the 48 KiB of static shared memory
  if t.scan < 1 or t.scan > 20 then return nil, "scan must be in 1..20" end
  return t
end

do
  -- a state may have no os library (sandboxes, hosts that remove it): the module still loads there
  local env = os and os.getenv and os.getenv("CUDADEV_SORT_TUNE")
  local t = env and parse_tune(env)
  if t then TUNE = t end
end

-- cd._sort_tune([text]) -> the tuning in force as text, after setting it from text (NOTE [sort tuning]); internal
function cd._sort_tune(text)
  if text ~= nil then
    if type(text) ~= "string" then argerror("_sort_tune", 1, "string expected, got " .. typename(text), 1) end
    local t, err = parse_tune(text)
    if not t then argerror("_sort_tune", 1, err, 1) end
    TUNE = t
  end
  return fmt("block=%d,items=%d,pitems=%d,rank=%s,hist=%d,look=%d,occ=%d,hpart=%d,status=%d,scan=%d", TUNE.block,
    TUNE.items, TUNE.pitems, TUNE.rank, TUNE.hist, TUNE.look, TUNE.occ, TUNE.hpart, TUNE.status, TUNE.scan)
end

-- NOTE [scan passes]: an inclusive or exclusive scan along rows of K contiguous elements, by tiles of SB * SI
-- (SI: NOTE [sort tuning]'s scan): a tile is loaded into shared memory in coalesced order (padded a word every 32,
-- so that a thread's consecutive elements fall in different banks), each thread scans SI consecutive elements,
-- and a block scan of the threads' totals (by warp shuffles) joins them. _one scans in one pass, each tile finding
-- its offset from the tiles before it (NOTE [scan look-back]), and writes the tile from shared memory without
-- reading the input again. A compaction (a[mask], nonzero, unique) needs its count before its output exists:
-- _up sums each tile, the sums are scanned (by _one) and _pick writes each picked element at its position.
-- cumsum, cumprod and the radix sort's digit offsets are _one.
local SB = 256

-- A look-back's wait (NOTE [scan look-back]) sleeps between reads, as CUB's does: on the cpu device the tile
-- it waits for may be on a worker the system has paused, which a busy loop would keep waiting.
local BACKOFF = [==[
#if __CUDA_ARCH__ >= 700
#define CDV_BACKOFF() __nanosleep(64)
#else
#define CDV_BACKOFF() ((void)0)
#endif
]==]

local SCAN_COMMON = BACKOFF .. [==[
#define SB 256
#define SI NSI
#define ST (SB * SI)
#define NWS (SB / 32)
#define PADI(i) ((i) + ((i) >> 5))
__device__ __forceinline__ ACC cdv_op(ACC a, ACC b) { return OP; }
// The exclusive scan of v over the block's SB threads, by warp shuffles; *tot gets the block's total; buf: NWS.
__device__ ACC cdv_block_excl(ACC v, ACC *buf, ACC *tot) {
  int t = threadIdx.x, lane = t & 31, w = t >> 5;
  ACC x = v;
  for (int o = 1; o < 32; o <<= 1) {
    ACC y = __shfl_up_sync(0xffffffffu, x, o);
    if (lane >= o) x = cdv_op(y, x);
  }
  ACC ex = __shfl_up_sync(0xffffffffu, x, 1);
  if (lane == 31) buf[w] = x;
  __syncthreads();
  ACC before = (ACC)(IDENT), all = (ACC)(IDENT);
  for (int j = 0; j < NWS; j++) {
    if (j == w) before = all;
    all = cdv_op(all, buf[j]);
  }
  *tot = all;
  __syncthreads();
  return lane ? cdv_op(before, ex) : before;
}
]==]

-- The source of a scan's kernels: TI in, ACC accumulated, TO out; map(x) turns an input into ACC; op the
-- operation with its identity. The compaction kernel (_pick) writes VAL at the exclusive scan's position of
-- each element whose map is 1, when s.val is given (s.tv: its C type).
local function scan_source(name, s, si)
  local common = SCAN_COMMON:gsub("ACC", s.acc):gsub("OP", s.op):gsub("IDENT", s.ident):gsub("NSI", tostring(si))
  return concat({ header(s.dtypes), s.preamble or "",
    fmt("typedef %s TI; typedef %s ACC; typedef %s TO;", s.ti, s.acc, s.to),
    fmt("__device__ __forceinline__ ACC cdv_map(TI x) { return %s; }", s.map),
    common, fmt([==[
extern "C" __global__ void %s_up(const TI *x, ACC *sums, long long K, long long tiles) {
  __shared__ ACC buf[NWS];
  long long row = blockIdx.x / tiles, s = (blockIdx.x %% tiles) * ST, e = K < s + ST ? K : s + ST;
  ACC a = (ACC)(%s);
  for (long long i = s + threadIdx.x; i < e; i += SB) a = cdv_op(a, cdv_map(x[row * K + i]));
  ACC tot;
  cdv_block_excl(a, buf, &tot);
  if (threadIdx.x == 0) sums[blockIdx.x] = tot;
}

// Loads tile b of x into s (mapped; the identity past the row; PADI places); returns the exclusive scan of the
// threads' totals at this thread, *tot the tile's total, *base the tile's first element's index and *m its count.
__device__ ACC cdv_load(const TI *x, ACC *s, ACC *buf, long long b, long long K, long long tiles, ACC *tot,
                        long long *base, int *m) {
  long long row = b / tiles, t0 = (b %% tiles) * ST;
  *base = row * K + t0;
  *m = K - t0 < ST ? (int)(K - t0) : ST;
  const TI *xb = x + *base;
#pragma unroll
  for (int j = 0; j < SI; j++) {
    int l = j * SB + threadIdx.x;
    s[PADI(l)] = l < *m ? cdv_map(xb[l]) : (ACC)(%s);
  }
  __syncthreads();
  ACC a = (ACC)(%s);
#pragma unroll
  for (int j = 0; j < SI; j++) a = cdv_op(a, s[PADI(threadIdx.x * SI + j)]);
  return cdv_block_excl(a, buf, tot);
}

// Turns this thread's elements of s into their exclusive (excl) or inclusive scan from pre.
__device__ void cdv_rescan(ACC *s, ACC pre, int excl) {
#pragma unroll
  for (int j = 0; j < SI; j++) {
    int i = PADI(threadIdx.x * SI + j);
    ACC v = s[i], q = cdv_op(pre, v);
    s[i] = excl ? pre : q;
    pre = q;
  }
  __syncthreads();
}

// NOTE [scan look-back]: one pass. Tiles are taken in order from *ticket, so every tile before a block's was
// taken by a block that is running; a tile publishes its total (flag 1), then its first warp looks back over
// the 32 tiles before it in its row at once, each lane waiting for its tile's flag, and combines the totals
// down to the nearest one that has published its inclusive prefix (flag 2, which the row's first tile does at
// once), window after window, and publishes its own. A 4-byte ACC goes with its flag in one 64-bit word (part
// read as such: one load, no fence); a wider one is written before its flag, with a fence between, and read
// after it (the CUDA guide's threadFenceReduction order), in part[2j] (total) or part[2j + 1] (inclusive).
__device__ __forceinline__ void cdv_publish(ACC *part, int *flag, long long j, int f, ACC v) {
  if (sizeof(ACC) == 4) {
    union { ACC a; unsigned u; } c;
    c.a = v;
    ((volatile unsigned long long *)part)[j] = ((unsigned long long)f << 32) | c.u;
  } else {
    ((volatile ACC *)part)[2 * j + (f == 2)] = v;
    __threadfence();
    ((volatile int *)flag)[j] = f;
  }
}
__device__ __forceinline__ int cdv_peek(ACC *part, int *flag, long long j, ACC *v) {
  if (sizeof(ACC) == 4) {
    unsigned long long w = ((volatile unsigned long long *)part)[j];
    union { ACC a; unsigned u; } c;
    c.u = (unsigned)w;
    *v = c.a;
    return (int)(w >> 32);
  }
  int f = ((volatile int *)flag)[j];
  if (f) {
    __threadfence();
    *v = ((volatile ACC *)part)[2 * j + (f == 2)];
  }
  return f;
}
// The first warp's look-back for tile b (first: its row's first tile, tot: its total): the combined tiles before it.
__device__ ACC cdv_look_back(ACC *part, int *flag, long long b, long long first, ACC tot) {
  int lane = threadIdx.x & 31;
  ACC p = (ACC)(%s);
  if (b == first) {
    if (lane == 0) cdv_publish(part, flag, b, 2, tot);
    return p;
  }
  if (lane == 0) cdv_publish(part, flag, b, 1, tot);
  for (long long top = b - 1;; top -= 32) {
    long long j = top - lane;
    ACC v = (ACC)(%s);
    int f = 2;   // before the row: the identity, inclusive
    if (j >= first)
      while ((f = cdv_peek(part, flag, j, &v)) == 0) CDV_BACKOFF();
    unsigned inc = __ballot_sync(0xffffffffu, f == 2);
    int stop = inc ? __ffs(inc) - 1 : 31;
    ACC c = lane <= stop ? v : (ACC)(%s);
    for (int o = 16; o; o >>= 1) c = cdv_op(c, __shfl_xor_sync(0xffffffffu, c, o));
    c = __shfl_sync(0xffffffffu, c, 0);   // every lane lane 0's, which rounds alike
    p = cdv_op(c, p);
    if (inc) break;
  }
  if (lane == 0) cdv_publish(part, flag, b, 2, cdv_op(p, tot));
  return p;
}

extern "C" __global__ void %s_one(const TI *x, TO *out, ACC *part, int *flag, unsigned *ticket, long long K,
                                  long long tiles, int excl) {
  __shared__ ACC s[ST + ST / 32];
  __shared__ ACC buf[NWS];
  __shared__ unsigned tk;
  __shared__ ACC pre_s;
  if (threadIdx.x == 0) tk = atomicAdd(ticket, 1u);
  __syncthreads();
  long long b = tk, base;
  int m;
  ACC tot, pre = cdv_load(x, s, buf, b, K, tiles, &tot, &base, &m);
  if (threadIdx.x < 32) {
    ACC p = cdv_look_back(part, flag, b, b - b %% tiles, tot);
    if (threadIdx.x == 0) pre_s = p;
  }
  __syncthreads();
  cdv_rescan(s, cdv_op(pre_s, pre), excl);
  TO *ob = out + base;
#pragma unroll
  for (int j = 0; j < SI; j++) {
    int l = j * SB + threadIdx.x;
    if (l < m) ob[l] = (TO)s[PADI(l)];
  }
}

]==], name, s.ident, s.ident, s.ident, s.ident, s.ident, s.ident, name), s.val and fmt([==[
extern "C" __global__ void %s_pick(const TI *x, const TV *v, TV *out, const ACC *offs, long long K, long long tiles) {
  __shared__ ACC s[ST + ST / 32];
  __shared__ ACC buf[NWS];
  long long base;
  int m;
  ACC tot, pre = cdv_load(x, s, buf, blockIdx.x, K, tiles, &tot, &base, &m);
  cdv_rescan(s, cdv_op(offs[blockIdx.x], pre), 1);
  for (int j = 0; j < SI; j++) {
    long long l = j * SB + threadIdx.x, i = base + l;
    if (l < m && cdv_map(x[i])) out[s[PADI(l)]] = %s;
  }
}
]==], name, s.val):gsub("TV", s.tv) or "" }, "\n")
end

-- The kernels of a scan description s (see scan_source) on dev, in the tuning's scan width, and their tile.
local function scan_kernels(dev, s)
  local si = TUNE.scan
  local key = concat({ "scan", si, s.ti, s.acc, s.to, s.tv or "", s.op, s.ident, s.map, s.val or "" }, "|")
  local m = { tile = SB * si }
  for _, part in ipairs({ "one", s.val and "up", s.val and "pick" }) do
    m[part] = kernel_for(dev, key .. "|" .. part, function()
      local name = "cdv_scan_" .. hash(key)
      return scan_source(name, s, si), name .. "_" .. part
    end)
  end
  return m
end

-- The plain sum scan of ACC values (the tiles' sums), exclusive.
local function sums_spec(acc, dtype)
  return { ti = acc, acc = acc, to = acc, op = "a + b", ident = "0", map = "x", dtypes = { dtype } }
end

-- Scans the rows (nrows of K) of the contiguous x into out (either may be the other) with s's kernels ks
-- (NOTE [scan look-back]); excl: exclusive; acc_dtype: the dtype of s.acc. part starts zero: a 4-byte ACC's
-- flags are in it.
local function scan_rows(dev, ks, x, out, K, nrows, excl, acc_dtype)
  local nt = nrows * ((K + ks.tile - 1) // ks.tile)
  local part = cd.zeros(2 * nt, acc_dtype, { device = dev })
  local flag = cd.zeros(nt + 1, "int32", { device = dev })   -- the last one: the ticket
  ks.one({ grid = nt, block = SB }, x, out, part, flag, flag:slice(nt + 1, nt + 1), K, nt // nrows, excl and 1 or 0)
end

-- The C expression of x (of dtype d) converted to the C type C (float16 through float).
local function convert(d, C)
  return DT[d].ctype == C and "x" or fmt("(%s)(%s)x", C, DT[d].calc)
end

-- ------------------------------------------------------------------------------------------ compaction
-- The elements of the contiguous v (any dtype; nil: the 1-based flat positions, int64) where the contiguous
-- flags x (any dtype) are nonzero, in order, as a 1-d Array: the flags' scan gives each picked element its
-- position (NOTE [scan passes]); the count is read back, as a selection's size must be known (CuPy does too).
local function compact(x, v)
  local dev, n = x.device, x.size
  local vd = v and v.dtype or "int64"
  if n == 0 then return cd.empty(0, vd, { device = dev }) end
  local s = { ti = DT[x.dtype].ctype, acc = "long long", to = "long long", tv = DT[vd].ctype, op = "a + b",
    ident = "0", map = fmt("(long long)((%s)x != 0)", DT[x.dtype].calc), val = v and "v[i]" or "(long long)(i + 1)",
    dtypes = { x.dtype, vd } }
  local ks = scan_kernels(dev, s)
  local tiles = (n + ks.tile - 1) // ks.tile
  -- one more sum, zero: after the exclusive scan it is the count
  local sums = cd.zeros(tiles + 1, "int64", { device = dev })
  ks.up({ grid = tiles, block = SB }, x, sums, n, tiles)
  scan_rows(dev, scan_kernels(dev, sums_spec("long long", "int64")), sums, sums, tiles + 1, 1, true, "int64")
  local count = sums[tiles + 1]
  local out = cd.empty(count, vd, { device = dev })
  if count > 0 then ks.pick({ grid = tiles, block = SB }, x, v, out, sums, n, tiles) end
  return out
end

-- ------------------------------------------------------------------------------------------ radix sort
-- NOTE [radix sort]: sort and argsort are a least-significant-digit radix sort, 8 bits a pass, of the elements'
-- bits turned into unsigned keys that order as the values do (floats: the sign bit flipped, negative ones'
-- other bits too; every NaN one key above +inf, so NaNs come last, in their order; argsort's keys make -0.0 and
-- 0.0 one, so that it is stable as NumPy's stable sort). _hist counts the digits of every pass at once, and
-- their exclusive scans (each scatter block takes its pass's) are each digit's first position; then each pass
-- is one _scatter, whose tiles find their first position per digit from the tiles before them
-- (NOTE [radix look-back]), and which ranks each tile's elements stably (per warp, by __match_any_sync or
-- ballots over the digit's bits, warps in order; the tile's shape: NOTE [sort tuning]), orders them by digit in
-- shared memory and writes each digit's run at its position, coalesced. The first pass
-- turns elements into keys and the last turns keys back (sort) or writes positions (argsort). Rows (a sort
-- along an axis of an N-d array, moved last) are sorted by their values, then by their row numbers (the
-- payload's index / K), in more passes: being stable, the second order keeps the first within a row.
local RADIX = BACKOFF .. [==[
#define BLOCK NBLOCK
#define ITEMS NITEMS
#define PAYLOAD HASPAY
#define RANK_MATCH RANKM
#define LOOK NLOOK
#define CDV_PTX NPTX   // inline PTX (NOTE [ballot bits]): GPUs only, the cpu device refuses asm
// a look-back status word (NOTE [radix look-back]): 32 bits (30 for the count) where n < 2^30, else 64
#define STW NSTW
#if STW == 32
typedef unsigned ST;
#else
typedef unsigned long long ST;
#endif
#define ST_INC ((ST)1 << (STW - 1))
#define ST_LOC ((ST)1 << (STW - 2))
#define ST_CNT (ST_LOC - 1)
// at least MINB blocks a multiprocessor (NOTE [sort tuning]'s occ): left to itself, ptxas gave some shapes more
// registers than two blocks of 384 can have (105 where 85 fit), leaving one block of 12 warps to hide every latency
#define MINB NMINB
#define TILE (BLOCK * ITEMS)
#define NW (BLOCK / 32)
typedef KTYPE KT;
typedef unsigned PT;   // a payload is a position: n < 2^31, so 32 bits (argsort writes int64 only at the end)
#define SIGN ((KT)((KT)1 << (BITS - 1)))
// the key of an element's bits (mode 1: the first pass) as an unsigned number that orders as the values do
__device__ __forceinline__ KT cdv_fwd(KT u, int merge) {
  FWD
}
// the bits of a key's element
__device__ __forceinline__ KT cdv_inv(KT k) {
  INV
}
__device__ __forceinline__ unsigned cdv_digit(KT k, PT p, int mode, int shift, unsigned K) {
  if (PAYLOAD && (mode & 4)) return ((p / K) >> shift) & 255u;   // rows come with a payload
  return (unsigned)((k >> shift) & 255u);
}

// modes: 1 first pass (keys from elements, payload from positions), 2 last pass (elements from keys), 4 the
// digit from the payload's row, 8 read keys, 16 read the payload, 32 write positions (p % K + 1), 64 merge zeros;
// a null kout, pout or pos is not written
// The digit counts of every pass at once (keys from elements, row numbers from positions), added into gh; blocks
// of 256 threads, a few per multiprocessor, each looping over its share, so that few blocks add into gh. A thread
// loads HU elements before it counts them: one load at a time kept too few bytes in flight to stream the keys.
// The counts are kept in parts copies (a power of two; dynamic shared memory, [set][digit][part]), lane l adding
// into copy l % parts: uniform floats' top byte is two or three digits, and 32 lanes adding into one word are 32
// atomics one after the other (NOTE [sort tuning]'s hpart).
#define HU 4
extern "C" __global__ void NAME_hist(const KT *kin, unsigned *gh, long long n, long long K, int nkey, int nrow,
                                     int merge, int parts) {
  extern __shared__ unsigned long long cdv_smem[];
  unsigned *h = (unsigned *)cdv_smem;
  int part = threadIdx.x & (parts - 1);
  for (int i = threadIdx.x; i < (nkey + nrow) * 256 * parts; i += 256) h[i] = 0;
  __syncthreads();
  for (long long i0 = (long long)blockIdx.x * 256 * HU + threadIdx.x; i0 < n; i0 += 256ll * HU * gridDim.x) {
    KT kk[HU];
#pragma unroll
    for (int u = 0; u < HU; u++) kk[u] = i0 + u * 256 < n ? kin[i0 + u * 256] : 0;
#pragma unroll
    for (int u = 0; u < HU; u++) {
      long long i = i0 + u * 256;
      if (i >= n) break;
      KT k = cdv_fwd(kk[u], merge);
      for (int q = 0; q < nkey; q++) atomicAdd(&h[(q * 256 + ((unsigned)(k >> (8 * q)) & 255u)) * parts + part], 1u);
      if (nrow) {   // a 64-bit division, only where there are rows
        unsigned row = (unsigned)(i / K);
        for (int q = 0; q < nrow; q++) atomicAdd(&h[((nkey + q) * 256 + ((row >> (8 * q)) & 255u)) * parts + part], 1u);
      }
    }
  }
  __syncthreads();
  for (int q = 0; q < nkey + nrow; q++) {
    unsigned c = 0;
    for (int j = 0; j < parts; j++) c += h[(q * 256 + threadIdx.x) * parts + j];
    if (c) atomicAdd(&gh[q * 256 + threadIdx.x], c);
  }
}

// The lanes of this warp holding digit d (256: a lane past the end, which matches only its like).
__device__ __forceinline__ unsigned cdv_peers(unsigned d) {
#if RANK_MATCH
  return __match_any_sync(0xffffffffu, d);
#else
  unsigned peers = 0xffffffffu;   // a ballot per bit of the digit, the ninth for the lanes past the end (none
#pragma unroll
  for (int b = 0; b < (PAYLOAD ? 9 : 8); b++) {   // without a payload: NOTE [radix padding])
    unsigned bit = d & (1u << b), bb;
#if CDV_PTX
    // NOTE [ballot bits]: a bit's peers in 3 instructions (and with a predicate, ballot, not where clear); in C,
    // ptxas tested the bit twice over (shift, and, compare for the ballot; and again for the select): 7
    asm("{\n\t.reg .pred p;\n\tsetp.ne.u32 p, %1, 0;\n\tvote.sync.ballot.b32 %0, p, 0xffffffff;\n\t"
        "@!p not.b32 %0, %0;\n\t}" : "=r"(bb) : "r"(bit));
    peers &= bb;
#else
    bb = __ballot_sync(0xffffffffu, bit);
    peers &= bit ? bb : ~bb;
#endif
  }
  return peers;
#endif
}

// The exclusive scan of the 256 digits' counts v (threads 0..255, by warp shuffles); ws: 8 words of shared memory.
__device__ __forceinline__ unsigned cdv_digit_excl(unsigned v, unsigned *ws) {
  int tid = threadIdx.x, lane = tid & 31;
  unsigned x = v;
  if (tid < 256) {
    for (int o = 1; o < 32; o <<= 1) {
      unsigned y = __shfl_up_sync(0xffffffffu, x, o);
      if (lane >= o) x += y;
    }
    if (lane == 31) ws[tid >> 5] = x;
  }
  __syncthreads();
  unsigned before = 0;
  for (int w = 0; w < (tid >> 5) && w < 8; w++) before += ws[w];
  return before + x - v;
}

// NOTE [radix look-back]: a tile's first position per digit is the digit's start plus the digit's count in the
// tiles before it, which each tile publishes as soon as it knows it, flag and value in one word (the next-to-top
// bit: the tile's own count, the top bit: the count of it and every tile before it; 32 bits where n < 2^30, as
// CUB's, NOTE [sort tuning]'s status: half the zero-filling and half the look-back's loads); the thread of each
// digit adds the words before its tile's until an inclusive one (tile 0's is). It reads LOOK tiles' words at
// once, then uses them nearest first (waiting only for those it uses): one tile at a time made the look-back a
// chain of dependent loads from L2, as long as the tiles since the last inclusive word, which grew with the blocks
// in flight. A tile publishes its count before it orders its elements and looks back after (CUB's onesweep
// publishes before it ranks): the tiles before it have had that long to publish their inclusive words, and its
// own elements are in shared memory by then, not in the registers the look-back's loads need.
// Tiles go in ticket order, so every tile before a block's belongs to a running block (NOTE [scan look-back]).
__device__ __forceinline__ void cdv_publish_count(ST *status, unsigned blk, unsigned s) {
  ((volatile ST *)status)[(long long)blk * 256 + threadIdx.x] = (blk ? ST_LOC : ST_INC) | s;
}
// The count of this thread's digit in the tiles before blk, after cdv_publish_count; publishes the inclusive one.
__device__ __forceinline__ unsigned cdv_look_back(ST *status, unsigned blk, unsigned s) {
  volatile ST *vs = status;
  unsigned before = 0;   // at most n < 2^31

  int tid = threadIdx.x;
  if (blk == 0) return 0;
  for (long long top = (long long)blk - 1;; top -= LOOK) {
    ST w[LOOK];
#pragma unroll
    for (int q = 0; q < LOOK; q++)   // before tile 0: nothing, inclusive
      w[q] = top - q >= 0 ? vs[(top - q) * 256 + tid] : ST_INC;
    int done = 0;
#pragma unroll
    for (int q = 0; q < LOOK && !done; q++) {
      while (w[q] == 0) {
        CDV_BACKOFF();
        w[q] = vs[(top - q) * 256 + tid];
      }
      before += (unsigned)(w[q] & ST_CNT);
      done = (w[q] & ST_INC) != 0;
    }
    if (done) break;
  }
  vs[(long long)blk * 256 + tid] = ST_INC | (before + s);
  return before;
}

// One pass: each block ranks a tile of TILE elements stably (per warp, warps in order), orders it by digit in
// shared memory and writes each digit's run at its place, coalesced. Dynamic shared memory: the tile's keys and
// payloads, or (before them) the warps' digit counts. counts: the pass's 256 digit counts from _hist, whose
// exclusive scan each block takes itself (one scan kernel and its two zero-fills fewer a sort).
extern "C" __global__ void __launch_bounds__(BLOCK, MINB) NAME_scatter(const KT *kin, KT *kout, const PT *pin, PT *pout, long long *pos,
                                                                  const unsigned *counts, ST *status,
                                                                  unsigned *ticket, long long n, int shift, long long K,
                                                                  int mode) {
  extern __shared__ unsigned long long cdv_smem[];
  KT *sk = (KT *)cdv_smem;
  PT *sp = (PT *)(sk + TILE);   // TILE is a multiple of 32: aligned
  unsigned *wh = (unsigned *)cdv_smem;   // [NW][256]: per warp and digit the count, then the earlier warps'
  __shared__ unsigned bs[256];   // per digit: the block's elements of smaller digits
  __shared__ unsigned off[256];  // per digit: its place in the output less its place in the tile
  __shared__ unsigned ws[8], ws0[8];
  __shared__ unsigned tk;
  int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  unsigned un = (unsigned)n, uK = (unsigned)K;
  unsigned c0 = tid < 256 ? counts[tid] : 0;   // loaded now, scanned after the ranking
  if (tid == 0) tk = atomicAdd(ticket, 1u);
  for (int i = tid; i < NW * 256; i += BLOCK) wh[i] = 0;
  __syncthreads();
  unsigned blk = tk;   // tiles in the order blocks start: NOTE [radix look-back]
  unsigned wbase = blk * TILE + warp * 32 * ITEMS;
  // NOTE [radix padding]: without a payload, the places past the end hold the largest key, whose digit is 255 in
  // every pass: being last in the tile's order (stable, and after every element), they rank after every element,
  // and the write below (lp < m) leaves them out. Their count enters only the last tile's published words, which
  // no tile reads. So a keys-only tile keeps no digits and no validity per element: the 12 words a thread had for
  // them, and the payload's 12 (unused), made ptxas spill within the 40 registers that 3 blocks of 512 leave.
  // With a payload, a row pass's digit comes from the payload, which has no such largest value: digits are kept.
  KT k[ITEMS];
  PT p[PAYLOAD ? ITEMS : 1];
  unsigned r[ITEMS], d[PAYLOAD ? ITEMS : 1];
#pragma unroll
  for (int j = 0; j < ITEMS; j++) {
    unsigned i = wbase + j * 32 + lane;
    if (!PAYLOAD) {
      k[j] = ~(KT)0;
      if (i < un) k[j] = (mode & 1) ? cdv_fwd(kin[i], mode & 64) : kin[i];
      continue;
    }
    k[j] = 0;
    p[PAYLOAD ? j : 0] = i;
    d[PAYLOAD ? j : 0] = 256;
    if (i < un) {
      if ((mode & 8) || !(mode & 4)) {
        k[j] = kin[i];
        if (mode & 1) k[j] = cdv_fwd(k[j], mode & 64);
      }
      if ((mode & 16) && !(mode & 1)) p[PAYLOAD ? j : 0] = pin[i];
      d[PAYLOAD ? j : 0] = cdv_digit(k[j], p[PAYLOAD ? j : 0], mode, shift, uK);
    }
  }
#define CDV_DIG(j) (PAYLOAD ? d[PAYLOAD ? (j) : 0] : (unsigned)((k[j] >> shift) & 255u))
#pragma unroll
  for (int j = 0; j < ITEMS; j++) {
    unsigned dj = CDV_DIG(j), peers = cdv_peers(dj), ok = dj < 256;
    unsigned cnt = ok ? wh[warp * 256 + dj] : 0;
    r[j] = cnt + __popc(peers & ((1u << lane) - 1u));
    __syncwarp();
    if (ok && 31 - __clz(peers) == lane) wh[warp * 256 + dj] = cnt + __popc(peers);
    __syncwarp();
  }
  __syncthreads();
  unsigned s = 0;
  if (tid < 256) {
    for (int w = 0; w < NW; w++) {
      unsigned c = wh[w * 256 + tid];
      wh[w * 256 + tid] = s;
      s += c;
    }
  }
  if (tid < 256) cdv_publish_count(status, blk, s);   // early: the tiles after this one wait for it
  unsigned start = cdv_digit_excl(c0, ws0);   // the digit's first position in the pass's output
  unsigned ex = cdv_digit_excl(s, ws);
  if (tid < 256) bs[tid] = ex;
  __syncthreads();
#pragma unroll
  for (int j = 0; j < ITEMS; j++)
    if (CDV_DIG(j) < 256) r[j] += bs[CDV_DIG(j)] + wh[warp * 256 + CDV_DIG(j)];
  __syncthreads();   // the counts are read: the tile goes where they were
#pragma unroll
  for (int j = 0; j < ITEMS; j++) {
    if (CDV_DIG(j) < 256) {
      sk[r[j]] = k[j];
      if (PAYLOAD) sp[r[j]] = p[PAYLOAD ? j : 0];
    }
  }
#undef CDV_DIG
  // late: the tile is in shared memory (its registers free), and the tiles before it had more time to finish
  if (tid < 256) off[tid] = start + cdv_look_back(status, blk, s) - ex;
  __syncthreads();
  unsigned m = un - blk * TILE;
#pragma unroll
  for (int j = 0; j < ITEMS; j++) {
    unsigned lp = j * BLOCK + tid;
    if (lp < m) {
      KT kk = sk[lp];
      PT pp = PAYLOAD ? sp[lp] : 0;
      unsigned g = off[cdv_digit(kk, pp, mode, shift, uK)] + lp;
      if (kout) kout[g] = (mode & 2) ? cdv_inv(kk) : kk;
      if (pout) pout[g] = pp;
      if (pos) pos[g] = (long long)(pp % uK) + 1;
    }
  }
}
]==]

-- the key transforms of a dtype's kind, as C statements over KT u / KT k
local function transforms(kind)
  if kind == "i" then return "return u ^ SIGN;", "return k ^ SIGN;" end
  if kind ~= "f" then return "return u;", "return k;" end
  return [[
  KT mag = u & (KT)~SIGN, inf = EXPMASK;
  if (mag > inf) u = (KT)(inf | ((inf >> 1) & (KT)~inf));  // every NaN the same: positive, quiet
  else if (merge && mag == 0) u = 0;                                   // -0.0 as 0.0
  return (u & SIGN) ? (KT)~u : (KT)(u | SIGN);]],
    "return (k & SIGN) ? (KT)(k & (KT)~SIGN) : (KT)~k;"
end

local EXPMASK = { [2] = "(KT)0x7c00u", [4] = "(KT)0x7f800000u", [8] = "(KT)0x7ff0000000000000ull" }

-- The kernels of the radix sort of dtype (with a payload or not) in the tuning t, and the scatter's tile and
-- dynamic shared memory: the tile's keys and payloads, or the warps' digit counts, whichever is more.
local function radix_kernels(dev, dtype, payload, t, sbits)
  local T = DT[dtype]
  local items = payload and t.pitems or t.items
  local name = "cdv_radix_" .. T.kind .. T.size .. (payload and "p" or "")
  local key = fmt("radix|%s|%d|%d|%s|%d|%d|%d", name, t.block, items, t.rank, t.look, t.occ, sbits)
  local function build()
    local fwd, inv = transforms(T.kind)
    local src = RADIX:gsub("KTYPE", UINT[T.size]):gsub("BITS", tostring(T.size * 8)):gsub("FWD", fwd)
      :gsub("NITEMS", tostring(items)):gsub("NBLOCK", tostring(t.block)):gsub("HASPAY", payload and "1" or "0")
      :gsub("RANKM", t.rank == "match" and "1" or "0"):gsub("NLOOK", tostring(t.look))
      :gsub("NMINB", tostring(t.occ)):gsub("NSTW", tostring(sbits)):gsub("NPTX", dev.is_cpu and "0" or "1")
      :gsub("INV", inv):gsub("EXPMASK", EXPMASK[T.size] or "0"):gsub("NAME", name)
    return src
  end
  local tile = t.block * items
  return {
    hist = kernel_for(dev, key .. "|hist", function() return build(), name .. "_hist" end),
    scatter = kernel_for(dev, key .. "|scatter", function() return build(), name .. "_scatter" end),
    tile = tile,
    shared = math.max(tile * (T.size + (payload and 4 or 0)), t.block // 32 * 256 * 4),
  }
end

-- Adds the digit counts of the contiguous unsigned x's np passes (nkey of its keys', the rest of its row numbers')
-- into counts (256 a pass) with ks.hist; merge: -0.0 as 0.0 (NOTE [radix sort]).
local function digit_counts(ks, x, counts, K, np, nkey, merge)
  local dev, n = x.device, x.size
  local hgrid = math.max(1, math.min(grid_for(dev, n), math.max(dev.sm_count or 1, 1) * TUNE.hist))
  -- the histogram's copies (NOTE [sort tuning]'s hpart), as many as 48 KiB of shared memory hold
  local parts = TUNE.hpart
  while parts > 1 and np * 256 * parts * 4 > 48 * 1024 do parts = parts // 2 end
  ks.hist({ grid = hgrid, block = 256, shared = np * 256 * parts * 4 }, x, counts, n, K, nkey, np - nkey,
    merge and 1 or 0, parts)
end

-- cd._sort_hist(a) -> the radix sort's digit counts of the contiguous 1-d a (uint32, 256 a pass, the lowest
-- digit's first), as sort's histogram takes them; internal, for bench/sort_sweep (the histogram's share of a
-- sort) and spec/31
function cd._sort_hist(a)
  check_array(a, "_sort_hist", 1)
  if a.ndim ~= 1 or not a.is_contiguous then argerror("_sort_hist", 1, "a contiguous 1-d array expected", 1) end
  local T = DT[a.dtype]
  local counts = cd.zeros(256 * T.size, "uint32", { device = a.device })
  if a.size == 0 then return counts end
  local ks = radix_kernels(a.device, a.dtype, false, TUNE, 32)
  local ut = UNAME[T.size]
  digit_counts(ks, a.dtype == ut and a or a:view(ut), counts, a.size, T.size, T.size, false)
  return counts
end

-- The radix sort of the rows (of K) of the contiguous b (NOTE [radix sort]). positions: argsort's answer
-- (int64, 1-based within each row); otherwise the sorted values. Returns a contiguous Array of b's shape.
local function radix_sort(b, K, positions)
  local dev, n, T = b.device, b.size, DT[b.dtype]
  local out = cd.empty(b.shape, positions and "int64" or b.dtype, { device = dev })
  if n == 0 then return out end
  if n >= 2^31 then raise(fmt("sort: %d elements; the radix sort takes fewer than 2^31", n)) end
  local nrows = n // K
  local ut = UNAME[T.size]
  local x = b.dtype == ut and b or b:view(ut)
  local passes = {}
  for s = 0, T.size * 8 - 8, 8 do passes[#passes + 1] = { shift = s } end
  if nrows > 1 then   -- the row numbers' digits (NOTE [radix sort]): as many as nrows - 1 has
    local s = 0
    while (nrows - 1) >> s > 0 do passes[#passes + 1] = { shift = s, row = true }; s = s + 8 end
  end
  local payload = positions or nrows > 1
  local sbits = (TUNE.status == 32 and n < 2^30) and 32 or 64   -- a 32-bit word's count has 30 bits
  local ks = radix_kernels(dev, b.dtype, payload, TUNE, sbits)
  local nblk, np, nkey = (n + ks.tile - 1) // ks.tile, #passes, T.size
  -- every pass's digit counts at once, then each pass's tiles find their offsets (NOTE [radix look-back]); the
  -- status words (first: 8-byte aligned), the counts and the passes' tickets are zero-filled at once
  local sw = 256 * nblk * np * (sbits // 32)
  local zero = cd.zeros(sw + 256 * np + np, "uint32", { device = dev })
  local status = sbits == 32 and zero:slice(1, sw) or zero:slice(1, sw):view("uint64")
  local starts = zero:slice(sw + 1, sw + 256 * np)
  local tickets = zero:slice(sw + 256 * np + 1, sw + 256 * np + np)
  digit_counts(ks, x, starts, K, np, nkey, positions)
  local kin, pin = x, nil
  local kbuf, pbuf = {}, {}
  for i, ps in ipairs(passes) do
    local first, last = i == 1, i == #passes
    local move_keys = not (positions and ps.row) and not (positions and last)
    local mode = (first and 1 or 0) | (last and not positions and 2 or 0) | (ps.row and 4 or 0)
      | (move_keys and 8 or 0) | (payload and 16 or 0) | (last and positions and 32 or 0) | (positions and 64 or 0)
    local kout, pout, pos
    if last then
      kout, pos = (not positions) and (out.dtype == ut and out or out:view(ut)) or nil, positions and out or nil
    else
      local slot = i % 2 + 1
      if move_keys then kbuf[slot] = kbuf[slot] or cd.empty(n, ut, { device = dev }); kout = kbuf[slot] end
      if payload then pbuf[slot] = pbuf[slot] or cd.empty(n, "uint32", { device = dev }); pout = pbuf[slot] end
    end
    ks.scatter({ grid = nblk, block = TUNE.block, shared = ks.shared }, kin, kout, pin, pout, pos,
      starts:slice(256 * i - 255, 256 * i), status:slice(256 * nblk * (i - 1) + 1, 256 * nblk * i),
      tickets:slice(i, i), n, ps.shift, K, mode)
    kin, pin = kout or kin, pout
  end
  return out
end

-- sort (positions false) and argsort (true) of a along axis (default the last), a 0-d array as one element
local function sorted(a, axis, fname, positions)
  check_array(a, fname, 1)
  if a.ndim == 0 then
    if axis ~= nil then check_axis(axis, 1, fname, 2) end
    return radix_sort(a:reshape({ 1 }), 1, positions):reshape({})
  end
  local ax = axis == nil and a.ndim or check_axis(axis, a.ndim, fname, 2)
  local b, perm = axis_last(a, ax)
  return axis_back(radix_sort(b, a.shape[ax], positions), perm)
end

-- cd.sort(a [, axis]) -> a sorted copy of a along axis (default the last), NaNs last (NumPy's np.sort)
function cd.sort(a, axis) return sorted(a, axis, "sort", false) end

-- cd.argsort(a [, axis]) -> the 1-based positions that sort a along axis, stably (int64)
function cd.argsort(a, axis) return sorted(a, axis, "argsort", true) end
methods.argsort = cd.argsort

-- a:sort([axis]): sorts a in place (NumPy's ndarray.sort); returns a
function methods.sort(a, axis)
  local r = cd.sort(a, axis)
  a:copy_from(r)
  return a
end

-- ------------------------------------------------------------------------------------------ cumsum, cumprod
local function cum_opts(v, fname)
  if v == nil then return {} end
  if math.type(v) == "integer" then return { axis = v } end
  if type(v) ~= "table" or is_array(v) then argerror(fname, 2, "axis (integer) or options table expected, got " .. typename(v), 1) end
  return check_opts(v, { axis = true, dtype = true }, fname, 2)
end

local function cumulative(fname, op, ident)
  return function(a, v)
    check_array(a, fname, 1)
    local o = cum_opts(v, fname)
    local od = sum_dtype(a.dtype)
    if o.dtype ~= nil then
      od = type(o.dtype) == "string" and dtype_of_name(o.dtype)
      if not od then raise(fmt("bad option 'dtype' to '%s' (unknown dtype %s)", fname, tostring(o.dtype))) end
    end
    local b, perm, K
    if o.axis == nil then   -- NumPy's axis=None: over the flattened array
      b, K = a:contiguous():reshape({ a.size }), a.size
    else
      local ax = a.ndim == 0 and check_axis(o.axis, 1, fname, 2) or check_axis(o.axis, a.ndim, fname, 2)
      if a.ndim == 0 then b, K = a:reshape({ 1 }), 1
      else b, perm = axis_last(a, ax); K = a.shape[ax] end
    end
    local out = cd.empty(b.shape, od, { device = a.device })
    if b.size > 0 then
      local acc = od == "float16" and "float32" or od
      local A = DT[acc].ctype
      local W = DT[acc].kind == "i" and "unsigned long long" or nil   -- signed overflow wraps, as NumPy's does
      local expr = W and fmt("(%s)((%s)a %s (%s)b)", A, W, op, W) or fmt("a %s b", op)
      local s = { ti = DT[a.dtype].ctype, acc = A, to = DT[od].ctype, op = expr, ident = ident, map = convert(a.dtype, A),
        dtypes = { a.dtype, od } }
      scan_rows(a.device, scan_kernels(a.device, s), b, out, K, b.size // K, false, acc)
    end
    if o.axis == nil then return out end
    if a.ndim == 0 then return out end
    return axis_back(out, perm)
  end
end
cd.cumsum = cumulative("cumsum", "+", "0")
cd.cumprod = cumulative("cumprod", "*", "1")
methods.cumsum, methods.cumprod = cd.cumsum, cd.cumprod

-- ------------------------------------------------------------------------------------------ joining
local function check_list(list, fname)
  if type(list) ~= "table" or is_array(list) then argerror(fname, 1, "table of Arrays expected, got " .. typename(list), 1) end
  if #list == 0 then argerror(fname, 1, "need at least one array", 1) end
  local dev
  for i = 1, #list do   -- not ipairs: a hole ({nil, a}) is an element that is not an Array
    local v = list[i]
    if not is_array(v) then argerror(fname, 1, fmt("element %d is %s, not an Array", i, typename(v)), 1) end
    dev = dev or v.device
    if v.device ~= dev then
      argerror(fname, 1, fmt("arrays are on %s and %s; move one with a:to(device)", dev.alias, v.device.alias), 1)
    end
  end
  return dev, result_type(list)
end

local function shape_text(s) return "{" .. concat(s, ", ") .. "}" end

-- cd.concatenate(list [, axis]) -> the arrays joined along axis (default 1), NumPy's dtype promotion. Each
-- array goes into its slice of the result as a device copy (a strided copy where the slice or it is strided).
function cd.concatenate(list, axis)
  local dev, dtype = check_list(list, "concatenate")
  local first = list[1]
  if first.ndim == 0 then argerror("concatenate", 1, "zero-dimensional arrays cannot be concatenated", 1) end
  local ax = check_axis(axis == nil and 1 or axis, first.ndim, "concatenate", 2)
  local shape = first.shape
  shape[ax] = 0
  for i, v in ipairs(list) do
    local s = v.shape
    local bad = #s ~= #shape
    for d = 1, #s do if d ~= ax and s[d] ~= shape[d] then bad = true end end
    if bad then
      argerror("concatenate", 1, fmt("array %d has shape %s, array 1 %s: all but axis %d must match", i,
        shape_text(s), shape_text(first.shape), ax), 1)
    end
    shape[ax] = shape[ax] + s[ax]
  end
  local out = cd.empty(shape, dtype, { device = dev })
  local o = 0
  for _, v in ipairs(list) do
    local k = v.shape[ax]
    if k > 0 then
      out:slice(o + 1, o + k, 1, ax):copy_from(v.dtype == dtype and v or v:astype(dtype))
    end
    o = o + k
  end
  return out
end

-- cd.stack(list [, axis]) -> the arrays (of one shape) joined along a new axis (default 1)
function cd.stack(list, axis)
  local dev, dtype = check_list(list, "stack")
  local s1 = list[1].shape
  for i, v in ipairs(list) do
    local s = v.shape
    local same = #s == #s1
    for d = 1, #s do same = same and s[d] == s1[d] end
    if not same then
      argerror("stack", 1, fmt("array %d has shape %s, array 1 %s: stacked arrays must have one shape", i,
        shape_text(s), shape_text(s1)), 1)
    end
  end
  local ax = check_axis(axis == nil and 1 or axis, #s1 + 1, "stack", 2)
  local shape = {}
  for d = 1, #s1 + 1 do shape[d] = d < ax and s1[d] or d == ax and #list or s1[d - 1] end
  local out = cd.empty(shape, dtype, { device = dev })
  if out.size == 0 then return out end
  for i, v in ipairs(list) do
    out:slice(i, i, 1, ax):copy_from(v.dtype == dtype and v or v:astype(dtype))
  end
  return out
end

-- cd.split(a, sections_or_cuts [, axis]) -> a table of views of a along axis (default 1): `sections` equal
-- parts, or a table of cuts {3, 5}: NumPy's numbers, the count of elements before each cut (elements 1..3,
-- 4..5 and 6..n).
local MAX_PARTS = 1 << 24
function cd.split(a, how, axis)
  check_array(a, "split", 1)
  if a.ndim == 0 then argerror("split", 1, "a 0-d array cannot be split", 1) end
  local ax = check_axis(axis == nil and 1 or axis, a.ndim, "split", 3)
  local n = a.shape[ax]
  local cuts = {}
  if math.type(how) == "integer" then
    if how < 1 then argerror("split", 2, fmt("number of sections must be at least 1, got %d", how), 1) end
    -- an empty axis splits into any number of empty parts (NumPy's answer too), each an Array of its own: a
    -- count past MAX_PARTS would exhaust the host's memory building the table (the fuzzer's 2^63 - 1)
    if how > MAX_PARTS then
      argerror("split", 2, fmt("%d sections would make %d Arrays (at most %d)", how, how, MAX_PARTS), 1)
    end
    if n % how ~= 0 then argerror("split", 2, fmt("%d elements do not split into %d equal sections", n, how), 1) end
    for i = 1, how - 1 do cuts[i] = i * (n // how) end
  elseif type(how) == "table" and not is_array(how) then
    for i, c in ipairs(how) do
      if math.type(c) ~= "integer" then argerror("split", 2, fmt("cut %d is %s, not an integer", i, typename(c)), 1) end
      cuts[i] = c
    end
  else
    argerror("split", 2, "number of sections or table of cuts expected, got " .. typename(how), 1)
  end
  local parts, lo = {}, 0
  cuts[#cuts + 1] = n
  for _, c in ipairs(cuts) do
    -- as NumPy's: a cut past the end is the end, a cut before the previous one gives an empty part
    local hi = math.max(lo, math.min(c < 0 and n + c or c, n))
    parts[#parts + 1] = a:slice(lo + 1, hi, 1, ax)
    lo = hi
  end
  return parts
end

-- ------------------------------------------------------------------------------------------ take, put
-- NOTE [index kernels]: out[outer, j, inner] = a[outer, idx[j], inner] (gather) or the reverse (scatter, v
-- cycled as NumPy's put cycles it), with idx's positions 1-based, negative from the end; a position out of
-- range sets bad[0] and bad[1] to it and the call raises once the kernel is done.
local INDEX = [==[
extern "C" __global__ void NAME(T *a, const long long *idx, T *v, long long n, long long J, long long inner,
                                long long K, long long nv, long long *bad) {
  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (long long)blockDim.x * gridDim.x) {
    long long in = i % inner, r = i / inner, j = r % J, outer = r / J, q = idx[j];
    long long pos = q < 0 ? q + K : q - 1;
    if (pos < 0 || pos >= K) {
      bad[0] = 1;
      bad[1] = q;
      continue;
    }
    STMT;
  }
}
]==]

local function index_kernel(dev, dtype, scatter)
  local key = fmt("index|%s|%s", dtype, scatter and "put" or "take")
  return kernel_for(dev, key, function()
    local name = "cdv_" .. (scatter and "put_" or "take_") .. dtype
    local stmt = scatter and "a[(outer * K + pos) * inner + in] = v[i % nv]" or "v[i] = a[(outer * K + pos) * inner + in]"
    return header({ dtype }) .. INDEX:gsub("NAME", name):gsub("STMT", function() return stmt end):gsub("T %*", DT[dtype].ctype .. " *"), name
  end)
end

local function check_positions(idx, fname, n)
  if not is_array(idx) then argerror(fname, n, "integer Array of positions expected, got " .. typename(idx), 2) end
  local k = DT[idx.dtype].kind
  if k ~= "i" and k ~= "u" then argerror(fname, n, "positions must be integers, not " .. idx.dtype, 2) end
  return idx.dtype == "int64" and idx:contiguous() or idx:astype("int64")
end

local function raise_bad(bad, K, fname, n)
  local t = bad:totable()
  if t[1] ~= 0 then argerror(fname, n, fmt("index %d out of range 1..%d (or -%d..-1 from the end)", t[2], K, K), 2) end
end

-- a gather into v (put false) or a scatter of v (put true) of a's axis ax at positions idx (NOTE [index kernels])
local function run_index(a, ax, idx, v, put, fname, n)
  local shape, outer, inner = a.shape, 1, 1
  for d = 1, #shape do
    if d < ax then outer = outer * shape[d] elseif d > ax then inner = inner * shape[d] end
  end
  local K = #shape == 0 and 1 or shape[ax]
  local total = outer * idx.size * inner
  if total == 0 then return end
  if K == 0 then argerror(fname, n, fmt("index out of range for an empty axis"), 2) end
  local dev = a.device
  local bad = cd.zeros(2, "int64", { device = dev })
  index_kernel(dev, a.dtype, put)({ grid = grid_for(dev, total), block = BLOCK }, a, idx, v, total, idx.size, inner,
    K, v.size, bad)
  raise_bad(bad, K, fname, n)
end

-- take's work, errors named for fname (take, or a[idx]'s index)
local function take(a, idx, axis, fname)
  local pos = check_positions(idx, fname, 2)
  local src, ax = a:contiguous(), 1
  if axis == nil then src = src:reshape({ a.size })
  else ax = a.ndim == 0 and check_axis(axis, 1, fname, 3) or check_axis(axis, a.ndim, fname, 3) end
  local shape, ishape = {}, idx.shape
  local sshape = src.shape
  for d = 1, math.max(#sshape, 1) do
    if d == ax then for _, e in ipairs(ishape) do shape[#shape + 1] = e end
    elseif sshape[d] then shape[#shape + 1] = sshape[d] end
  end
  local out = cd.empty(shape, a.dtype, { device = a.device })
  if src.ndim == 0 then src = src:reshape({ 1 }) end
  run_index(src, ax, pos, out, false, fname, 2)
  return out
end

-- cd.take(a, idx [, axis]) -> a's elements at the 1-based positions idx (of the flattened a, or along axis)
function cd.take(a, idx, axis)
  check_array(a, "take", 1)
  return take(a, idx, axis, "take")
end
methods.take = cd.take

-- v as a contiguous Array of dtype on dev (a scalar as one element)
local function values_for(v, dtype, dev, fname, n)
  if is_array(v) then
    if v.device ~= dev then argerror(fname, n, fmt("values are on %s but the array on %s", v.device.alias, dev.alias), 2) end
    return v.dtype == dtype and v:contiguous() or v:astype(dtype)
  end
  if type(v) ~= "number" and type(v) ~= "boolean" then
    argerror(fname, n, "Array or number expected, got " .. typename(v), 2)
  end
  return cd.full({ 1 }, v, dtype, { device = dev })
end

local function scatter(a, ax, pos, v, fname, n)
  local vals = values_for(v, a.dtype, a.device, fname, n)
  if vals.size == 0 then
    if pos.size == 0 then return end
    argerror(fname, n, "no values to put", 2)
  end
  run_index(a.ndim == 0 and a:reshape({ 1 }) or a, ax, pos, vals, true, fname, 2)
end

-- cd.put(a, idx, v): a's elements (flattened) at the 1-based positions idx become v (cycled, as NumPy's put);
-- where idx repeats a position, which value lands there is not specified on a GPU
function cd.put(a, idx, v)
  check_array(a, "put", 1)
  local pos = check_positions(idx, "put", 2)
  if not a.is_contiguous then raise("put: the array is not contiguous (put writes into a view's own elements only when it is)") end
  scatter(a:reshape({ a.size }), 1, pos, v, "put", 3)
end
methods.put = cd.put

-- ------------------------------------------------------------------------------------------ nonzero, where
-- flat 1-based positions (int64) as one Array per dimension of shape
local function unravel(flat, shape)
  if #shape == 1 then return { flat } end
  local out, stride = {}, 1
  for d = #shape, 1, -1 do
    out[d] = ((flat - 1) // stride) % shape[d] + 1
    stride = stride * shape[d]
  end
  return out
end

-- cd.nonzero(a) -> a table of int64 Arrays, one per dimension: the 1-based positions of a's nonzero elements
function cd.nonzero(a)
  check_array(a, "nonzero", 1)
  if a.ndim == 0 then argerror("nonzero", 1, "a 0-d array has no positions: use a:item() ~= 0 or a:reshape(1)", 1) end
  return unravel(compact(a:contiguous()), a.shape)
end
methods.nonzero = cd.nonzero

local where3 = cd.where
-- cd.where(c) with one argument is cd.nonzero(c), as NumPy's
function cd.where(c, ...)
  if select("#", ...) == 0 then
    check_array(c, "where", 1)
    return cd.nonzero(c)
  end
  return where3(c, ...)
end

-- cd.count_nonzero(a [, axis]) -> the number of nonzero elements (an integer; along axis an int64 Array)
function cd.count_nonzero(a, axis)
  check_array(a, "count_nonzero", 1)
  if axis ~= nil and math.type(axis) ~= "integer" then
    argerror("count_nonzero", 2, "axis (integer) expected, got " .. typename(axis), 1)
  end
  return a:ne(0):sum(axis)
end

-- ------------------------------------------------------------------------------------------ searchsorted
local SEARCH = [==[
__device__ __forceinline__ bool cdv_lt(CALC x, CALC y) { return x < y || (y != y && x == x); }  // NaN last, as sort
extern "C" __global__ void NAME(const T *a, const V *v, long long *out, long long n, long long m, int right) {
  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < m; i += (long long)blockDim.x * gridDim.x) {
    CALC x = (CALC)v[i];
    long long lo = 0, hi = n;
    while (lo < hi) {
      long long mid = lo + (hi - lo) / 2;
      CALC y = (CALC)a[mid];
      if (right ? !cdv_lt(x, y) : cdv_lt(y, x)) lo = mid + 1; else hi = mid;
    }
    out[i] = lo + 1;
  }
}
]==]

-- cd.searchsorted(a, v [, side]) -> the 1-based positions where v's elements would go into the sorted 1-d a to
-- keep it sorted (side "left": before equal elements, "right": after them): 1..#a + 1. An integer for a number.
function cd.searchsorted(a, v, side)
  check_array(a, "searchsorted", 1)
  if a.ndim ~= 1 then argerror("searchsorted", 1, fmt("a 1-d sorted array expected, got %d dimensions", a.ndim), 1) end
  if side ~= nil and side ~= "left" and side ~= "right" then
    argerror("searchsorted", 3, fmt("side must be \"left\" or \"right\", got %s", typename(side) == "string" and fmt("%q", side) or typename(side)), 1)
  end
  local scalar = not is_array(v)
  if scalar and type(v) ~= "number" and type(v) ~= "boolean" then
    argerror("searchsorted", 2, "Array or number expected, got " .. typename(v), 1)
  end
  if not scalar and v.device ~= a.device then
    argerror("searchsorted", 2, fmt("values are on %s but the array on %s", v.device.alias, a.device.alias), 1)
  end
  local dev = a.device
  local r = result_type({ a, v })
  local vals = scalar and cd.full({ 1 }, v, r, { device = dev }) or v:contiguous()
  local src = a:contiguous()
  local C = DT[r].calc
  local k = kernel_for(dev, fmt("search|%s|%s|%s", a.dtype, vals.dtype, C), function()
    local name = fmt("cdv_search_%s_%s", a.dtype, vals.dtype)
    return header({ a.dtype, vals.dtype }) .. SEARCH:gsub("NAME", name):gsub("const T", "const " .. DT[a.dtype].ctype)
      :gsub("const V", "const " .. DT[vals.dtype].ctype):gsub("CALC", C), name
  end)
  local out = cd.empty(vals.shape, "int64", { device = dev })
  if out.size > 0 then
    k({ grid = grid_for(dev, out.size), block = BLOCK }, src, vals, out, src.size, out.size, side == "right" and 1 or 0)
  end
  if scalar then return out[1] end
  return out
end

-- ------------------------------------------------------------------------------------------ unique
local UNIQ = [==[
extern "C" __global__ void NAME(const T *s, unsigned char *f, long long n) {
  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (long long)blockDim.x * gridDim.x) {
    CALC x = (CALC)s[i], y = i ? (CALC)s[i - 1] : x;
    f[i] = i == 0 || !(x == y || (x != x && y != y));   // NaNs are one value, as NumPy's equal_nan
  }
}
extern "C" __global__ void NAME_counts(const long long *starts, long long *c, long long m, long long n) {
  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < m; i += (long long)blockDim.x * gridDim.x)
    c[i] = (i + 1 < m ? starts[i + 1] : n + 1) - starts[i];
}
]==]

local function unique_kernel(dev, dtype, part)
  return kernel_for(dev, "unique|" .. dtype .. "|" .. part, function()
    local name = "cdv_unique_" .. dtype
    return header({ dtype }) .. UNIQ:gsub("NAME", name):gsub("const T", "const " .. DT[dtype].ctype)
      :gsub("CALC", DT[dtype].calc), name .. (part == "flags" and "" or "_" .. part)
  end)
end

-- cd.unique(a [, {return_index=, return_inverse=, return_counts=}]) -> the sorted unique values of a (flattened;
-- NaNs one value), then as asked: the 1-based positions of their first occurrences, the positions in the
-- unique values that rebuild a (a's shape), their counts (NumPy's order)
function cd.unique(a, opts)
  check_array(a, "unique", 1)
  opts = check_opts(opts, { return_index = true, return_inverse = true, return_counts = true }, "unique", 2)
  local dev, n = a.device, a.size
  local flat = a:contiguous():reshape({ n })
  local perm, s
  if opts.return_index or opts.return_inverse then
    perm = cd.argsort(flat)
    s = cd.take(flat, perm)
  else
    s = cd.sort(flat)
  end
  local flags = cd.empty(n, "bool", { device = dev })
  if n > 0 then unique_kernel(dev, a.dtype, "flags")({ grid = grid_for(dev, n), block = BLOCK }, s, flags, n) end
  local res = { compact(flags, s) }
  local starts = (opts.return_index or opts.return_counts) and compact(flags) or nil
  if opts.return_index then res[#res + 1] = cd.take(perm, starts) end
  if opts.return_inverse then
    local inv = cd.empty(n, "int64", { device = dev })
    if n > 0 then cd.put(inv, perm, cd.cumsum(flags)) end
    res[#res + 1] = inv:reshape(a.shape)
  end
  if opts.return_counts then
    local m = starts.size
    local c = cd.empty(m, "int64", { device = dev })
    if m > 0 then unique_kernel(dev, "int64", "counts")({ grid = grid_for(dev, m), block = BLOCK }, starts, c, m, n) end
    res[#res + 1] = c
  end
  return table.unpack(res)
end

-- ------------------------------------------------------------------------------------------ item, a[idx]
-- a:item([i]) -> the only element of a as a Lua value (or the element at the flat 1-based position i)
function methods.item(a, i)
  check_array(a, "item", 1)
  if i == nil then
    if a.size ~= 1 then argerror("item", 1, fmt("can only convert an array of size 1 to a Lua value, not %d", a.size), 1) end
    i = 1
  end
  if math.type(i) ~= "integer" then argerror("item", 2, "integer position expected, got " .. typename(i), 1) end
  if i == 0 or i > a.size or i < -a.size then argerror("item", 2, fmt("position %d out of range 1..%d", i, a.size), 1) end
  local flat = a:contiguous():reshape({ a.size })
  return flat[i]
end

-- a bool mask over the leading dimensions of a (all of them: a 1-d result) as the 1-based positions of its
-- true elements over those dimensions, and a viewed with those dimensions as one
local function mask_positions(a, mask, fname)
  local ms, as = mask.shape, a.shape
  local ok = #ms <= #as and #ms > 0
  for d = 1, #ms do ok = ok and ms[d] == as[d] end
  if not ok then
    raise(fmt("bad argument #2 to '%s' (a bool mask of shape %s does not match the array's shape %s)", fname,
      shape_text(ms), shape_text(as)))
  end
  local rows = prod(ms)
  local rest = { rows }
  for d = #ms + 1, #as do rest[#rest + 1] = as[d] end
  return compact(mask:contiguous()), rest
end

-- an index Array that is not a mask: of integers, into an array with positions
local function check_index(a, key, fname, instead)
  local k = DT[key.dtype].kind
  if k ~= "i" and k ~= "u" then
    raise(fmt("bad argument #2 to '%s' (an index Array must be of integers or bool, not %s)", fname, key.dtype))
  end
  if a.ndim == 0 then raise(fmt("bad argument #1 to '%s' (a 0-d array has no positions: use %s)", fname, instead)) end
end

-- a[idx] and a[mask], which array.c calls (NOTE [array indices])
rawset(array_mt, "__views_index", function(a, key)
  if key.dtype == "bool" then
    local pos, rest = mask_positions(a, key, "index")
    return take(a:contiguous():reshape(rest), pos, 1, "index")
  end
  check_index(a, key, "index", "a:item()")
  return take(a, key, 1, "index")
end)

-- a[idx] = v and a[mask] = v: v a number or an Array (cycled over the selected elements, as NumPy's put)
rawset(array_mt, "__views_setindex", function(a, key, v)
  local pos, target
  if key.dtype == "bool" then
    local rest
    pos, rest = mask_positions(a, key, "newindex")
    target = a.is_contiguous and a:reshape(rest) or nil
  else
    check_index(a, key, "newindex", "a:fill(v)")
    pos, target = check_positions(key, "newindex", 2), a.is_contiguous and a or nil
  end
  if target == nil then raise("bad argument #1 to 'newindex' (assigning through an index Array needs a contiguous array)") end
  scatter(target, 1, pos, v, "newindex", 3)
end)
