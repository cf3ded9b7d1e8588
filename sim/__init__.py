"""The PIM device simulator: hardware description, instruction set and program format,
cycle-level timing, functional execution, analytical bounds and the kernel library.

Usable on its own (numpy and PyYAML only). ``SIM_VERSION`` changes whenever a change
to the simulator can change a measured figure; it is part of every database key.
"""

SIM_VERSION = "1.1"

__all__ = ["SIM_VERSION"]
