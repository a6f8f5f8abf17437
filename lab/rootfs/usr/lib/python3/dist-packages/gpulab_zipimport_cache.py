"""The lab image's bytecode cache for the sources Ansible's modules import from their zip.

Every Ansible module run sends its module_utils as sources in a zip (AnsiballZ), and
Python's zipimport compiles them anew each time: about 80 ms of CPU on an amd64 node and
a third of a second under qemu, more than half of what a task costs the node. This keeps
the compiled code in /var/cache/gpulab-zipimport, keyed by the source's hash and the
interpreter, and hands zipimport a copy with the file names of this run. Only Ansible's
payload zips are touched; the code that runs is the same. Loaded by
gpulab-zipimport-cache.pth at interpreter start-up: in the lab's and molecule's nodes, and in
the control machine's venv (scripts/setup.sh), whose Python runs the modules of tasks on this
machine (the tests' local hosts, tasks delegated to localhost). Hosts converged by users pay
Ansible's usual cost (README.md, "Timing").
"""

import _imp
import marshal
import os
import sys
import zipimport
from _blake2 import blake2b

# In a venv, a directory of the venv (written by whoever owns it, removed with it).
_CACHE_DIR = (
    os.path.join(sys.prefix, "var/cache/gpulab-zipimport")
    if sys.prefix != sys.base_prefix
    else "/var/cache/gpulab-zipimport"
)
# The bytecode format and the optimisation level decide what compile() returns.
_INTERPRETER = f"{sys.implementation.cache_tag}-O{sys.flags.optimize}".encode()
_compile_source = getattr(zipimport, "_compile_source", None)


def _cached_compile_source(pathname: str, source: bytes):  # -> code object
    if "_payload.zip" not in pathname:  # Ansible's ansible_MODULE_payload.zip only
        return _compile_source(pathname, source)
    path = f"{_CACHE_DIR}/{blake2b(source, digest_size=20, key=_INTERPRETER).hexdigest()}"
    try:
        with open(path, "rb") as cached:
            code = marshal.load(cached)
    except (OSError, EOFError, ValueError, TypeError):
        code = _compile_source(pathname, source)
        partial = f"{path}.{os.getpid()}"
        try:
            os.makedirs(_CACHE_DIR, exist_ok=True)
            with open(partial, "wb") as out:
                marshal.dump(code, out)
            os.replace(partial, path)  # whole or absent for a concurrent reader
        except OSError:  # not writable, or full: this run compiled, the next one will too
            try:  # noqa: SIM105 (contextlib is one more import at every interpreter start)
                os.unlink(partial)
            except OSError:
                pass
        return code
    _imp._fix_co_filename(code, pathname)  # tracebacks name this run's zip
    return code


if _compile_source is not None:
    zipimport._compile_source = _cached_compile_source
