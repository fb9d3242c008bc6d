#!/usr/bin/env python3
"""The stepblame Python package without a tracer: step numbers, the marks it
makes through the library (a stand-in records the calls), a library that is
not there, and both ways of hooking optimizer steps, on stand-in torch
modules (the global hooks of PyTorch 2, which Debian's 1.13 lacks, and the
class wrapping of older versions). tests/scenarios/python_package.sh runs it
with the package on sys.path; it prints PASS/FAIL per case.
"""
import contextlib
import os
import subprocess
import sys
import types
import warnings

import stepblame

results = []


def case(fn):
    try:
        fn()
        results.append("PASS python_%s" % fn.__name__)
    except AssertionError as e:
        results.append("FAIL python_%s: %s" % (fn.__name__, e))
    except Exception as e:  # a broken package is a failure too, with its error
        results.append("FAIL python_%s: %s: %s" % (fn.__name__, type(e).__name__, e))
    return fn


class FakeLib:
    """What the package calls in libstepblame.so, recorded."""

    def __init__(self):
        self.calls = []
        self.stepblame_step = lambda n: self.calls.append(("step", n))
        self.stepblame_step_begin = lambda n: self.calls.append(("begin", n))
        self.stepblame_step_end = lambda n: self.calls.append(("end", n))


def fake():
    lib = FakeLib()
    stepblame._loaded = ("fake", lib)
    stepblame._next = 0
    return lib


@case
def numbers():
    lib = fake()
    stepblame.step()
    stepblame.step()
    stepblame.step(10)
    stepblame.step()
    assert lib.calls == [("step", 0), ("step", 1), ("step", 10), ("step", 11)], lib.calls
    for bad in (-1, 1 << 64, "3", 2.0, True):
        try:
            stepblame.step(bad)
        except stepblame.StepblameError:
            continue
        raise AssertionError("step(%r) was taken" % (bad,))
    assert lib.calls[-1] == ("step", 11), "a refused number made a mark: %s" % lib.calls


@case
def block():
    lib = fake()
    with stepblame.step(5) as n:
        assert n == 5 and lib.calls == [("step", 5)], (n, lib.calls)
    assert lib.calls == [("step", 5), ("end", 5)], lib.calls


@case
def missing_library():
    code = ("import warnings\n"
            "with warnings.catch_warnings(record=True) as w:\n"
            "    warnings.simplefilter('always')\n"
            "    import stepblame\n"
            "    stepblame.step(); stepblame.step()\n"
            "print(stepblame.library(), len(w), w[0].category.__name__, str(w[0].message))\n")
    env = dict(os.environ, STEPBLAME_LIB="/nonexistent/libstepblame.so")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    got = out.stdout.split(" ", 3)
    assert got[:3] == ["None", "1", "RuntimeWarning"] and "/nonexistent/libstepblame.so" in got[3], \
        out.stdout


def fake_torch(with_global_hooks):
    """Stand-in torch, torch.optim and torch.optim.optimizer modules."""
    torch = types.ModuleType("torch")
    optim = types.ModuleType("torch.optim")
    topt = types.ModuleType("torch.optim.optimizer")
    torch.optim = optim
    optim.optimizer = topt

    class Optimizer:
        def step(self, closure=None):
            raise NotImplementedError

    optim.Optimizer = topt.Optimizer = Optimizer
    if with_global_hooks:
        topt.pre, topt.post = {}, {}

        class Handle:
            def __init__(self, d, k):
                self.d, self.k = d, k

            def remove(self):
                self.d.pop(self.k, None)

        keys = iter(range(1, 1 << 30))

        def reg(d):
            def register(fn):
                k = next(keys)
                d[k] = fn
                return Handle(d, k)
            return register

        topt.register_optimizer_step_pre_hook = reg(topt.pre)
        topt.register_optimizer_step_post_hook = reg(topt.post)
    sys.modules.update({"torch": torch, "torch.optim": optim, "torch.optim.optimizer": topt})
    return topt


@contextlib.contextmanager
def stand_in_torch(with_global_hooks):
    """fake_torch() for the block, the real modules (or none) back after it."""
    names = ("torch", "torch.optim", "torch.optim.optimizer")
    saved = {k: sys.modules.get(k) for k in names}
    try:
        yield fake_torch(with_global_hooks)
    finally:
        for k, v in saved.items():
            if v is None:
                sys.modules.pop(k, None)
            else:
                sys.modules[k] = v


def run_hooked(topt, opt, inner=None):
    """An optimizer step as PyTorch 2 runs it: pre hooks, the step, post hooks."""
    for h in list(topt.pre.values()):
        h(opt, (), {})
    if inner is not None:
        run_hooked(topt, inner)
    for h in list(topt.post.values()):
        h(opt, (), {})


@case
def optimizer_global_hooks():
    with stand_in_torch(True) as topt:
        lib = fake()
        a, b = object(), object()
        h = stepblame.mark_optimizer_steps()
        run_hooked(topt, a)
        run_hooked(topt, a)
        run_hooked(topt, a, inner=b)  # a wrapper's step around another's: one mark
        assert lib.calls == [("step", 1), ("step", 2), ("step", 3)], lib.calls
        h.remove()
        run_hooked(topt, a)
        assert len(lib.calls) == 3 and not topt.pre and not topt.post, "marks after remove()"
        lib.calls.clear()
        h = stepblame.mark_optimizer_steps(optimizer=b, start=7)
        run_hooked(topt, a)
        run_hooked(topt, b)
        h.remove()
        assert lib.calls == [("step", 7)], "only b's steps, from 7: %s" % lib.calls


@case
def optimizer_class_wrapping():
    with stand_in_torch(False) as topt:
        lib = fake()

        class SGD(topt.Optimizer):
            def step(self, closure=None):
                return "sgd"

        class Broken(topt.Optimizer):
            def step(self, closure=None):
                raise ValueError("nan")

        h = stepblame.mark_optimizer_steps()

        class Adam(topt.Optimizer):  # defined after: wrapped as it is made
            def step(self, closure=None):
                return "adam"

        class Outer(topt.Optimizer):
            def __init__(self, inner):
                self.inner = inner

            def step(self, closure=None):
                return self.inner.step()

        assert SGD().step() == "sgd" and Adam().step() == "adam", "results changed"
        Outer(SGD()).step()
        try:
            Broken().step()
        except ValueError:
            pass
        assert lib.calls == [("step", 1), ("step", 2), ("step", 3)], lib.calls
        h.remove()
        SGD().step()
        assert len(lib.calls) == 3 and not getattr(SGD.step, "_stepblame", False), \
            "still marking after remove()"


@case
def lightning_callback():
    lib = fake()
    from stepblame.lightning import StepblameCallback
    cb = StepblameCallback()
    for i in range(3):
        cb.on_train_batch_start(None, None, None, i)
    assert lib.calls == [("step", 0), ("step", 1), ("step", 2)], lib.calls


@case
def no_torch():
    saved = sys.modules.get("torch")
    sys.modules["torch"] = None  # import torch raises ImportError
    try:
        stepblame.mark_optimizer_steps()
    except stepblame.StepblameError as e:
        assert "PyTorch" in str(e), str(e)
    else:
        raise AssertionError("no error without PyTorch")
    finally:
        if saved is None:
            sys.modules.pop("torch", None)
        else:
            sys.modules["torch"] = saved


warnings.simplefilter("ignore")
print("\n".join(results))
