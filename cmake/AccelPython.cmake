# Pin the embedded interpreter to Debian's python3.11 (with Debian's NumPy).
# A pyenv Python without NumPy comes first on PATH on our machines; letting
# FindPython pick it links the wrong libpython (see docs/architecture.md).
set(ACCEL_PYTHON "/usr/bin/python3.11" CACHE FILEPATH "Interpreter whose libpython and NumPy are embedded")
if(NOT EXISTS "${ACCEL_PYTHON}")
  message(FATAL_ERROR "${ACCEL_PYTHON} is missing: run scripts/setup.sh (apt-get install python3.11-dev python3-numpy pybind11-dev)")
endif()
set(Python_EXECUTABLE "${ACCEL_PYTHON}" CACHE FILEPATH "" FORCE)
set(PYBIND11_FINDPYTHON ON)
find_package(Python 3.11 EXACT REQUIRED COMPONENTS Interpreter Development.Embed NumPy)
find_package(pybind11 2.10 CONFIG REQUIRED)
