"""Running: gemmlab's GPU runtime, the small public layer every GPU-touching part of gemmlab is built on.

One module a job; each is imported on use, so importing the package never loads torch or the
CUDA driver. The contract (everything named here is public and documented in its module):

- ``device``: ``driver()``, ``checked(ret, what)`` (a driver call's values, or the gemmlab
  error for its failure), ``torch_device()`` (torch's device with its context current),
  ``ensure_context(index)``, ``device_attributes(index) -> DeviceAttributes``,
  ``raw_attributes(index)`` (every device attribute by number, for a recording made elsewhere).
- ``elf_object``: ``LoadedObject(data, externals)`` maps an x86-64 relocatable object into this
  process with the given addresses for its external symbols (how a CuTe DSL export's host code is
  run against an emulated CUDA runtime); ``ElfObjectError``; no GPU needed.
- ``streams``: ``DEFAULT_TIMEOUT_S``, ``stream_handle(stream)``, ``synchronize(timeout_s,
  stream, what)`` (raises ``KernelTimeoutError`` instead of hanging), ``check_errors()``,
  ``private_stream(index)``, ``watched_stream()``, ``call_and_snapshot(call, tensor,
  timeout_s, what)``, ``default_stream_joined()`` (work on CUDA's legacy default stream
  ordered with torch's current stream).
- ``arguments``: ``bind_arguments(params, args, device, name) -> PackedArgs``,
  ``signature_text(name, params)``; no GPU needed.
- ``launch``: ``LaunchLimits``, ``launch_dims``, ``validate_launch`` (no GPU needed),
  ``load_module(images, name, arch)``, ``load_function(images, symbol, name, arch, index) ->
  LoadedFunction``, ``launch(loaded, packed, grid, block, smem, stream, name)``,
  ``max_active_blocks``.
- ``contract``: ``LaunchContract`` (function, parameters, geometry) with ``to_dict``/``from_dict``:
  what a process that runs a compiled kernel with no student Python receives; ``TENSOR_MAP_MARK``
  and ``TENSOR_MAP_BYTES``, how a recorded DSL launch marks a TMA descriptor parameter.
- ``memory``: ``GuardedMatrix`` (guard zones, NaN poison, ``guard_writes()``, ``unwritten()``)
  and its ``GUARD_BYTES``/``SENTINEL_BITS``/``POISON_BITS``.
- ``printf``: ``uses_printf(ptx)``, ``captured_fd_output(fd)``, ``forward_device_printf(sync)`` (a cell
  shows its first 200 lines of device printf, then how much was dropped).
- ``dispatch_watch``: ``dispatch_watch(handler)``, a torch dispatch mode that passes every operator a call
  runs to ``handler`` (what integrity's library guard and the DSL recording watch with); no GPU needed.
- ``faults``: the one classification of GPU failures (``classify``, ``cuda_error_name``) and the
  per-process lost-context state (``mark_lost``, ``raise_if_lost``, ``lost_reason``, ``context_state``);
  ``error_for(CUresult, what)`` and ``translate(exc, what)`` give the error a student acts on:
  ``ContextLostError`` for sticky faults, ``KernelError`` otherwise. Used alike by
  ``Kernel``, the DSL path, ``run_isolated`` and the grader.

Beside the layer: ``gpu`` (which GPU this process may use), ``kernel`` (``gemmlab.Kernel``, a compiled kernel
called on torch tensors), ``isolate`` (a GPU job in a fresh child process) and ``proctime`` (the work a process
tree consumed, read from /proc: what compile and cell limits count). Integrity (what counts as honest work) and
timing are built on this layer in :mod:`gemmlab.checking` and :mod:`gemmlab.timing`.
"""
from gemmlab.moved import submodules_on_use

__getattr__ = submodules_on_use("gemmlab.running")
