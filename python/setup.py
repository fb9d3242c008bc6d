# The wheel `make python` builds carries libstepblame.so: a wheel for this
# platform, not a pure one. From a source tree without the library, the
# package finds it at run time (stepblame/__init__.py).
import os
from setuptools import setup
from setuptools.dist import Distribution


class WithLibrary(Distribution):
    def has_ext_modules(self):
        return os.path.exists(os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                           "stepblame", "libstepblame.so"))


setup(distclass=WithLibrary)
