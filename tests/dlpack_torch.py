#!/usr/bin/env python3
"""PyTorch tensors handed to a Lua script through DLPack, and the script's arrays handed back, without a copy.

The Lua side is build/libembed_torch.so (examples/embed/torch.c: Lua and cudadev inside a shared library), which
this program loads with ctypes. One command on the GPU host, after `make build`:

    python3 tests/dlpack_torch.py            # cuda:0 and cpu when torch sees a GPU, else cpu only
    python3 tests/dlpack_torch.py --no-torch # the ctypes plumbing alone, with a tensor made here (no torch)

Each check prints one line; the last line is "dlpack_torch: ok" and the exit status 0 when every check passed.
Environment: CUDADEV_EMBED_TORCH=path/to/libembed_torch.so to test another build.

What it shows, on each device:
  torch -> Lua  t.__dlpack__(stream=1) (the consumer's stream: cudadev's default, the legacy stream) gives a
                capsule; its DLManagedTensor * goes to the script as `t` (the capsule renamed "used_dltensor", as
                a consumer does). The script sees torch's values, at torch's address (t.ptr == data_ptr()), doubles
                them with a kernel (GPU) or in place (cpu) and writes t[2][3] = 100; torch sees every write.
  Lua -> torch  the script returns an Array; cudadev_to_dlpack makes a tensor of it, wrapped here in a capsule
                named "dltensor" that torch.utils.dlpack.from_dlpack takes: same address, same values; torch
                writes, and the script sees the write. Deleting the torch tensor calls cudadev's deleter.
  versioned     the same with DLManagedTensorVersioned ("dltensor_versioned" capsules), where torch has them.
"""
import ctypes
import gc
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LIB = os.environ.get("CUDADEV_EMBED_TORCH", os.path.join(ROOT, "build", "libembed_torch.so"))

failures = 0


def check(cond, what):
    global failures
    print(("ok: " if cond else "FAILED: ") + what, flush=True)
    if not cond:
        failures += 1


# ---------------------------------------------------------------- the DLPack ABI (1.x), as ctypes structs
class DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", DLDevice), ("ndim", ctypes.c_int32), ("dtype", DLDataType),
                ("shape", ctypes.POINTER(ctypes.c_int64)), ("strides", ctypes.POINTER(ctypes.c_int64)),
                ("byte_offset", ctypes.c_uint64)]


class DLManagedTensor(ctypes.Structure):
    pass


DELETER = ctypes.CFUNCTYPE(None, ctypes.POINTER(DLManagedTensor))
DLManagedTensor._fields_ = [("dl_tensor", DLTensor), ("manager_ctx", ctypes.c_void_p), ("deleter", DELETER)]

# ---------------------------------------------------------------- capsules (the names must outlive them)
CAPSULE = b"dltensor"
CAPSULE_V = b"dltensor_versioned"
USED = b"used_dltensor"
USED_V = b"used_dltensor_versioned"
api = ctypes.pythonapi
api.PyCapsule_GetPointer.restype = ctypes.c_void_p
api.PyCapsule_GetPointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
api.PyCapsule_SetName.restype = ctypes.c_int
api.PyCapsule_SetName.argtypes = [ctypes.py_object, ctypes.c_char_p]
api.PyCapsule_New.restype = ctypes.py_object
api.PyCapsule_New.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]

# ---------------------------------------------------------------- the Lua side
lib = ctypes.CDLL(LIB)
lib.edl_open.restype = ctypes.c_void_p
lib.edl_close.argtypes = [ctypes.c_void_p]
lib.edl_run.restype = ctypes.c_int
lib.edl_run.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p, ctypes.c_int,
                        ctypes.POINTER(ctypes.c_void_p), ctypes.c_char_p, ctypes.c_size_t]


def lua(state, code, tensor=None, versioned=False, want_out=False):
    """Runs code (tensor as the global t); returns (message, out pointer); raises on a script error."""
    msg = ctypes.create_string_buffer(4096)
    out = ctypes.c_void_p()
    rc = lib.edl_run(state, code.encode(), tensor, int(versioned), ctypes.byref(out) if want_out else None, msg,
                     len(msg))
    text = msg.value.decode(errors="replace")
    if rc != 0:
        raise RuntimeError("Lua: " + text)
    return text, out.value


# ---------------------------------------------------------------- without torch: a tensor made here
def plumbing():
    state = lib.edl_open()
    data = (ctypes.c_float * 4)(1, 2, 3, 4)
    shape = (ctypes.c_int64 * 1)(4)
    deleted = []
    deleter = DELETER(lambda self: deleted.append(1))
    m = DLManagedTensor(DLTensor(ctypes.cast(data, ctypes.c_void_p), DLDevice(1, 0), 1, DLDataType(2, 32, 1), shape,
                                 None, 0), None, deleter)
    text, _ = lua(state, "t[4] = 40 return string.format('%s %d', tostring(t), t.ptr)", ctypes.addressof(m))
    check(text.startswith("Array(float32[4] on cpu: {1, 2, 3, 40})"), "the script sees the tensor: " + text)
    check(int(text.split()[-1]) == ctypes.addressof(data), "same pointer")
    check(data[3] == 40, "the script's write is seen here")
    lua(state, "t = nil collectgarbage() collectgarbage()")
    check(len(deleted) == 1, "the deleter was called once when the Array was collected")
    text, out = lua(state, "return cd.array({5, 6, 7}, 'int32', {device = 'cpu'})", want_out=True)
    mt = DLManagedTensor.from_address(out)
    vals = ctypes.cast(mt.dl_tensor.data, ctypes.POINTER(ctypes.c_int32))
    check(mt.dl_tensor.ndim == 1 and mt.dl_tensor.shape[0] == 3 and (mt.dl_tensor.dtype.code,
          mt.dl_tensor.dtype.bits) == (0, 32) and [vals[i] for i in range(3)] == [5, 6, 7],
          "an exported Array reads [5, 6, 7] here")
    mt.deleter(ctypes.pointer(mt))
    text, _ = lua(state, "collectgarbage() return cd._live().blocks")
    check(text == "0", "nothing is left once the consumer called the deleter (blocks: %s)" % text)
    lib.edl_close(state)


# ---------------------------------------------------------------- with torch
def torch_checks(torch, device):
    import torch.utils.dlpack as tdl
    state = lib.edl_open()
    gpu = device != "cpu"
    lua(state, "cd.set_device('%s')" % ("cuda:0" if gpu else "cpu"))

    # torch -> Lua
    t = torch.arange(6, dtype=torch.float32, device=device).reshape(2, 3)
    cap = t.__dlpack__(stream=1) if gpu else t.__dlpack__()
    ptr = api.PyCapsule_GetPointer(cap, CAPSULE)
    api.PyCapsule_SetName(cap, USED)   # consumed: the capsule no longer deletes it
    code = r'''
      assert(t.dtype == "float32" and t.ndim == 2 and t.shape[1] == 2 and t.shape[2] == 3, tostring(t))
      local v = t:totable()
      for i = 1, 2 do for j = 1, 3 do assert(v[i][j] == (i - 1) * 3 + j - 1, tostring(t)) end end
      local seen = tostring(t)
      if t.device.alias ~= "cpu" then
        local m = cd.compile([[extern "C" __global__ void twice(float *x, int n) {
          int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) x[i] *= 2; }]])
        m.twice({dim = #t}, t, #t)
      else
        for i = 1, 2 do local row = t[i] for j = 1, 3 do row[j] = row[j] * 2 end end
      end
      t[2][3] = 100
      cd.synchronize()
      return string.format("%d %s on %s", t.ptr, seen, t.device.alias)'''
    text, _ = lua(state, code, ptr)
    addr = int(text.split()[0])
    check(addr == t.data_ptr(), "torch -> Lua on %s: same address (%s)" % (device, text))
    if gpu:
        torch.cuda.synchronize()
    check(t.tolist() == [[0, 2, 4], [6, 8, 100]], "torch sees the script's writes: %s" % t.tolist())
    lua(state, "t = nil collectgarbage() collectgarbage()")   # cudadev calls torch's deleter
    del cap

    # Lua -> torch
    text, out = lua(state, "x = cd.array({1, 2, 3, 4, 5, 6}, 'int64'):reshape({3, 2}) return x", want_out=True)
    cap = api.PyCapsule_New(out, CAPSULE, None)
    u = tdl.from_dlpack(cap)
    text, _ = lua(state, "return string.format('%d', x.ptr)")
    check(u.data_ptr() == int(text) and str(u.device).startswith(device), "Lua -> torch on %s: same address" % device)
    check(u.tolist() == [[1, 2], [3, 4], [5, 6]] and u.dtype == torch.int64, "torch reads %s" % u.tolist())
    u[2, 1] = 60
    if gpu:
        torch.cuda.synchronize()
    text, _ = lua(state, "return tostring(x)")
    check("{5, 60}" in text, "the script sees torch's write: " + text)
    lua(state, "x:free() x = nil collectgarbage()")
    check(u.tolist()[0] == [1, 2], "the memory outlives the script's Array while torch holds it")
    del u, cap
    gc.collect()
    text, _ = lua(state, "collectgarbage() return cd._live().blocks")
    check(text == "0", "torch's deleter gave the memory back (blocks: %s)" % text)

    # versioned, where this torch has it
    try:
        cap = t.__dlpack__(max_version=(1, 0), **({"stream": 1} if gpu else {}))
        ptr = api.PyCapsule_GetPointer(cap, CAPSULE_V)
    except (TypeError, ValueError, BufferError, RuntimeError) as e:
        print("skipped: versioned capsules (%s)" % e)
    else:
        api.PyCapsule_SetName(cap, USED_V)
        text, _ = lua(state, "t[1][1] = -1 cd.synchronize() return tostring(t)", ptr, versioned=True)
        if gpu:
            torch.cuda.synchronize()
        check(t[0, 0].item() == -1, "versioned torch -> Lua: " + text)
        text, out = lua(state, "return cd.full({2}, 7, 'float16')", versioned=True, want_out=True)
        try:
            v = tdl.from_dlpack(api.PyCapsule_New(out, CAPSULE_V, None))
            check(v.tolist() == [7.0, 7.0] and v.dtype == torch.float16, "versioned Lua -> torch: %s" % v.tolist())
            del v
        except (TypeError, ValueError, BufferError, RuntimeError) as e:
            print("skipped: torch does not take versioned capsules (%s)" % e)
            vm = ctypes.cast(out, ctypes.POINTER(ctypes.c_void_p))   # the deleter is its third field
            ctypes.CFUNCTYPE(None, ctypes.c_void_p)(vm[2])(out)
        gc.collect()
    lua(state, "t = nil collectgarbage() collectgarbage()")
    lib.edl_close(state)


def main():
    plumbing()
    if "--no-torch" not in sys.argv:
        import torch
        devices = (["cuda"] if torch.cuda.is_available() else []) + ["cpu"]
        for d in devices:
            torch_checks(torch, d)
    if failures:
        print("dlpack_torch: %d check(s) failed" % failures)
        return 1
    print("dlpack_torch: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
