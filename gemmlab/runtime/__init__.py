"""gemmlab's GPU runtime: the small public layer every GPU-touching part of gemmlab is built on.

One module a job: ``device`` (device and context), ``streams``, ``launch`` (module loading,
argument packing, launch), ``memory`` (buffers with guard zones and poison), ``faults`` (the one
classification of GPU failures). Submodules are imported on use so that importing the package
never loads torch or the CUDA driver.
"""
