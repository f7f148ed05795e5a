"""pip install --no-build-isolation .: the package python/frugal with its
extension _frugal, which the project's CMake builds (target frugal_python)
in the README's build folder, or in FRUGAL_BUILD_DIR, configured for the
Python that runs pip where the folder is new. The wheel is that build's
module: for this machine's libraries and this Python's ABI."""
import glob
import os
import shutil
import subprocess
import sys
import sysconfig

from setuptools import Distribution, setup
from setuptools.command.build_py import build_py

ROOT = os.path.dirname(os.path.abspath(__file__))
BUILD = os.path.abspath(os.environ.get("FRUGAL_BUILD_DIR", os.path.join(ROOT, "build")))


class CmakeModule(build_py):
    """Copies python/frugal, then the extension CMake builds beside it."""

    def run(self):
        super().run()
        if not os.path.exists(os.path.join(BUILD, "CMakeCache.txt")):
            subprocess.check_call(["cmake", "-S", ROOT, "-B", BUILD, "-DCMAKE_BUILD_TYPE=Release",
                                   "-DPYTHON_EXECUTABLE=" + sys.executable])
        subprocess.check_call(["cmake", "--build", BUILD, "--target", "frugal_python", "-j", str(os.cpu_count() or 2)])
        module = os.path.join(BUILD, "python", "frugal", "_frugal" + sysconfig.get_config_var("EXT_SUFFIX"))
        if not os.path.exists(module):
            built = glob.glob(os.path.join(BUILD, "python", "frugal", "_frugal*"))
            raise SystemExit("frugal: %s holds %s, not the module for this Python (%s, %s); give FRUGAL_BUILD_DIR a "
                             "new folder, which is configured for it" % (BUILD, built or "no module", sys.executable,
                                                                         sysconfig.get_config_var("EXT_SUFFIX")))
        shutil.copy2(module, os.path.join(self.build_lib, "frugal"))


class BinaryDistribution(Distribution):
    """A wheel for this platform: it holds a compiled module."""

    def has_ext_modules(self):
        return True


setup(packages=["frugal"], package_dir={"": "python"}, cmdclass={"build_py": CmakeModule},
      distclass=BinaryDistribution, options={"build": {"build_base": os.path.join(BUILD, "pip")},
                                             "egg_info": {"egg_base": BUILD}})
