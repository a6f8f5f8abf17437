"""What the driver compiled a matmul tile to: registers, shared memory, binary size.

    python3 payload/benchmarks/pipeline_statistics.py [--spv PATH] TILE [TILE ...]

TILE is XxYxD as GPULAB_MATMUL_TILE spells it, with `s` appended for subgroup tiling (e.g.
32x16x8s), or a plan with a tile as GPULAB_MATMUL_VARIANT spells it (16x16x8w+staged,
16x16x8+split4: those compile matmul_split.spv; `unrolled` the unrolled twin of either build;
--spv replaces every build). It needs a driver
with VK_KHR_pipeline_executable_properties (NVIDIA's has it, lavapipe's does not: then it says
so and exits 3). It talks to the `vulkan` binding directly, because gpulab's device does not
enable that extension (it would slow every pipeline's creation for a tuning aid). One line per
tile, for example on the H200 (4 Dec 2026):

    32x16x8s: Register Count=123 ... Shared Memory Size=24832
"""

from __future__ import annotations

import argparse
import struct
import sys
from importlib import resources
from pathlib import Path

import vulkan as vk
from gpulab.kernels.matmul_tiles import parse_plan
from gpulab.kernels.pipelines import PUSH_CONSTANT_BYTES

EXTENSION = "VK_KHR_pipeline_executable_properties"
CAPTURE_STATISTICS = 0x40  # VK_PIPELINE_CREATE_CAPTURE_STATISTICS_BIT_KHR


def _value(statistic: object) -> object:
    value = statistic.value  # type: ignore[attr-defined]
    return (value.b32, value.i64, value.u64, value.f64)[statistic.format]  # type: ignore[attr-defined]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("tiles", nargs="+", help="XxYxD[s], or a plan naming a tile")
    parser.add_argument("--spv", help="matmul SPIR-V (default: the package's)")
    args = parser.parse_args()
    plans = [parse_plan(text) for text in args.tiles]
    if any(plan.tile is None for plan in plans):
        parser.error("every TILE must name a tile (XxYxD)")
    app = vk.VkApplicationInfo(apiVersion=vk.VK_MAKE_VERSION(1, 3, 0))
    instance = vk.vkCreateInstance(vk.VkInstanceCreateInfo(pApplicationInfo=app), None)
    physical = vk.vkEnumeratePhysicalDevices(instance)[0]
    names = [e.extensionName for e in vk.vkEnumerateDeviceExtensionProperties(physical, None)]
    device_name = vk.vkGetPhysicalDeviceProperties(physical).deviceName
    if EXTENSION not in names:
        print(f"{device_name}: no {EXTENSION}, so no statistics", file=sys.stderr)
        return 3
    feature = vk.VkPhysicalDevicePipelineExecutablePropertiesFeaturesKHR(
        pipelineExecutableInfo=vk.VK_TRUE
    )
    queue = vk.VkDeviceQueueCreateInfo(queueFamilyIndex=0, queueCount=1, pQueuePriorities=[1.0])
    device = vk.vkCreateDevice(
        physical,
        vk.VkDeviceCreateInfo(
            pNext=feature,
            queueCreateInfoCount=1,
            pQueueCreateInfos=[queue],
            enabledExtensionCount=1,
            ppEnabledExtensionNames=[EXTENSION],
        ),
        None,
    )
    executables = vk.vkGetDeviceProcAddr(device, "vkGetPipelineExecutablePropertiesKHR")
    statistics = vk.vkGetDeviceProcAddr(device, "vkGetPipelineExecutableStatisticsKHR")
    bindings = [
        vk.VkDescriptorSetLayoutBinding(
            binding=i,
            descriptorType=vk.VK_DESCRIPTOR_TYPE_STORAGE_BUFFER,
            descriptorCount=1,
            stageFlags=vk.VK_SHADER_STAGE_COMPUTE_BIT,
        )
        for i in range(3)
    ]
    set_layout = vk.vkCreateDescriptorSetLayout(
        device, vk.VkDescriptorSetLayoutCreateInfo(bindingCount=3, pBindings=bindings), None
    )
    push = vk.VkPushConstantRange(
        stageFlags=vk.VK_SHADER_STAGE_COMPUTE_BIT, offset=0, size=PUSH_CONSTANT_BYTES
    )
    layout = vk.vkCreatePipelineLayout(
        device,
        vk.VkPipelineLayoutCreateInfo(
            setLayoutCount=1,
            pSetLayouts=[set_layout],
            pushConstantRangeCount=1,
            pPushConstantRanges=[push],
        ),
        None,
    )
    modules = {}
    for name in ("matmul", "matmul_split", "matmul_unrolled", "matmul_split_unrolled"):
        shader = resources.files("gpulab.shaders") / f"{name}.spv"
        code = Path(args.spv).read_bytes() if args.spv else shader.read_bytes()
        modules[name] = vk.vkCreateShaderModule(
            device, vk.VkShaderModuleCreateInfo(codeSize=len(code), pCode=code), None
        )
    print(device_name)
    for tile_text, plan in zip(args.tiles, plans, strict=True):
        tile = plan.tile
        assert tile is not None
        module = modules[plan.source]
        values = (
            tile.split_specialization(plan.staged) if plan.split_shader else tile.specialization
        )
        entries = [
            vk.VkSpecializationMapEntry(constantID=i, offset=4 * n, size=4)
            for n, (i, _) in enumerate(values)
        ]
        data = struct.pack(f"{len(values)}I", *(int(value) for _, value in values))
        specialization = vk.VkSpecializationInfo(
            mapEntryCount=len(entries),
            pMapEntries=entries,
            dataSize=len(data),
            pData=vk.ffi.from_buffer(data),
        )
        stage = vk.VkPipelineShaderStageCreateInfo(
            stage=vk.VK_SHADER_STAGE_COMPUTE_BIT,
            module=module,
            pName="main",
            pSpecializationInfo=specialization,
        )
        create = vk.VkComputePipelineCreateInfo(
            flags=CAPTURE_STATISTICS, stage=stage, layout=layout
        )
        pipeline = vk.vkCreateComputePipelines(device, None, 1, [create], None)[0]
        figures = []
        info = vk.VkPipelineInfoKHR(pipeline=pipeline)
        for index, _ in enumerate(executables(device, info)):
            executable = vk.VkPipelineExecutableInfoKHR(pipeline=pipeline, executableIndex=index)
            figures += [f"{s.name}={_value(s)}" for s in statistics(device, executable)]
        print(f"{tile_text}: {' '.join(figures)}", flush=True)
        vk.vkDestroyPipeline(device, pipeline, None)
    for module in modules.values():
        vk.vkDestroyShaderModule(device, module, None)
    vk.vkDestroyPipelineLayout(device, layout, None)
    vk.vkDestroyDescriptorSetLayout(device, set_layout, None)
    vk.vkDestroyDevice(device, None)
    vk.vkDestroyInstance(instance, None)
    return 0


if __name__ == "__main__":
    sys.exit(main())
