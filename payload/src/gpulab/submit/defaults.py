"""What `gpulab submit` assumes unless told otherwise (a module of constants: the command's
parser reads them without loading Slurm's client or SSH)."""

DEFAULT_SHARED_DIR = "/srv/gpulab/jobs"
"""Where job directories go unless --shared-dir or GPULAB_SHARED_DIR says otherwise: a folder
of the shared storage that the controller and every worker see at this path."""
