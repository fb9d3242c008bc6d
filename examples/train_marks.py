#!/usr/bin/env python3
"""Mark training steps for stepblame from Python, through libstepblame.so.

    python3 examples/train_marks.py            # with build/libstepblame.so
    STEPBLAME_LIB=/usr/local/lib/libstepblame.so python3 examples/train_marks.py

The three lines that matter are the ctypes ones below; stepblame_step(n) fires
the USDT probe stepblame:step, a nop unless `stepblame record/attach` is tracing
this process.
"""
import ctypes, os, time

sb = ctypes.CDLL(os.environ.get("STEPBLAME_LIB", os.path.join(os.path.dirname(__file__), "..", "build", "libstepblame.so")))
sb.stepblame_step.argtypes = [ctypes.c_ulonglong]
for step in range(int(os.environ.get("STEPS", "100"))):
    sb.stepblame_step(step)          # a step starts here
    time.sleep(0.01)                 # your training step
