"""What a host-visible allocation costs in a new process, per memory type and size, three
rounds (allocate, map, free): is it a type's first allocation that costs, or every one?

    PYTHONPATH=payload/src python3 payload/benchmarks/host_allocation.py

On the H100 (docs/benchmarks/host-allocation-h100.txt) every allocation of pinned system
memory costs about the same, 2-3.6 ms per 8 MiB (the driver pins it), and mappable VRAM 0.2 ms.
"""

from __future__ import annotations

import time

from gpulab.vk import Device, shared_instance
from gpulab.vk.memory import HOST_VISIBLE, DeviceMemory

SIZES = (64 << 10, 8 << 20)
ROUNDS = 3


def main() -> None:
    start = time.perf_counter()
    device = Device(shared_instance().physical_device(0))
    print(f"device {1e3 * (time.perf_counter() - start):.1f} ms")
    for memory_type in device.info.memory_types:
        print(
            "type",
            memory_type.index,
            hex(memory_type.property_flags),
            "heap",
            memory_type.heap_index,
        )
    mappable = [t for t in device.info.memory_types if t.property_flags & HOST_VISIBLE]
    for round_ in range(ROUNDS):
        for memory_type in mappable:
            for size in SIZES:
                start = time.perf_counter()
                memory = DeviceMemory(
                    device, size, 1 << memory_type.index, memory_type.property_flags
                )
                allocated = time.perf_counter()
                memory.map()
                mapped = time.perf_counter()
                memory.close()
                freed = time.perf_counter()
                print(
                    f"round {round_} type {memory_type.index} {size >> 10:6d} KiB "
                    f"alloc {1e3 * (allocated - start):6.2f} map {1e3 * (mapped - allocated):6.2f} "
                    f"free {1e3 * (freed - mapped):6.2f} ms"
                )
    device.close()


if __name__ == "__main__":
    main()
