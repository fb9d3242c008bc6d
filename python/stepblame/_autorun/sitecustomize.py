"""Loaded by Python at start-up under ``stepblame run --mark-optimizer-steps``
(which puts this directory first on PYTHONPATH): marks a step after every
PyTorch optimizer step once the script imports torch.optim, with no change
to the script. Then runs the sitecustomize it shadows, if there is one.
Nothing happens under ``python -S`` or ``-I``, which skip it.
"""
import importlib.abc
import importlib.util
import os
import sys


def _chain():
    here = os.path.dirname(os.path.abspath(__file__))
    for d in sys.path:
        if os.path.abspath(d or os.curdir) == here:
            continue
        path = os.path.join(d or os.curdir, "sitecustomize.py")
        if os.path.isfile(path):
            spec = importlib.util.spec_from_file_location("_stepblame_shadowed_sitecustomize", path)
            mod = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(mod)
            return


class _AfterTorchOptim(importlib.abc.MetaPathFinder):
    """Once torch.optim has run, hooks its optimizers (then steps aside)."""

    def find_spec(self, name, path, target=None):
        if name != "torch.optim":
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec(name)
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        run = spec.loader.exec_module

        def exec_module(module):
            run(module)
            try:
                import stepblame
                stepblame.mark_optimizer_steps()
            except Exception as e:  # never break the trainer
                sys.stderr.write("stepblame: cannot mark optimizer steps: %s\n" % e)

        spec.loader.exec_module = exec_module
        return spec


if os.environ.get("STEPBLAME_MARK_OPTIMIZER") == "1":
    if "torch.optim" in sys.modules:
        import stepblame
        stepblame.mark_optimizer_steps()
    else:
        sys.meta_path.insert(0, _AfterTorchOptim())
try:
    _chain()
except Exception as e:
    sys.stderr.write("stepblame: the sitecustomize this one shadows failed: %s\n" % e)
