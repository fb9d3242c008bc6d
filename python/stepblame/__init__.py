"""Step marks for stepblame, from Python.

stepblame attaches to a running trainer and blames each training step's GPU
idle time on what the host did. It finds the steps by their marks: this
package fires the USDT probe ``stepblame:step`` in ``libstepblame.so``, a
single nop until stepblame traces the process, so marks cost nothing when no
one is looking.

    import stepblame

    for i, batch in enumerate(loader):
        stepblame.step(i)                  # step i starts here
        train_one_step(batch)

    with stepblame.step(i):                # the same, as a block
        train_one_step(batch)

    stepblame.mark_optimizer_steps()       # PyTorch: a mark after every optimizer.step()

Without changing the script at all: ``sudo stepblame run
--mark-optimizer-steps -- python3 train.py``.

The library is loaded on import, so that a tracer attaching later finds the
probe before the first mark. It is looked for in $STEPBLAME_LIB, then beside
this file (a wheel built by ``make python`` carries it), then where the
dynamic linker finds ``libstepblame.so`` (``make install`` puts it in
$(PREFIX)/lib). Not found: one RuntimeWarning says where it looked, and the
marks do nothing.
"""
import ctypes
import ctypes.util
import os
import threading
import warnings

__version__ = "0.1.0"
__all__ = ["step", "mark_optimizer_steps", "library", "StepblameError"]

_LIB = "libstepblame.so"


class StepblameError(RuntimeError):
    """A mark that cannot be made as asked (a bad step number, no PyTorch)."""


def _candidates():
    env = os.environ.get("STEPBLAME_LIB")
    if env:
        return [env]
    here = os.path.dirname(os.path.abspath(__file__))
    found = ctypes.util.find_library("stepblame")
    out = [os.path.join(here, _LIB)]
    if found:
        out.append(found)
    out += [os.path.join(d, _LIB) for d in ("/usr/local/lib", "/usr/lib")]
    return out


_lock = threading.Lock()
_loaded = None      # (path, CDLL) once looked for; (None, None) if not found
_next = 0           # the number step() gives when it is given none


def _load():
    global _loaded
    if _loaded is not None:
        return _loaded[1]
    with _lock:
        if _loaded is not None:
            return _loaded[1]
        tried = []
        for path in _candidates():
            try:
                lib = ctypes.CDLL(path)
                for fn in (lib.stepblame_step, lib.stepblame_step_begin, lib.stepblame_step_end):
                    fn.argtypes = [ctypes.c_ulonglong]
                    fn.restype = None
            except (OSError, AttributeError) as e:
                tried.append("%s (%s)" % (path, e))
                continue
            _loaded = (path, lib)
            return lib
        _loaded = (None, None)
    warnings.warn("stepblame: %s not found, step marks do nothing; looked at: %s. Install "
                  "stepblame (make install) or set STEPBLAME_LIB" % (_LIB, "; ".join(tried)),
                  RuntimeWarning, stacklevel=3)
    return None


def library():
    """The path of the libstepblame.so the marks go through, or None."""
    _load()
    return _loaded[0]


def _number(n):
    global _next
    with _lock:
        if n is None:
            n = _next
        elif isinstance(n, bool) or not isinstance(n, int) or not 0 <= n < 1 << 64:
            raise StepblameError("a step number is an integer in [0, 2**64), not %r" % (n,))
        _next = n + 1
    return n


class _Step:
    """What step() returns: the mark is made already; as a block, its end is marked too."""
    __slots__ = ("n",)

    def __init__(self, n):
        self.n = n

    def __enter__(self):
        return self.n

    def __exit__(self, *exc):
        lib = _loaded[1]
        if lib is not None:
            lib.stepblame_step_end(self.n)
        return False

    def __int__(self):
        return self.n

    def __repr__(self):
        return "stepblame.step(%d)" % self.n


def step(n=None):
    """Mark the start of training step n (default: one more than the last).

    Returns an object that, used as ``with stepblame.step(n): ...``, also
    marks where the block ends (the probe stepblame:step_end; stepblame's
    steps run from one mark to the next either way).
    """
    n = _number(n)
    lib = _loaded[1]
    if lib is not None:
        lib.stepblame_step(n)
    return _Step(n)


class _Handle:
    def __init__(self, remove):
        self._remove = remove

    def remove(self):
        """Stop marking optimizer steps."""
        if self._remove:
            self._remove()
            self._remove = None


_opt_state = threading.local()


def mark_optimizer_steps(optimizer=None, start=1):
    """Mark a step after every PyTorch optimizer step.

    After the k-th ``optimizer.step()`` returns, step ``start + k - 1`` is
    marked: with the default start of 1, stepblame's step N is the loop's
    iteration N (0-based), each running from one optimizer step to the next;
    iteration 0, before the first, is not marked. ``optimizer`` limits it to
    one optimizer (a GAN's two each step otherwise mark twice). An optimizer
    step made inside another (a wrapper such as Lookahead) marks once.

    Uses the global optimizer hooks where PyTorch has them (2.0 on); on older
    versions, wraps ``step`` of every optimizer class, those defined later
    included. Returns a handle whose ``remove()`` stops it.
    """
    try:
        # by module, not attribute: run as torch.optim finishes importing (run
        # --mark-optimizer-steps), the partly made torch has no .optim yet
        import torch.optim.optimizer as topt
    except ImportError as e:
        raise StepblameError("mark_optimizer_steps needs PyTorch: %s" % e) from None
    count = [start]

    def before(opt):
        _opt_state.depth = getattr(_opt_state, "depth", 0) + 1

    def after(opt, ok=True):
        _opt_state.depth = max(getattr(_opt_state, "depth", 1) - 1, 0)
        if ok and _opt_state.depth == 0 and (optimizer is None or opt is optimizer):
            with _lock:
                n = count[0]
                count[0] = n + 1
            step(n)

    if hasattr(topt, "register_optimizer_step_pre_hook") and \
            hasattr(topt, "register_optimizer_step_post_hook"):
        h1 = topt.register_optimizer_step_pre_hook(lambda opt, args, kwargs: before(opt))
        h2 = topt.register_optimizer_step_post_hook(lambda opt, args, kwargs: after(opt))
        return _Handle(lambda: (h1.remove(), h2.remove()))
    return _Handle(_wrap_classes(topt.Optimizer, before, after))


def _wrap_classes(base, before, after):
    """Older PyTorch: wrap step() of base and of every subclass, now and later."""
    wrapped = []

    def wrap(cls):
        f = cls.__dict__.get("step")
        if f is None or getattr(f, "_stepblame", False):
            return

        def step_marked(self, *args, **kwargs):
            before(self)
            ok = False
            try:
                r = f(self, *args, **kwargs)
                ok = True
                return r
            finally:
                after(self, ok)  # a step that raised is not marked

        step_marked._stepblame = True
        step_marked.__wrapped__ = f
        step_marked.__name__ = getattr(f, "__name__", "step")
        step_marked.__doc__ = getattr(f, "__doc__", None)
        setattr(cls, "step", step_marked)
        wrapped.append((cls, f))

    def walk(cls):
        wrap(cls)
        for sub in cls.__subclasses__():
            walk(sub)

    walk(base)
    prev = base.__dict__.get("__init_subclass__")

    def init_subclass(cls, **kwargs):
        if prev is not None:
            prev.__func__(cls, **kwargs)
        else:
            super(base, cls).__init_subclass__(**kwargs)
        wrap(cls)

    base.__init_subclass__ = classmethod(init_subclass)

    def remove():
        for cls, f in wrapped:
            setattr(cls, "step", f)
        if prev is not None:
            base.__init_subclass__ = prev
        else:
            del base.__init_subclass__
    return remove


# mapped now, so that a tracer attaching later finds the probe before the first mark
_load()
