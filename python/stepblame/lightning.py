"""A Lightning callback that marks every training batch as a stepblame step.

    from stepblame.lightning import StepblameCallback
    trainer = lightning.Trainer(callbacks=[StepblameCallback()])

Step N is the N-th training batch of the run (0-based, across epochs), marked
as the batch starts: a step runs from one batch's start to the next. It
subclasses the Callback of ``lightning.pytorch`` or ``pytorch_lightning``,
whichever is installed; without either it is a plain class with the same
hook, for loops that call it themselves.
"""
import stepblame

try:
    from lightning.pytorch.callbacks import Callback as _Base
except ImportError:
    try:
        from pytorch_lightning.callbacks import Callback as _Base
    except ImportError:
        _Base = object

__all__ = ["StepblameCallback"]


class StepblameCallback(_Base):
    """Marks stepblame step N at the start of the N-th training batch."""

    def __init__(self, start=0):
        super().__init__()
        self._n = start

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx, *args, **kwargs):
        stepblame.step(self._n)
        self._n += 1
