"""Benchmarks and diagnostics: the device listing, the GPU health check (`gpulab health`),
selftest, `gpulab bench`, `gpulab memory`, and the memory and native benchmarks run as
`python3 -m gpulab.diagnostics.memory_bench` and `python3 -m gpulab.diagnostics.native_bench`.

Layer order: vk -> memory -> kernels/ops -> graph -> placement -> backends -> results ->
running -> diagnostics -> cli. The CLI
calls one function here per command; nothing here prints to stderr on its own (warnings go to
the caller's `warn`), so the CLI decides what the user sees.
"""
