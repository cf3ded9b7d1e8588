from experiments.llama_configs import Picker, RngPicker  # noqa
SAMPLERS = {}
